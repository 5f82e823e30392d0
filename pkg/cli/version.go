package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/akraino-edge-stack/bpa/pkg/cli.Version=...".
var Version = "dev"

func init() {
	register(func() *cobra.Command {
		return &cobra.Command{
			Use:   "version",
			Short: "Print BPA's version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				rev := ""
				if bi, ok := debug.ReadBuildInfo(); ok {
					for _, s := range bi.Settings {
						if s.Key == "vcs.revision" {
							rev = " (" + s.Value + ")"
						}
					}
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "bpa %s%s\n", Version, rev)
				return err
			},
		}
	})
}
