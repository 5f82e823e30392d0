// Package renderinventory is `bpa step render-inventory`: it renders the hosts.ini and the
// extra-vars file that run-kubespray hands to ansible-playbook (pkg/inventory), from the
// resolved hosts and the Provisioning (inventory flavour and template, PodSubnet,
// kubespray.extraVars, KUDPlugins). Both outputs are plain Argo parameters: nothing in them
// is secret, and users can read exactly what kubespray was given in the Argo UI.
package renderinventory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// DefaultTemplateKey is the ConfigMap key read when templateConfigMapRef names none (the
// CRD defaults it too, but a CR read from a file has no defaults).
const DefaultTemplateKey = "hosts.ini.tmpl"

// Options are the step's flags.
type Options struct {
	CR              stepio.CR
	HostsFile       string
	OutputInventory string
	OutputVars      string
	// ArtifactsCA is a file with the site policy's CA for spec.offline's server (PEM), or
	// empty; "" for no file.
	ArtifactsCA string
}

// Command returns `bpa step render-inventory`.
func Command() *cobra.Command {
	var o Options
	return stepcmd.Command(stepcmd.Step{
		Name:  "render-inventory",
		Short: "Render the kubespray inventory and extra-vars file for the chosen hosts",
		Flags: func(cmd *cobra.Command) {
			o.CR.AddFlags(cmd.Flags())
			cmd.Flags().StringVar(&o.HostsFile, "hosts-file", stepio.In(stepio.HostsFile), "hosts with their IPs, from resolve-leases (JSON)")
			cmd.Flags().StringVar(&o.OutputInventory, "output-inventory", stepio.Out(stepio.InventoryFile), "file to write the inventory to")
			cmd.Flags().StringVar(&o.OutputVars, "output-vars", stepio.Out(stepio.ExtraVarsFile), "file to write the ansible-playbook extra vars to (YAML, strings tagged !unsafe)")
			cmd.Flags().StringVar(&o.ArtifactsCA, "artifacts-ca", "", "file with the site policy's CA for spec.offline's artifact server (PEM; empty file: none); containerd's mirrors then name the node file run-kubespray installs it at")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error {
			return Run(ctx, c, o, os.Stderr)
		},
	})
}

// Run renders and writes both outputs; warnings and what it did go to warn (the step's log).
func Run(ctx context.Context, c client.Reader, o Options, warn io.Writer) error {
	hosts, err := stepio.ReadHosts(o.HostsFile)
	if err != nil {
		return err
	}
	p, err := o.CR.Get(ctx, c)
	if err != nil {
		return err
	}
	opts, err := templateOptions(ctx, c, p)
	if err != nil {
		return err
	}
	ini, warnings, err := inventory.Render(hosts, opts)
	if err != nil {
		return fmt.Errorf("Provisioning %s: inventory: %w", p.Name, err)
	}
	caPath, err := nodeCAPath(o.ArtifactsCA)
	if err != nil {
		return err
	}
	vars, err := inventory.ExtraVarsWithCA(&p.Spec, caPath)
	if err != nil {
		return fmt.Errorf("Provisioning %s: %w", p.Name, err)
	}
	for _, w := range warnings {
		fmt.Fprintf(warn, "warning: Provisioning %s: %s\n", p.Name, w)
	}
	if err := stepio.WriteOutput(o.OutputInventory, ini); err != nil {
		return err
	}
	if err := stepio.WriteOutput(o.OutputVars, vars); err != nil {
		return err
	}
	// What a person debugging the run wants first: which template, which hosts, and that the
	// output passed the inventory rules (the files themselves are the step's outputs).
	source := "the built-in " + string(inventoryFlavor(p)) + " template"
	if opts.TemplateName != "" {
		source = opts.TemplateName
	}
	fmt.Fprintf(warn, "rendered the inventory of %d hosts from %s; it passed the inventory rules; vars file written (%d bytes)\n",
		len(hosts), source, len(vars))
	return nil
}

// nodeCAPath is where the nodes will have the CA in file (nodetrust.Path), or "" when file is
// unset or empty. The CA crossed an Argo parameter: it must be certificates only.
func nodeCAPath(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	data, err := os.ReadFile(file)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return "", err
	}
	if _, err := nodetrust.Parse(data); err != nil {
		return "", fmt.Errorf("--artifacts-ca %s (BPAPolicy spec.artifactServers[].caBundle): %w", file, err)
	}
	return nodetrust.Path, nil
}

func inventoryFlavor(p *bpav1.Provisioning) bpav1.InventoryFlavor {
	if p.Spec.Inventory != nil && p.Spec.Inventory.Flavor != "" {
		return p.Spec.Inventory.Flavor
	}
	return bpav1.InventoryFlavorKubespray
}

// templateOptions reads the CR's inventory settings, fetching the template ConfigMap from
// the CR's namespace when it names one.
func templateOptions(ctx context.Context, c client.Reader, p *bpav1.Provisioning) (inventory.Options, error) {
	inv := p.Spec.Inventory
	if inv == nil {
		return inventory.Options{}, nil
	}
	opts := inventory.Options{Flavor: inv.Flavor}
	ref := inv.TemplateConfigMapRef
	if ref == nil {
		return opts, nil
	}
	key := ref.Key
	if key == "" {
		key = DefaultTemplateKey
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, cm); err != nil {
		return opts, fmt.Errorf("reading inventory template ConfigMap %s/%s: %w", p.Namespace, ref.Name, err)
	}
	// The label is the ConfigMap owner's consent to shape this cluster's inventory: without
	// it, any ConfigMap in the namespace could be named by any CR.
	if cluster := p.Labels[bpav1.ClusterLabel]; cm.Labels[bpav1.ClusterNameLabel] != cluster || cluster == "" {
		return opts, fmt.Errorf("inventory template ConfigMap %s/%s: it must carry the label %s=%s (its owner's consent to serve this cluster)", p.Namespace, ref.Name, bpav1.ClusterNameLabel, cluster)
	}
	text, ok := cm.Data[key]
	if !ok {
		return opts, fmt.Errorf("inventory template ConfigMap %s/%s has no key %q", p.Namespace, ref.Name, key)
	}
	opts.Template, opts.TemplateName = text, fmt.Sprintf("ConfigMap %s key %s", ref.Name, key)
	return opts, nil
}
