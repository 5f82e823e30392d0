package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
)

func init() {
	register(func() *cobra.Command {
		var hf hostsFlags
		var flavor, templateFile string
		cmd := &cobra.Command{
			Use:   "inventory -f CR.yaml --bmh HOSTS.yaml [--leases FILE [--format isc|dnsmasq]] [--now RFC3339] [--flavor kubespray|kud] [--template FILE]",
			Short: "Print the kubespray inventory (hosts.ini) BPA would render for a Provisioning",
			Long: "inventory chooses and resolves the hosts as `bpa hosts` does and prints the hosts.ini that\n" +
				"render-inventory would hand to kubespray. --flavor defaults to the CR's spec.inventory.flavor\n" +
				"(else kubespray); --template renders with a template file instead of the built-in one, as\n" +
				"spec.inventory.templateConfigMapRef does in a cluster. Warnings go to stderr.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				p, hosts, err := hf.resolve(cmd)
				if err != nil {
					return err
				}
				opts, err := inventoryOptions(cmd, p, flavor, templateFile)
				if err != nil {
					return err
				}
				ini, warnings, err := inventory.Render(hosts, opts)
				if err != nil {
					return refused(err)
				}
				for _, w := range warnings {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
				}
				_, err = cmd.OutOrStdout().Write(ini)
				return err
			},
		}
		hf.register(cmd)
		cmd.Flags().StringVar(&flavor, "flavor", "", "inventory flavor: kubespray or kud (default: the CR's, else kubespray)")
		cmd.Flags().StringVar(&templateFile, "template", "", "text/template file to render instead of the built-in template")
		return cmd
	})
}

// inventoryOptions are the CR's inventory settings as render-inventory reads them, with
// the flavour and template file given on the command line instead, if any. A template in
// a ConfigMap cannot be read offline: the built-in one is used, with a warning.
func inventoryOptions(cmd *cobra.Command, p *bpav1.Provisioning, flavor, templateFile string) (inventory.Options, error) {
	opts := inventory.Options{Flavor: bpav1.InventoryFlavor(flavor)}
	if flavor != "" {
		if _, err := inventory.DefaultTemplate(opts.Flavor); err != nil {
			return opts, fmt.Errorf("--flavor: %w", err)
		}
	}
	inv := p.Spec.Inventory
	if opts.Flavor == "" && inv != nil {
		opts.Flavor = inv.Flavor
	}
	if templateFile != "" {
		text, err := os.ReadFile(templateFile)
		if err != nil {
			return opts, err
		}
		opts.Template, opts.TemplateName = string(text), templateFile
	} else if inv != nil && inv.TemplateConfigMapRef != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: Provisioning %s renders with the template in ConfigMap %s; "+
			"this uses the built-in one (give the template with --template FILE)\n", p.Name, inv.TemplateConfigMapRef.Name)
	}
	return opts, nil
}
