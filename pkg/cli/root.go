// Package cli wires BPA's subcommands. Each subcommand lives in its own file and registers
// itself through subcommands, so the verbs stay independent of each other.
package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// subcommands is filled by the init functions of this package's files.
var subcommands []func() *cobra.Command

func register(f func() *cobra.Command) { subcommands = append(subcommands, f) }

// NewRootCommand builds the `bpa` command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "bpa",
		Short:         "BPA turns bare-metal hosts into Kubernetes clusters, declaratively, with Argo Workflows",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Installed as kubectl-bpa, the binary is a kubectl plugin run as `kubectl bpa`; its
	// help and usage lines should say so.
	if plugin, ok := strings.CutPrefix(filepath.Base(os.Args[0]), "kubectl-"); ok {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl " + plugin}
	}
	for _, f := range subcommands {
		root.AddCommand(f())
	}
	return root
}

// ExitError carries a specific exit code, for verbs such as lint whose output already says
// what is wrong.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode prints err (unless it was already reported) and returns the process exit code.
func ExitCode(err error) int {
	var exit *ExitError
	if errors.As(err, &exit) {
		if exit.Err != nil && exit.Err.Error() != "" {
			fmt.Fprintln(os.Stderr, "Error:", exit.Err)
		}
		return exit.Code
	}
	fmt.Fprintln(os.Stderr, "Error:", err)
	return 1
}
