package soak

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/chaos"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
)

// opTimeout bounds the wait for one operation's run, faults and retries included.
const opTimeout = 8 * time.Minute

// soak is one run of the soak: the plan, the sites and clusters, and what it saw.
type soak struct {
	t        *testing.T
	ctx      context.Context
	base     *sim.Base
	sites    []*sim.Site
	plan     chaos.Plan
	clusters []*cluster

	mu      sync.Mutex
	history map[string]record // every Workflow seen, by uid
	faults  []chaos.Injected
	ops     int
}

// record is a Workflow as last seen.
type record struct {
	chaos.WorkflowRecord
	phase wfv1.WorkflowPhase
}

// cluster is one cluster of the workload: its Provisioning as the workload applies it, and
// the machines it may use.
type cluster struct {
	site *sim.Site
	name string
	ops  []chaos.OpKind
	// cr is the Provisioning as last applied (name, labels, spec).
	cr *bpav1.Provisioning
	// hosts are the BareMetalHosts by node name; workers and spares the node names in the
	// spec and out of it.
	hosts           map[string]metal3v1.BareMetalHost
	workers, spares []string
	software        string // the pinned jq version, once a Software exists
}

// newCluster makes a cluster's hosts and machines (a master, a worker, a spare) and applies
// its Provisioning (1 master, 1 worker). Nodes are named <name>-m1..., since the clusters of
// a site share its application apiserver. Day-2 runs skip the etcd snapshot: the soak is
// about faults, and backups have their own e2e scenario.
func (s *soak) newCluster(site int, name string, base int, ops []chaos.OpKind) *cluster {
	st := s.sites[site]
	p := st.NewCluster(s.ctx, name, name+"-", base, 1, 1)
	p.Spec.EtcdBackup = &bpav1.EtcdBackup{BeforeDay2: bpav1.BackupSkip}
	spare := name + "-w2"
	h := st.NewHost(name+"-"+spare, base+2)
	st.AddHosts(s.ctx, []metal3v1.BareMetalHost{h})
	c := &cluster{site: st, name: name, ops: ops, hosts: map[string]metal3v1.BareMetalHost{spare: h}, workers: []string{name + "-w1"}, spares: []string{spare}}
	for _, list := range [][]bpav1.NodeEntry{p.Spec.Masters, p.Spec.Workers} {
		for _, e := range list {
			for node, req := range e {
				c.hosts[node] = metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + node}, Spec: metal3v1.BareMetalHostSpec{BootMACAddress: req.MACAddress}}
			}
		}
	}
	if err := st.Apply(s.ctx, p); err != nil {
		s.t.Fatalf("applying %s: %v", name, err)
	}
	c.cr = p
	return c
}

// run waits for the cluster's creation, then carries out its operations one after another.
// A cluster whose run does not succeed stops: it needs a person, and the invariants judge it.
func (c *cluster) run(s *soak) {
	if !s.waitProvisioning(c) {
		return
	}
	for _, op := range c.ops {
		op = c.feasible(op)
		s.t.Logf("%s: %s", c.name, op)
		ok := false
		switch op {
		case chaos.ScaleOut:
			ok = s.scaleOut(c)
		case chaos.ScaleIn:
			ok = s.scaleIn(c)
		case chaos.SoftwareChange:
			ok = s.changeSoftware(c)
		case chaos.Recreate:
			ok = s.recreate(c)
		}
		s.mu.Lock()
		s.ops++
		s.mu.Unlock()
		if !ok {
			s.t.Logf("%s: %s did not succeed; the cluster's workload stops", c.name, op)
			return
		}
	}
}

// feasible turns a scale-out without a spare into a scale-in, and a scale-in of the last
// worker into a scale-out: both follow from the plan, so the same seed does the same.
func (c *cluster) feasible(op chaos.OpKind) chaos.OpKind {
	switch {
	case op == chaos.ScaleOut && len(c.spares) == 0:
		return chaos.ScaleIn
	case op == chaos.ScaleIn && len(c.workers) < 2:
		return chaos.ScaleOut
	}
	return op
}

func (s *soak) scaleOut(c *cluster) bool {
	node := c.spares[0]
	mac := c.hosts[node].Spec.BootMACAddress
	gen := s.editProvisioning(c, func(p *bpav1.Provisioning) {
		p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{node: {MACAddress: mac}})
	})
	if gen == 0 || !s.waitProvisioning(c) {
		return false
	}
	c.spares, c.workers = c.spares[1:], append(c.workers, node)
	return true
}

