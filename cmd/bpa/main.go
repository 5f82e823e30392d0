// Command bpa is BPA's single binary: the controller, every workflow step, and the offline
// tools (render, lint, hosts, inventory, leases).
package main

import (
	"os"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
)

func main() {
	if err := cli.NewRootCommand().Execute(); err != nil {
		os.Exit(cli.ExitCode(err))
	}
}
