package soak

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/akraino-edge-stack/bpa/test/framework/chaos"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// restartTimeout bounds one recovery: a restart and its readiness check.
const restartTimeout = 2 * time.Minute

// target is what a fault takes down and how to bring it back.
type target struct {
	name  string
	names []string // what a message naming it would say
	down  func() error
	up    func(context.Context) error
}

// injectFaults runs the plan's faults one after another: a gap, the fault, the outage, the
// recovery. A recovery that fails is tried again (as systemd restarts a unit) and recorded.
func (s *soak) injectFaults() {
	for i, f := range s.plan.Faults {
		if !sleep(s.ctx, f.Gap) {
			return
		}
		tg := s.target(f)
		inj := chaos.Injected{Fault: f, Target: tg.name, Names: tg.names, Start: time.Now()}
		s.t.Logf("fault %d/%d: %s of %s, down %s", i+1, len(s.plan.Faults), f.Kind, tg.name, f.Outage)
		if inj.Err = tg.down(); inj.Err == nil {
			sleep(s.ctx, f.Outage)
			inj.Err = s.recover(tg)
		}
		inj.End = time.Now()
		if inj.Err != nil {
			s.t.Errorf("fault %d (%s of %s): %v", i+1, f.Kind, tg.name, inj.Err)
		}
		s.mu.Lock()
		s.faults = append(s.faults, inj)
		s.mu.Unlock()
	}
}

func (s *soak) recover(tg target) error {
	var err error
	for range 3 {
		ctx, cancel := context.WithTimeout(s.ctx, restartTimeout)
		err = tg.up(ctx)
		cancel()
		if err == nil {
			return nil
		}
	}
	return err
}

// target resolves f's target: a site's controller, the rig's and the node's processes, or
// a host of the clusters (by f.Pick, among every host in a fixed order).
func (s *soak) target(f chaos.Fault) target {
	r, n := s.base.Rig, s.base.Node
	switch f.Kind {
	case chaos.KillController:
		site := s.sites[f.Pick%len(s.sites)]
		return target{name: "bpa controller of " + site.Namespace,
			down: func() error { site.StopController(true); return nil },
			up:   func(context.Context) error { site.StartController(); return nil }}
	case chaos.KillWorkflowController:
		return target{name: "workflow-controller", down: r.KillWorkflowController, up: r.RestartWorkflowController}
	case chaos.KillAPIServer:
		return target{name: "kube-apiserver", down: r.KillAPIServer, up: r.RestartAPIServer}
	case chaos.KillEtcd:
		return target{name: "etcd", down: r.KillEtcd, up: r.RestartEtcd}
	case chaos.KillKubelet:
		return target{name: "kubelet", down: n.KillKubelet, up: n.RestartKubelet}
	case chaos.KillContainerd:
		return target{name: "containerd", down: n.KillContainerd, up: n.RestartContainerd}
	}
	hosts := s.hosts()
	h := hosts[f.Pick%len(hosts)]
	tg := target{name: h.bmh + " (" + h.m.IP + ")", names: []string{h.bmh, h.node, h.m.IP}}
	if f.Kind == chaos.FreezeHost {
		tg.down, tg.up = h.m.Freeze, func(context.Context) error { return h.m.Thaw() }
	} else {
		tg.down, tg.up = h.m.CutNetwork, func(context.Context) error { return h.m.RestoreNetwork() }
	}
	return tg
}

type machine struct {
	bmh, node string
	m         *simhost.Host
}

// hosts are every cluster's machines, in cluster order and by node name.
func (s *soak) hosts() []machine {
	var out []machine
	for _, c := range s.clusters {
		var nodes []string
		for node := range c.hosts {
			nodes = append(nodes, node)
		}
		sort.Strings(nodes)
		for _, node := range nodes {
			h := c.hosts[node]
			ip := c.site.HostIP(hostNumber(c, node))
			out = append(out, machine{bmh: h.Name, node: node, m: c.site.Machine(ip)})
		}
	}
	return out
}

// hostNumber is the machine number newCluster gave the node: base, base+1, base+2 for the
// master, the worker and the spare.
func hostNumber(c *cluster, node string) int {
	for _, l := range layout {
		if l.name == c.name {
			switch node {
			case c.name + "-m1":
				return l.base
			case c.name + "-w1":
				return l.base + 1
			}
			return l.base + 2
		}
	}
	panic(fmt.Sprintf("cluster %s is not in the layout", c.name))
}

// sleep waits d or until ctx ends, and says whether ctx is still going.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
