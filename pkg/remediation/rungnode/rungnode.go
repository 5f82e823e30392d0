// Package rungnode is what the steps of graded remediation's rungs (restart-node,
// reboot-node) share about the node they act on: their flags and inputs (Step), which host
// of status.applied it is, refused unless it is a worker BPA built (Worker), and when its
// Node is Ready again (AwaitReady, WaitReady). One source, so no rung guards its node less
// than another.
package rungnode

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// Worker is the host of node, which must be a worker of applied and not a control-plane
// node, with its current address from hosts. The hosts file is rendered from the spec as the
// Workflow runs, which its author may have edited since the controller decided: what BPA
// built says which nodes are control-plane ones and which host a worker is, and the address
// may be no control-plane node's (only a lease may have changed it).
func Worker(applied *bpav1.AppliedState, hosts []bpav1.HostStatus, node string) (bpav1.HostStatus, error) {
	if node == "" {
		return bpav1.HostStatus{}, errors.New("--node is required")
	}
	b := slices.IndexFunc(appliedHosts(applied), func(h bpav1.HostStatus) bool { return h.Name == node })
	if b < 0 {
		return bpav1.HostStatus{}, fmt.Errorf("node %s is not in status.applied: a rung acts only on nodes BPA built", node)
	}
	built := applied.Hosts[b]
	i := slices.IndexFunc(hosts, func(h bpav1.HostStatus) bool { return h.Name == node })
	if i < 0 || hosts[i].IP == "" {
		return bpav1.HostStatus{}, fmt.Errorf("node %s has no current address in the hosts file", node)
	}
	h := hosts[i]
	if controlPlane(h) || controlPlane(built) {
		return bpav1.HostStatus{}, fmt.Errorf("node %s is a control-plane or etcd node: remediation never acts on one", node)
	}
	if built.BareMetalHost != "" && h.BareMetalHost != built.BareMetalHost {
		return bpav1.HostStatus{}, fmt.Errorf("node %s is now BareMetalHost %q, not the host BPA built (%q): the spec changed since", node, h.BareMetalHost, built.BareMetalHost)
	}
	for _, o := range append(slices.Clone(applied.Hosts), hosts...) {
		if o.Name != node && controlPlane(o) && o.IP == h.IP {
			return bpav1.HostStatus{}, fmt.Errorf("node %s's address %s is control-plane node %s's: remediation never acts on one", node, h.IP, o.Name)
		}
	}
	return h, nil
}

func appliedHosts(applied *bpav1.AppliedState) []bpav1.HostStatus {
	if applied == nil {
		return nil
	}
	return applied.Hosts
}

func controlPlane(h bpav1.HostStatus) bool { return slices.Contains(h.Roles, "master") || h.Etcd }

// WaitReady polls node's Ready condition until it is True, or fails after wait naming the
// condition last read.
func WaitReady(ctx context.Context, cs kubernetes.Interface, node string, wait, poll time.Duration, logf func(string, ...any)) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	last := "not read"
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			last = readiness(n)
			if last == string(corev1.ConditionTrue) {
				logf("node %s: Ready after %s", node, time.Since(start).Round(time.Second))
				return nil
			}
		} else if ctx.Err() == nil {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s: not Ready within %s (Ready: %s)", node, wait, last)
		case <-time.After(poll):
		}
	}
}

func readiness(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return string(c.Status)
		}
	}
	return "no Ready condition"
}

// Step is what every rung's step takes: its Provisioning, the node, the hosts file the
// hosts' steps rendered, the bounded wait, SSH, and how it makes a client of the
// application cluster (a test's may differ).
type Step struct {
	CR               stepio.CR
	Node, HostsFile  string
	Wait, Poll       time.Duration
	SSH              sshexec.Flags
	Flags            *pflag.FlagSet
	Logf             func(format string, args ...any)
	NewClusterClient func(*rest.Config) (kubernetes.Interface, error)
}

// NewStep is a Step that logs with log.Printf, polls every 2 s and reads the cluster with
// client-go.
func NewStep() Step {
	return Step{Logf: log.Printf, Poll: 2 * time.Second, NewClusterClient: func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }}
}

// AddFlags registers the flags every rung's step has; wait is what the step's --wait
// defaults to, what says what it waits after.
func (s *Step) AddFlags(fs *pflag.FlagSet, wait time.Duration, what string) {
	s.Flags = fs
	s.CR.AddNameFlags(fs)
	fs.StringVar(&s.Node, "node", "", "the worker to act on, by its name in status.applied")
	fs.StringVar(&s.HostsFile, "hosts-file", stepio.In(stepio.HostsFile), "JSON list of the hosts with their current addresses ({name, roles, mac, ip, bareMetalHost})")
	fs.DurationVar(&s.Wait, "wait", wait, "how long the Node has to report Ready after "+what)
	s.SSH.AddFlags(fs)
}

// Load reads the Provisioning, the hosts the run keeps and the node's (Worker).
func (s *Step) Load(ctx context.Context, c client.Reader) (*bpav1.Provisioning, []bpav1.HostStatus, bpav1.HostStatus, error) {
	p, err := s.CR.Get(ctx, c)
	if err != nil {
		return nil, nil, bpav1.HostStatus{}, err
	}
	hosts, err := stepio.ReadHosts(s.HostsFile)
	if err != nil {
		return nil, nil, bpav1.HostStatus{}, err
	}
	hosts = bpav1.KeptHosts(hosts)
	worker, err := Worker(p.Status.Applied, hosts, s.Node)
	return p, hosts, worker, err
}

// SSHConfig is the SSH configuration for p's hosts.
func (s *Step) SSHConfig(p *bpav1.Provisioning) sshexec.Config {
	cfg := s.SSH.Config(s.Flags, p.Spec.SSH)
	cfg.Logf = s.Logf
	return cfg
}

// AwaitReady waits up to wait for the node's Node to be Ready, asking the cluster's API
// with the admin.conf fetched from the first master of hosts (as verify does), as
// userAgent; did says what the step did, for the error when the API cannot be asked.
func (s *Step) AwaitReady(ctx context.Context, p *bpav1.Provisioning, hosts []bpav1.HostStatus, wait time.Duration, userAgent, did string) error {
	rc, master, err := kubeconfig.AdminREST(ctx, hosts, s.SSHConfig(p))
	if err != nil {
		return fmt.Errorf("%s, but cannot ask the cluster's API whether it is Ready: %w", did, err)
	}
	s.Logf("fetched %s from %s; API server %s", kubeconfig.AdminConfPath, master.Name, rc.Host)
	rc.UserAgent = userAgent
	cs, err := s.NewClusterClient(rc)
	if err != nil {
		return fmt.Errorf("client for the cluster at %s: %w", rc.Host, err)
	}
	return WaitReady(ctx, cs, s.Node, wait, s.Poll, s.Logf)
}
