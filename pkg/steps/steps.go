// Package steps is `bpa step`: the entrypoints of the Workflow steps, one small package
// each. It is kept out of pkg/cli, whose verbs (plan, render, lint, ...) use the libraries the
// steps use, never the steps themselves; cmd/bpa adds it to the command tree.
package steps

import (
	"github.com/spf13/cobra"

	"github.com/akraino-edge-stack/bpa/pkg/steps/backupetcd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/checkdrift"
	"github.com/akraino-edge-stack/bpa/pkg/steps/discoverhosts"
	"github.com/akraino-edge-stack/bpa/pkg/steps/installsoftware"
	"github.com/akraino-edge-stack/bpa/pkg/steps/lookup"
	"github.com/akraino-edge-stack/bpa/pkg/steps/preflight"
	"github.com/akraino-edge-stack/bpa/pkg/steps/publishkubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/steps/rebootnode"
	"github.com/akraino-edge-stack/bpa/pkg/steps/renderinventory"
	"github.com/akraino-edge-stack/bpa/pkg/steps/renewcerts"
	"github.com/akraino-edge-stack/bpa/pkg/steps/resolveleases"
	"github.com/akraino-edge-stack/bpa/pkg/steps/resolvenodes"
	"github.com/akraino-edge-stack/bpa/pkg/steps/restartnode"
	"github.com/akraino-edge-stack/bpa/pkg/steps/restoreetcd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/runkubespray"
	"github.com/akraino-edge-stack/bpa/pkg/steps/verify"
	"github.com/akraino-edge-stack/bpa/pkg/steps/verifysoftware"
)

// stepCommands are the `bpa step <name>` entrypoints, one small package each.
var stepCommands = []func() *cobra.Command{
	lookup.Command,
	discoverhosts.Command,
	resolveleases.Command,
	renderinventory.Command,
	runkubespray.Command,
	preflight.Command,
	backupetcd.Command,
	restoreetcd.Command,
	renewcerts.Command,
	checkdrift.Command,
	restartnode.Command,
	rebootnode.Command,
	verify.Command,
	publishkubeconfig.Command,
	resolvenodes.Command,
	installsoftware.Command,
	verifysoftware.Command,
}

// Command returns `bpa step` with every step under it.
func Command() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "step",
		Short: "Run one Workflow step (used by the step pods)",
	}
	for _, f := range stepCommands {
		cmd.AddCommand(f())
	}
	return cmd
}
