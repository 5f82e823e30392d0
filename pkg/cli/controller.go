package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/akraino-edge-stack/bpa/pkg/controller"
)

func init() {
	register(func() *cobra.Command {
		var opts controller.Options
		var namespaces string
		var qps float32
		var burst int
		zapOpts := zap.Options{}
		cmd := &cobra.Command{
			Use:   "controller",
			Short: "Run the BPA controller (Provisioning, Software and Cluster reconcilers)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
				if namespaces != "" {
					opts.Namespaces = strings.Split(namespaces, ",")
				}
				if opts.ApplyTemplates && len(opts.Namespaces) == 0 {
					if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
						opts.Namespaces = []string{ns}
					}
				}
				cfg, err := ctrl.GetConfig()
				if err != nil {
					return err
				}
				// controller-runtime already turns client-side throttling off and leaves
				// protection to the apiserver's priority and fairness; a limit here only
				// queues a rack of CRs behind the client (measured in test/bench).
				if qps > 0 {
					cfg.QPS, cfg.Burst = qps, burst
				}
				err = controller.Run(ctrl.SetupSignalHandler(), cfg, opts)
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
		f.StringVar(&namespaces, "namespaces", os.Getenv("WATCH_NAMESPACES"), "comma-separated namespaces to watch (default: all; the WorkflowTemplates are applied into each)")
		f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "metrics listen address; 0 disables")
		f.StringVar(&opts.ProbeAddr, "health-probe-bind-address", ":8081", "health and readiness probe listen address; 0 disables")
		f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active replica")
		f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader-election lease")
		f.BoolVar(&opts.ApplyTemplates, "apply-workflowtemplates", true, "server-side apply BPA's WorkflowTemplates into each watched namespace at start")
		f.StringVar(&opts.StepImage, "step-image", os.Getenv("BPA_STEP_IMAGE"), "image of the bpa step containers (default: the one in the embedded templates)")
		f.StringVar(&opts.Translator.ServiceAccountName, "step-service-account", "bpa-step", "service account of the step pods")
		f.Float32Var(&qps, "kube-api-qps", 0, "client-side limit of queries per second to the apiserver; 0 means none")
		f.IntVar(&burst, "kube-api-burst", 0, "burst allowed with --kube-api-qps")
		f.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", 8, "CRs of each kind reconciled at once (each waits mostly on the apiserver)")
		fs := cmd.Flags()
		goFlags := newGoFlagSet()
		zapOpts.BindFlags(goFlags)
		fs.AddGoFlagSet(goFlags)
		return cmd
	})
}
