package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/akraino-edge-stack/bpa/pkg/leases"
)

func init() {
	register(func() *cobra.Command {
		var file string
		var lf leaseFlags
		var out *outputFormat
		cmd := &cobra.Command{
			Use:   "leases -f FILE [--format isc|dnsmasq] [--now RFC3339] [-o text|yaml|json]",
			Short: "Print the current DHCP leases of a dhcpd or dnsmasq leases file",
			Long: "leases reads an ISC dhcpd.leases or a dnsmasq leases file the way resolve-leases does and\n" +
				"prints one lease a line per MAC with a lease current at --now, sorted by MAC (lower case);\n" +
				"-o yaml or json prints them as {\"mac\",\"ip\",\"hostname\",\"expires\"} objects, expires\n" +
				"null for leases that never end. It exits 1 when the file is not in the format.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				f, now, err := lf.parse()
				if err != nil {
					return err
				}
				m, err := leases.ParseFile(file, f, now)
				if err != nil {
					return judged(err)
				}
				l := leases.Sorted(m)
				return out.print(cmd.OutOrStdout(), l, func(w io.Writer) error { return printLeases(w, l) })
			},
		}
		cmd.Flags().StringVarP(&file, "file", "f", "", "leases file")
		_ = cmd.MarkFlagRequired("file")
		lf.register(cmd, "isc")
		out = addOutputFlag(cmd, formatText, formatYAML, formatJSON)
		return cmd
	})
}

// printLeases is the text form of `bpa leases`.
func printLeases(w io.Writer, l []leases.Lease) error {
	rows := make([][]string, len(l))
	for i, lease := range l {
		expires := "never"
		if lease.Expires != nil {
			expires = lease.Expires.UTC().Format(time.RFC3339)
		}
		rows[i] = []string{lease.MAC, lease.IP, lease.Hostname, expires}
	}
	return printTable(w, []string{"MAC", "IP", "HOSTNAME", "EXPIRES"}, rows)
}

// leaseFlags are --format and --now, shared by leases, hosts and inventory.
type leaseFlags struct {
	format, now string
}

func (l *leaseFlags) register(cmd *cobra.Command, defaultFormat string) {
	cmd.Flags().StringVar(&l.format, "format", defaultFormat, "leases file format: isc or dnsmasq")
	cmd.Flags().StringVar(&l.now, "now", "", "time the leases must be current at, RFC 3339 (default: now)")
}

func (l *leaseFlags) parse() (leases.Format, time.Time, error) {
	now := time.Now()
	if l.now != "" {
		t, err := time.Parse(time.RFC3339, l.now)
		if err != nil {
			return "", now, fmt.Errorf("--now %q: want an RFC 3339 time such as 2019-08-08T23:00:00Z", l.now)
		}
		now = t
	}
	f, err := leases.ParseFormat(l.format)
	if err != nil {
		return "", now, fmt.Errorf("--format: %w", err)
	}
	return f, now, nil
}
