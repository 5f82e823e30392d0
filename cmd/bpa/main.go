// Command bpa is BPA's single binary: the controller, every workflow step, and the offline
// tools (render, lint, hosts, inventory, leases).
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/steps"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		os.Exit(cli.ExitCode(err))
	}
}

// newRoot is the whole command tree: pkg/cli's verbs and the steps, which pkg/cli does not
// import.
func newRoot() *cobra.Command {
	root := cli.NewRootCommand()
	root.AddCommand(cli.InCluster(steps.Command()))
	return root
}
