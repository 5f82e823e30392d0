package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/cobra"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/leases"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

func init() {
	register(func() *cobra.Command {
		var hf hostsFlags
		var out *outputFormat
		cmd := &cobra.Command{
			Use:   "hosts -f CR.yaml --bmh HOSTS.yaml [--leases FILE [--format isc|dnsmasq]] [--now RFC3339] [-o text|yaml|json]",
			Short: "Print the hosts BPA would choose for a Provisioning, with their IPs",
			Long: "hosts matches the nodes of the Provisioning in CR.yaml to the BareMetalHosts in HOSTS.yaml\n" +
				"(a BareMetalHostList, a List, or multi-document YAML) exactly as discover-hosts does, then\n" +
				"resolves their IPs as resolve-leases does: from the leases file if given, else from the\n" +
				"hosts' NICs. It prints one node a line, sorted by name (-o yaml or json: the list of\n" +
				"{\"name\",\"roles\",\"etcd\",\"mac\",\"bareMetalHost\",\"ip\"} that discover-hosts hands on),\n" +
				"and exits 1 when no valid assignment exists or a MAC has no current lease.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, hosts, err := hf.resolve(cmd)
				if err != nil {
					return err
				}
				return out.print(cmd.OutOrStdout(), hosts, func(w io.Writer) error { return printHosts(w, hosts) })
			},
		}
		hf.register(cmd)
		out = addOutputFlag(cmd, formatText, formatYAML, formatJSON)
		return cmd
	})
}

// printHosts is the text form of `bpa hosts`: one node a line, a node the run removes
// marked as describe marks it.
func printHosts(w io.Writer, hosts []bpav1.HostStatus) error {
	rows := make([][]string, len(hosts))
	for i, h := range hosts {
		roles := strings.Join(h.Roles, ",")
		if h.Removing {
			roles += " (removing)"
		}
		etcd := ""
		if h.Etcd {
			etcd = "yes"
		}
		rows[i] = []string{h.Name, roles, etcd, h.IP, h.MAC, h.BareMetalHost}
	}
	return printTable(w, []string{"NAME", "ROLES", "ETCD", "IP", "MAC", "BAREMETALHOST"}, rows)
}

// hostsFlags are the inputs `bpa hosts` and `bpa inventory` share.
type hostsFlags struct {
	crFile, bmhFile, leasesFile string
	lf                          leaseFlags
}

func (h *hostsFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&h.crFile, "file", "f", "", "YAML file with the Provisioning")
	cmd.Flags().StringVar(&h.bmhFile, "bmh", "", "YAML or JSON file with the BareMetalHosts")
	cmd.Flags().StringVar(&h.leasesFile, "leases", "", "DHCP leases file to take the IPs from (default: the hosts' NIC IPs)")
	h.lf.register(cmd, "isc")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("bmh")
}

// resolve reads the inputs, matches and resolves. A refusal (exit status 1) names the file,
// node, host or MAC at fault.
func (h *hostsFlags) resolve(cmd *cobra.Command) (*bpav1.Provisioning, []bpav1.HostStatus, error) {
	p, err := readProvisioning(cmd.Context(), cmd, h.crFile)
	if err != nil {
		return nil, nil, err
	}
	bmhs, err := hostmatch.ReadBareMetalHostsFile(h.bmhFile)
	if err != nil {
		return nil, nil, judged(err)
	}
	hosts, err := h.match(cmd, p, bmhs, h.bmhFile)
	return p, hosts, err
}

// match chooses and resolves the hosts of p (its spec, status.applied and annotations) as
// discover-hosts and resolve-leases do. Nodes that leave the cluster keep the address they
// were applied with: their BareMetalHost may be gone, and kubespray reaches them there.
// bmhSource names where bmhs came from, for errors.
func (h *hostsFlags) match(cmd *cobra.Command, p *bpav1.Provisioning, bmhs []metal3v1.BareMetalHost, bmhSource string) ([]bpav1.HostStatus, error) {
	fail := func(err error) ([]bpav1.HostStatus, error) { return nil, refused(err) }
	if h.leasesFile == "" && cmd.Flags().Changed("format") {
		return nil, fmt.Errorf("--format applies to a --leases file")
	}
	format, now, err := h.lf.parse()
	if err != nil {
		return nil, err
	}
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return fail(fmt.Errorf("%s: Provisioning %s: %w", h.crFile, p.Name, err))
	}
	hosts, err := hostmatch.Match(p, hostmatch.ClaimantOf(p, cluster), bmhs)
	if err != nil {
		return fail(fmt.Errorf("Provisioning %s: %w", p.Name, err))
	}
	var lookup func(bpav1.HostStatus, string) (leases.Lease, bool)
	if h.leasesFile != "" {
		m, err := leases.ParseFile(h.leasesFile, format, now)
		if err != nil {
			return nil, judged(err)
		}
		lookup = leases.InMap(m)
	} else {
		lookup = leases.OnBareMetalHosts(bmhs)
	}
	leaving := slices.DeleteFunc(slices.Clone(hosts), func(h bpav1.HostStatus) bool { return !h.Removing })
	resolved, err := leases.Resolve(slices.DeleteFunc(hosts, func(h bpav1.HostStatus) bool { return h.Removing }), lookup)
	if err != nil {
		src := "the BareMetalHosts' NICs (status.hardware.nics[].ip) in " + bmhSource
		if h.leasesFile != "" {
			src = h.leasesFile + " at " + now.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		return fail(fmt.Errorf("%w in %s", err, src))
	}
	resolved = append(resolved, leaving...)
	sort.Slice(resolved, func(i, j int) bool { return resolved[i].Name < resolved[j].Name })
	return resolved, nil
}

// readProvisioning reads the one Provisioning of a file, after the checks `bpa lint`
// makes, so that an offline answer is never given for a CR the apiserver would refuse.
func readProvisioning(ctx context.Context, cmd *cobra.Command, file string) (*bpav1.Provisioning, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	docs, problems := validation.ValidateFile(ctx, file, data)
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(cmd.ErrOrStderr(), p)
		}
		return nil, refused(fmt.Errorf("%d problem(s) in %s", len(problems), file))
	}
	var found []*bpav1.Provisioning
	var names []string
	for _, d := range docs {
		if p, ok := d.Object.(*bpav1.Provisioning); ok {
			found = append(found, p)
			names = append(names, p.Name)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, refused(fmt.Errorf("%s: no Provisioning found", file))
	}
	return nil, refused(fmt.Errorf("%s holds %d Provisionings (%s); give a file with one", file, len(found), strings.Join(names, ", ")))
}