// scaleIn removes the last worker; once it is out, metal3 and the admin provision its host
// again (hostRelease Deprovision), and it is a spare.
func (s *soak) scaleIn(c *cluster) bool {
	node := c.workers[len(c.workers)-1]
	gen := s.editProvisioning(c, func(p *bpav1.Provisioning) {
		var keep []bpav1.NodeEntry
		for _, e := range p.Spec.Workers {
			if _, ok := e[node]; !ok {
				keep = append(keep, e)
			}
		}
		p.Spec.Workers = keep
	})
	if gen == 0 || !s.waitProvisioning(c) {
		return false
	}
	if !s.reprovision(c, c.hosts[node].Name) {
		return false
	}
	c.workers, c.spares = c.workers[:len(c.workers)-1], append(c.spares, node)
	return true
}

// jqVersions are the pins a Software change alternates between (sim.Repository's machines
// install any version asked).
var jqVersions = []string{"1.6-2.1", "1.7.1-3"}

// changeSoftware creates the cluster's Software (workers pin jq, masters get curl), or
// changes its pin, and waits for its run.
func (s *soak) changeSoftware(c *cluster) bool {
	key := client.ObjectKey{Namespace: c.site.Namespace, Name: c.name}
	if c.software == "" {
		sw := &bpav1.Software{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.site.Namespace, Labels: map[string]string{bpav1.ClusterLabel: c.name}},
			Spec: bpav1.SoftwareSpec{
				MasterSoftware: []bpav1.SoftwareItem{{Name: "curl"}},
				WorkerSoftware: []bpav1.SoftwareItem{{Name: "jq", Version: jqVersions[0]}},
				SSH:            &bpav1.SSHConfig{Port: int32(c.site.SSH.Port)},
			},
		}
		if !s.retry("creating Software "+c.name, func() error { return ignoreExists(c.site.Client.Create(s.ctx, sw.DeepCopy())) }) {
			return false
		}
		c.software = jqVersions[0]
	} else {
		next := jqVersions[0]
		if c.software == next {
			next = jqVersions[1]
		}
		if !s.retry("changing Software "+c.name, func() error {
			sw := &bpav1.Software{}
			if err := c.site.Client.Get(s.ctx, key, sw); err != nil {
				return err
			}
			if sw.Spec.WorkerSoftware[0].Version == next {
				return nil // the update went through before its answer was lost
			}
			sw.Spec.WorkerSoftware[0].Version = next
			return c.site.Client.Update(s.ctx, sw)
		}) {
			return false
		}
		c.software = next
	}
	return s.waitFinal(c, &bpav1.Software{}, key)
}

// recreate deletes the Provisioning, lets metal3 and the admin provision its hosts again
// and wipes the application cluster's Nodes (its machines are cleaned: that cluster is gone),
// then applies the same Provisioning again.
func (s *soak) recreate(c *cluster) bool {
	key := client.ObjectKey{Namespace: c.site.Namespace, Name: c.cr.Name}
	if !s.retry("deleting "+c.name, func() error {
		return client.IgnoreNotFound(c.site.Client.Delete(s.ctx, &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}))
	}) {
		return false
	}
	if !s.poll(opTimeout, "Provisioning "+c.name+" gone", func() (bool, error) {
		err := c.site.Client.Get(s.ctx, key, &bpav1.Provisioning{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}) {
		return false
	}
	for node, h := range c.hosts {
		if isSpare(c, node) {
			continue
		}
		if !s.reprovision(c, h.Name) {
			return false
		}
	}
	if !s.retry("wiping "+c.name+"'s Nodes", func() error { return s.deleteNodes(c) }) {
		return false
	}
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: c.cr.Name, Namespace: c.cr.Namespace, Labels: c.cr.Labels}, Spec: *c.cr.Spec.DeepCopy()}
	if !s.retry("applying "+c.name+" again", func() error { return ignoreExists(c.site.Client.Create(s.ctx, p.DeepCopy())) }) {
		return false
	}
	return s.waitProvisioning(c)
}

func isSpare(c *cluster, node string) bool {
	for _, n := range c.spares {
		if n == node {
			return true
		}
	}
	return false
}

