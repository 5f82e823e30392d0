// Package restartnode is `bpa step restart-node`: the first rung of graded remediation
// (docs/remediation.md). On one worker, over SSH with its host key checked, it restarts
// containerd and then kubelet (`systemctl restart`, through `sudo -n --` for a non-root
// user), as an operator would first try on a node gone NotReady, then waits, bounded, for the
// Node to report Ready again, asking the cluster's API with the admin.conf fetched from the
// first master as verify does (get of that one Node, nothing else). It refuses a node that is
// not a worker of status.applied: control-plane nodes are never remediated (rungnode.Worker).
package restartnode

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/remediation/rungnode"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
)

// Units are what the rung restarts, in order: the runtime first, so the kubelet that starts
// next finds it.
var Units = []string{"containerd", "kubelet"}

// UserAgent is what the step's requests to the application cluster carry.
const UserAgent = "bpa-restart-node"

// DefaultWait is how long the Node has to report Ready after the restart.
const DefaultWait = 2 * time.Minute

// Command returns `bpa step restart-node`.
func Command() *cobra.Command {
	o := options{Step: rungnode.NewStep()}
	return stepcmd.Command(stepcmd.Step{
		Name:          "restart-node",
		Short:         "Restart containerd and kubelet on one worker over SSH and wait for its Node to be Ready (graded remediation's first rung)",
		Flags:         func(cmd *cobra.Command) { o.AddFlags(cmd.Flags(), DefaultWait, "the restart") },
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct{ rungnode.Step }

func (o *options) run(ctx context.Context, c client.Client) error {
	p, hosts, worker, err := o.Load(ctx, c)
	if err != nil {
		return err
	}
	if err := Restart(ctx, worker, o.SSHConfig(p), o.Logf); err != nil {
		return err
	}
	return o.AwaitReady(ctx, p, hosts, o.Wait, UserAgent, fmt.Sprintf("restarted %v on %s", Units, worker.Name))
}

// Restart restarts Units on h, one after the other, over one SSH connection.
func Restart(ctx context.Context, h bpav1.HostStatus, cfg sshexec.Config, logf func(string, ...any)) error {
	sc, err := sshexec.Dial(ctx, h.IP, cfg)
	if err != nil {
		return fmt.Errorf("node %s: %w", h.Name, err)
	}
	defer sc.Close()
	for _, u := range Units {
		_, stderr, code, err := sc.Run(ctx, []string{"systemctl", "restart", u})
		if err != nil {
			return fmt.Errorf("node %s: systemctl restart %s: %w", h.Name, u, err)
		}
		if code != 0 {
			return fmt.Errorf("node %s: systemctl restart %s exited %d: %s", h.Name, u, code, sshexec.Tail(stderr, 5))
		}
		logf("node %s: restarted %s", h.Name, u)
	}
	return nil
}
