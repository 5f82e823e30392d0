package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

// kubeFlags are --kubeconfig, --context and -n/--namespace, declared once on the root
// command for every verb: a small equivalent of cli-runtime's genericclioptions.ConfigFlags,
// which this module does not carry. They load as kubectl does: --kubeconfig, else
// $KUBECONFIG, else ~/.kube/config, else the pod's in-cluster config and namespace.
type kubeFlags struct {
	flags     *pflag.FlagSet // the root's persistent flags, to tell which were given
	rules     *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
}

func newKubeFlags() *kubeFlags {
	return &kubeFlags{rules: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
}

func (k *kubeFlags) register(fs *pflag.FlagSet) {
	k.flags = fs
	fs.StringVar(&k.rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else the pod's in-cluster config)")
	fs.StringVar(&k.overrides.CurrentContext, "context", "", "kubeconfig context to use")
	fs.StringVarP(&k.overrides.Context.Namespace, "namespace", "n", "", "namespace to work in (default: the context's, or the pod's)")
}

// kubeUse says which of the kubeconfig flags a verb honours.
type kubeUse string

const (
	kubeNone      kubeUse = ""           // reads no cluster
	kubeInCluster kubeUse = "in-cluster" // a step: its pod's in-cluster config, or $KUBECONFIG
	kubeConfig    kubeUse = "config"     // a cluster, across namespaces: --kubeconfig and --context
	kubeNamespace kubeUse = "namespace"  // a cluster and a namespace in it: all three
)

// kubeUseAnnotation records a verb's kubeUse on its command; subcommands inherit it.
const kubeUseAnnotation = "bpa.akraino.org/kube-flags"

// why each kubeUse refuses the flags it does not honour.
var kubeUseWhy = map[kubeUse]string{
	kubeNone:      "it reads no cluster",
	kubeInCluster: "a step uses its pod's in-cluster config (or $KUBECONFIG)",
	kubeConfig:    "it works across namespaces",
}

func markKubeUse(cmd *cobra.Command, use kubeUse) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[kubeUseAnnotation] = string(use)
}

func kubeUseOf(cmd *cobra.Command) kubeUse {
	for c := cmd; c != nil; c = c.Parent() {
		if use, ok := c.Annotations[kubeUseAnnotation]; ok {
			return kubeUse(use)
		}
	}
	return kubeNone
}

// check refuses a kubeconfig flag given to a verb that would not use it, rather than
// ignore it. A verb's own flag of the same name (a step's --namespace) shadows the root's
// and is not seen here.
func (k *kubeFlags) check(cmd *cobra.Command) error {
	use := kubeUseOf(cmd)
	for _, name := range []string{"kubeconfig", "context", "namespace"} {
		honoured := use == kubeNamespace || (use == kubeConfig && name != "namespace")
		if k.given(name) && !honoured {
			return fmt.Errorf("--%s does not apply to %s: %s", name, cmd.CommandPath(), kubeUseWhy[use])
		}
	}
	return nil
}

// given reports whether the root flag name was set on the command line.
func (k *kubeFlags) given(name string) bool {
	f := k.flags.Lookup(name)
	return f != nil && f.Changed
}

func (k *kubeFlags) clientConfig() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.rules, k.overrides)
}

// restConfig is the client configuration the flags name. As controller-runtime's GetConfig
// does, it leaves client-side throttling off unless the kubeconfig sets a QPS: the
// apiserver's priority and fairness protects it, and a limit here only queues requests.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	cfg, err := k.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1
	}
	return cfg, nil
}

// client is a client with BPA's scheme, and the namespace to work in.
func (k *kubeFlags) client() (client.Client, string, error) {
	cfg, err := k.restConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := k.clientConfig().Namespace()
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	return c, ns, err
}
