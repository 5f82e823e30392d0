package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// install-binary copies this executable to a path. The run-kubespray pod uses it in an init
// container to bring bpa into the kubespray image, so one image serves every step.
func init() {
	register(func() *cobra.Command {
		return &cobra.Command{
			Use:    "install-binary PATH",
			Short:  "Copy the bpa binary to PATH (used by step pods)",
			Hidden: true,
			Args:   cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				self, err := os.Executable()
				if err != nil {
					return err
				}
				return copyExecutable(self, args[0])
			},
		}
	})
}

func copyExecutable(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("copying %s to %s: %w", from, to, err)
	}
	return dst.Close()
}
