package cli

import (
	"encoding/json"
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
		cmd := &cobra.Command{
			Use:   "leases -f FILE [--format isc|dnsmasq] [--now RFC3339]",
			Short: "Print the current DHCP leases of a dhcpd or dnsmasq leases file as JSON",
			Long: "leases reads an ISC dhcpd.leases or a dnsmasq leases file the way resolve-leases does and\n" +
				"prints one {\"mac\",\"ip\",\"hostname\",\"expires\"} object per MAC with a lease current at --now,\n" +
				"sorted by MAC (lower case). expires is null for leases that never end.",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				f, now, err := lf.parse()
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				m, err := leases.ParseFile(file, f, now)
				if err != nil {
					return &ExitError{Code: 1, Err: err}
				}
				return printJSON(cmd.OutOrStdout(), leases.Sorted(m))
			},
		}
		cmd.Flags().StringVarP(&file, "file", "f", "", "leases file")
		_ = cmd.MarkFlagRequired("file")
		lf.register(cmd, "isc")
		return cmd
	})
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

// printJSON writes v as indented JSON with a final newline.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