// deleteNodes deletes the cluster's Nodes from its site's application apiserver.
func (s *soak) deleteNodes(c *cluster) error {
	kc, nodes, err := c.nodes(s.ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := kc.CoreV1().Nodes().Delete(s.ctx, n.Name, metav1.DeleteOptions{}); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// nodes are the cluster's Nodes in its site's application apiserver (by the name prefix),
// and a client of it.
func (c *cluster) nodes(ctx context.Context) (kubernetes.Interface, []corev1.Node, error) {
	kc, err := kubernetes.NewForConfig(c.site.App.RESTConfig)
	if err != nil {
		return nil, nil, err
	}
	list, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if strings.HasPrefix(n.Name, c.name+"-") {
			out = append(out, n)
		}
	}
	return kc, out, nil
}

// reprovision plays metal3 and the admin for a host BPA released, once the release shows.
func (s *soak) reprovision(c *cluster, host string) bool {
	return s.poll(2*time.Minute, "BareMetalHost "+host+" provisioned again", func() (bool, error) {
		h := &metal3v1.BareMetalHost{}
		if err := c.site.Client.Get(s.ctx, client.ObjectKey{Namespace: c.site.Namespace, Name: host}, h); err != nil {
			return false, nil //nolint:nilerr // an apiserver away: try again
		}
		if h.Spec.ConsumerRef != nil {
			return false, nil // not released yet
		}
		return c.site.ReprovisionHost(s.ctx, host) == nil, nil
	})
}

// editProvisioning changes the cluster's spec and returns the new generation (0 if it
// could not). c.cr follows the edit.
func (s *soak) editProvisioning(c *cluster, change func(*bpav1.Provisioning)) int64 {
	var gen int64
	want := c.cr.DeepCopy()
	change(want)
	ok := s.retry("editing "+c.name, func() error {
		p := &bpav1.Provisioning{}
		if err := c.site.Client.Get(s.ctx, client.ObjectKeyFromObject(c.cr), p); err != nil {
			return err
		}
		if specEqual(p, want) {
			gen = p.Generation // the update went through before its answer was lost
			return nil
		}
		p.Spec = *want.Spec.DeepCopy()
		if err := c.site.Client.Update(s.ctx, p); err != nil {
			return err
		}
		gen = p.Generation
		return nil
	})
	if !ok {
		return 0
	}
	c.cr = want
	return gen
}

func specEqual(a, b *bpav1.Provisioning) bool {
	return fmt.Sprint(a.Spec.Workers) == fmt.Sprint(b.Spec.Workers) && fmt.Sprint(a.Spec.Masters) == fmt.Sprint(b.Spec.Masters)
}

// waitProvisioning waits for the cluster's Provisioning to be final for its generation and
// says whether it succeeded.
func (s *soak) waitProvisioning(c *cluster) bool {
	return s.waitFinal(c, &bpav1.Provisioning{}, client.ObjectKeyFromObject(c.cr))
}

// runObject is a Provisioning or a Software.
type runObject interface {
	client.Object
	GetRunStatus() *bpav1.RunStatus
}

// waitFinal waits until obj's run for its current generation is final (final) and says
// whether it succeeded.
func (s *soak) waitFinal(c *cluster, obj runObject, key client.ObjectKey) bool {
	succeeded := false
	s.poll(opTimeout, key.Name+"'s run", func() (bool, error) {
		if err := c.site.Client.Get(s.ctx, key, obj); err != nil {
			return false, nil //nolint:nilerr // an apiserver away: try again
		}
		done, ok := final(obj)
		succeeded = ok
		return done, nil
	})
	return succeeded
}

// final says whether obj's run for its generation is over, and whether it succeeded:
// Succeeded and Ready, or Failed, Error or Stalled.
func final(obj runObject) (done, succeeded bool) {
	st := obj.GetRunStatus()
	if st.ObservedGeneration != obj.GetGeneration() {
		return false, false
	}
	if c := meta.FindStatusCondition(st.Conditions, bpav1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration() {
		return true, false
	}
	if ready := meta.FindStatusCondition(st.Conditions, bpav1.ConditionReady); st.Phase == bpav1.PhaseSucceeded && ready != nil && ready.Status == metav1.ConditionTrue {
		return true, true
	}
	return st.Phase == bpav1.PhaseFailed || st.Phase == bpav1.PhaseError, false
}

// retry runs f until it succeeds (a conflict or an apiserver away is tried again), for at
// most two minutes; it logs and says false when it gave up.
func (s *soak) retry(what string, f func() error) bool {
	var last error
	ok := s.poll(2*time.Minute, what, func() (bool, error) {
		last = f()
		return last == nil, nil
	})
	if !ok {
		s.t.Logf("%s: gave up: %v", what, last)
	}
	return ok
}

// poll calls cond every half second until it says done, returns an error, or timeout; it
// says whether cond was met.
func (s *soak) poll(timeout time.Duration, what string, cond func() (bool, error)) bool {
	deadline := time.Now().Add(timeout)
	for {
		done, err := cond()
		if err != nil {
			s.t.Logf("%s: %v", what, err)
		}
		if done {
			return true
		}
		if time.Now().After(deadline) || s.ctx.Err() != nil {
			s.t.Logf("timed out waiting for %s", what)
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
