// Package resolveleases is `bpa step resolve-leases`: it fills in the IP of every host
// discover-hosts chose, from an ISC or dnsmasq leases file or from the addresses metal3
// recorded on the hosts' NICs (pkg/leases). While any MAC has no current lease it fails,
// listing them, and Argo's retryStrategy tries again: DHCP may not have answered yet.
package resolveleases

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/leases"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// Options are the step's flags.
type Options struct {
	CR         stepio.CR
	HostsFile  string
	LeasesFile string
	// Format is isc or dnsmasq, in either the CLI's or the CR's spelling (ISC, Dnsmasq).
	Format string
	Output string
	// Now is the time leases must be current at; zero means time.Now().
	Now time.Time
	// Logf, when set, says where the leases were found.
	Logf func(format string, args ...any)
}

// Command returns `bpa step resolve-leases`.
func Command() *cobra.Command {
	var o Options
	return stepcmd.Command(stepcmd.Step{
		Name:  "resolve-leases",
		Short: "Fill in the chosen hosts' IPs from a DHCP leases file or the BareMetalHosts' NICs",
		Flags: func(cmd *cobra.Command) {
			o.CR.AddFlags(cmd.Flags())
			cmd.Flags().StringVar(&o.HostsFile, "hosts-file", stepio.In(stepio.HostsFile), "hosts chosen by discover-hosts (JSON)")
			cmd.Flags().StringVar(&o.LeasesFile, "leases-file", "", "ISC or dnsmasq leases file (default: the BareMetalHosts' NIC IPs)")
			cmd.Flags().StringVar(&o.Format, "format", "", "format of --leases-file: isc or dnsmasq")
			cmd.Flags().StringVar(&o.Output, "output", stepio.Out(stepio.HostsFile), "file to write the hosts with their IPs to (JSON)")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error {
			o.Logf = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
			hosts, err := Run(ctx, c, o)
			if err != nil {
				return err
			}
			for _, h := range hosts {
				fmt.Printf("node %s: MAC %s has IP %s\n", h.Name, h.MAC, h.IP)
			}
			return stepio.WriteHosts(o.Output, hosts)
		},
	})
}

// Run resolves the hosts of o.HostsFile.
func Run(ctx context.Context, c client.Reader, o Options) ([]bpav1.HostStatus, error) {
	if (o.LeasesFile == "") != (o.Format == "") {
		return nil, errors.New("--leases-file and --format go together: give both, or neither to use the BareMetalHosts' NIC IPs")
	}
	hosts, err := stepio.ReadHosts(o.HostsFile)
	if err != nil {
		return nil, err
	}
	p, err := o.CR.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	var lookup func(bpav1.HostStatus, string) (leases.Lease, bool)
	source := ""
	if o.LeasesFile != "" {
		f, err := leases.ParseFormat(o.Format)
		if err != nil {
			return nil, err
		}
		now := o.Now
		if now.IsZero() {
			now = time.Now()
		}
		m, err := leases.ParseFile(o.LeasesFile, f, now)
		if err != nil {
			return nil, err
		}
		lookup, source = leases.InMap(m), fmt.Sprintf("in the %s leases file %s (%d current)", f, o.LeasesFile, len(m))
	} else {
		// Read the hosts again: their NICs' addresses appear after discover-hosts ran.
		ns := p.HostNamespace()
		var list metal3v1.BareMetalHostList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing BareMetalHosts in namespace %s: %w", ns, err)
		}
		lookup, source = leases.OnBareMetalHosts(list.Items), "on the BareMetalHosts' NICs (status.hardware.nics[].ip)"
	}
	// A node leaving the cluster keeps the address it was applied with: its host may be
	// dead, and removing it needs no lease.
	var staying, leaving []bpav1.HostStatus
	for _, h := range hosts {
		if h.Removing && h.IP != "" {
			leaving = append(leaving, h)
		} else {
			staying = append(staying, h)
		}
	}
	resolved, err := leases.Resolve(staying, lookup)
	if err != nil {
		return nil, fmt.Errorf("%w %s; retrying, DHCP may not have answered yet", err, source)
	}
	resolved = append(resolved, leaving...)
	sort.Slice(resolved, func(i, j int) bool { return resolved[i].Name < resolved[j].Name })
	if o.Logf != nil {
		o.Logf("%d hosts resolved from leases found %s", len(resolved), source)
	}
	return resolved, nil
}
