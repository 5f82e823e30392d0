package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// A chaos test kills the node's kubelet and containerd as a crash would (kill -9 of the
// daemon alone) and starts them again as systemd would. Containers and their shims outlive
// a containerd restart, as on a real machine (KillMode=process); pods keep running while the
// kubelet is away, and it finds them again.

// restarts counts each daemon's starts, so each start logs to a file of its own.
var restarts struct {
	sync.Mutex
	n map[string]int
}

func logName(daemon string) string {
	restarts.Lock()
	defer restarts.Unlock()
	if restarts.n == nil {
		restarts.n = map[string]int{}
	}
	restarts.n[daemon]++
	return fmt.Sprintf("%s-%d", daemon, restarts.n[daemon]+1)
}

// KillKubelet kills the kubelet (SIGKILL).
func (n *Node) KillKubelet() error { return kill(n.kubelet, "kubelet") }

// RestartKubelet starts the kubelet after KillKubelet with the same flags and waits until
// it has renewed the Node's lease: the Node's Ready condition alone is the dead kubelet's,
// until the node controller's grace period passes.
func (n *Node) RestartKubelet(ctx context.Context) error {
	start := metav1.NewMicroTime(time.Now())
	if err := n.runKubelet(ctx, logName("kubelet")); err != nil {
		return err
	}
	c, err := kubernetes.NewForConfig(n.Rig.RESTConfig)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := c.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: try again
		}
		return l.Spec.RenewTime != nil && !l.Spec.RenewTime.Before(&start), nil
	})
}

// KillContainerd kills containerd (SIGKILL), not its shims.
func (n *Node) KillContainerd() error { return kill(n.containerd, "containerd") }

// RestartContainerd starts containerd after KillContainerd with the same configuration and
// state and waits until it answers.
func (n *Node) RestartContainerd(ctx context.Context) error {
	return n.runContainerd(ctx, logName("containerd"))
}

func kill(p interface {
	Exited() bool
	Kill()
}, name string) error {
	if p == nil || p.Exited() {
		return errors.New(name + " is not running")
	}
	p.Kill()
	return nil
}
