package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/akraino-edge-stack/bpa/pkg/controller"
)

func init() {
	registerKube(kubeNamespace, func(k *kubeFlags) *cobra.Command {
		var opts controller.Options
		var namespaces string
		var qps float32
		var burst int
		zapOpts := zap.Options{}
		cmd := &cobra.Command{
			Use:   "controller",
			Short: "Run the BPA controller (Provisioning, Software and Cluster reconcilers)",
			Long: "controller runs BPA's reconcilers against the cluster of the kubeconfig (--kubeconfig,\n" +
				"--context; in a pod, its in-cluster config). It watches the namespaces of --namespaces, or\n" +
				"the one of -n, or every namespace.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
				switch {
				case k.given("namespace") && cmd.Flags().Changed("namespaces"):
					return fmt.Errorf("-n %s and --namespaces %s both name the namespaces to watch: give one", k.overrides.Context.Namespace, namespaces)
				case k.given("namespace"):
					opts.Namespaces = []string{k.overrides.Context.Namespace}
				case namespaces != "":
					opts.Namespaces = strings.Split(namespaces, ",")
				}
				if opts.ApplyTemplates && len(opts.Namespaces) == 0 {
					if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
						opts.Namespaces = []string{ns}
					}
				}
				cfg, err := k.restConfig()
				if err != nil {
					return err
				}
				// restConfig already turns client-side throttling off and leaves protection
				// to the apiserver's priority and fairness; a limit here only queues a rack
				// of CRs behind the client (measured in test/bench).
				if qps > 0 {
					cfg.QPS, cfg.Burst = qps, burst
				}
				ctx, stop := signalContext(cmd)
				defer stop()
				err = controller.Run(ctx, cfg, opts)
				if controller.IsRestart(err) {
					// Not a failure: the Deployment starts the controller again, now
					// watching Workflows, or no longer.
					fmt.Fprintln(cmd.ErrOrStderr(), err)
					return nil
				}
				return err
			},
		}
		f := cmd.Flags()
		f.StringVar(&namespaces, "namespaces", os.Getenv("WATCH_NAMESPACES"), "comma-separated namespaces to watch (default: the one of -n, else $WATCH_NAMESPACES, else all; the WorkflowTemplates are applied into each)")
		f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8443", "metrics listen address; 0 disables")
		f.BoolVar(&opts.MetricsInsecure, "metrics-insecure", false, "serve metrics over plain HTTP without authentication (default: HTTPS, for a token that may get /metrics: the bpa-metrics-reader ClusterRole)")
		f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "health and readiness probe listen address; 0 disables")
		f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active replica")
		f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease")
		f.BoolVar(&opts.ApplyTemplates, "apply-workflowtemplates", true, "server-side apply BPA's WorkflowTemplates into each watched namespace at start")
		f.StringVar(&opts.StepImage, "step-image", os.Getenv("BPA_STEP_IMAGE"), "image of the bpa step containers (default: the one in the embedded templates)")
		f.StringVar(&opts.Translator.ServiceAccountName, "step-service-account", "bpa-step", "service account of the step pods")
		f.Float32Var(&qps, "kube-api-qps", 0, "client-side limit of queries per second to the apiserver; 0 means none")
		f.IntVar(&burst, "kube-api-burst", 0, "burst allowed with --kube-api-qps")
		f.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "CRs of each kind reconciled at once (each waits mostly on the apiserver)")
		goFlags := flag.NewFlagSet("bpa", flag.ContinueOnError)
		zapOpts.BindFlags(goFlags)
		f.AddGoFlagSet(goFlags)
		return cmd
	})
}
