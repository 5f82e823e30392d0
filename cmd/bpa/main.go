// Command bpa is BPA's single binary: the controller, every workflow step, and the offline
// tools (render, lint, hosts, inventory, leases).
package main

import (
	"os"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/steps"
)

func main() {
	root := cli.NewRootCommand()
	root.AddCommand(steps.Command())
	if err := root.Execute(); err != nil {
		os.Exit(cli.ExitCode(err))
	}
}
