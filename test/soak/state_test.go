package soak

import (
	"slices"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/chaos"
)

// settleTimeout bounds the wait, after the workload and the faults, for every run to end.
const settleTimeout = 10 * time.Minute

// judgeTimeout bounds how long the invariants may take to hold once everything settled:
// the garbage collector deletes what a deleted owner owned a moment later.
const judgeTimeout = time.Minute

// watchWorkflows records every Workflow of the sites every second, so a Workflow deleted
// and made again for one run is seen; it returns the function that stops it.
func (s *soak) watchWorkflows() (stop func()) {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for sleepOr(done, time.Second) {
			for _, wf := range s.workflows() {
				s.mu.Lock()
				s.history[string(wf.UID)] = record{chaos.RecordOf(&wf), wf.Status.Phase}
				s.mu.Unlock()
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func sleepOr(done <-chan struct{}, d time.Duration) bool {
	select {
	case <-done:
		return false
	case <-time.After(d):
		return true
	}
}

// workflows lists the sites' Workflows (none of a site whose list failed).
func (s *soak) workflows() []wfv1.Workflow {
	var out []wfv1.Workflow
	for _, site := range s.sites {
		list := &wfv1.WorkflowList{}
		if err := s.base.Client.List(s.ctx, list, client.InNamespace(site.Namespace)); err == nil {
			out = append(out, list.Items...)
		}
	}
	return out
}

// settle waits until every CR's run is final and no Workflow runs, twice in a row.
func (s *soak) settle() {
	calm := 0
	s.poll(settleTimeout, "every run to end", func() (bool, error) {
		st, err := s.state()
		if err != nil || !quiet(st) {
			calm = 0
			return false, nil //nolint:nilerr // an apiserver away: try again
		}
		calm++
		return calm >= 3, nil
	})
}

// quiet says whether every CR of st is final for its generation and no Workflow runs.
func quiet(st *chaos.State) bool {
	for i := range st.Provisionings {
		if done, _ := final(&st.Provisionings[i]); !done {
			return false
		}
	}
	for i := range st.Softwares {
		if done, _ := final(&st.Softwares[i]); !done {
			return false
		}
	}
	for _, wf := range st.Workflows {
		if !wf.Status.Fulfilled() {
			return false
		}
	}
	return true
}

// judge checks the invariants until they hold or judgeTimeout passes, and reports.
func (s *soak) judge() *chaos.Report {
	r := &chaos.Report{Plan: s.plan}
	s.poll(judgeTimeout, "the invariants", func() (bool, error) {
		st, err := s.state()
		if err != nil {
			return false, nil //nolint:nilerr // an apiserver away: try again
		}
		r.Violations, r.Accepted = chaos.Check(st)
		return len(r.Violations) == 0, nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Faults, r.Ops, r.Runs = s.faults, s.ops, map[string]int{}
	var runs []string
	for _, rec := range s.history {
		r.Runs[string(rec.phase)]++
		runs = append(runs, rec.Namespace+"/"+rec.Name+" "+string(rec.phase))
	}
	slices.Sort(runs)
	s.t.Logf("Workflows seen:\n  %s", strings.Join(runs, "\n  "))
	return r
}

// state reads what the invariants judge from the sites.
func (s *soak) state() (*chaos.State, error) {
	s.mu.Lock()
	st := &chaos.State{Faults: append([]chaos.Injected(nil), s.faults...), Nodes: map[string][]corev1.Node{}}
	for _, rec := range s.history {
		st.History = append(st.History, rec.WorkflowRecord)
	}
	s.mu.Unlock()
	bpa := client.MatchingLabels{bpav1.ManagedByLabel: bpav1.ManagedByValue}
	for _, site := range s.sites {
		ns := client.InNamespace(site.Namespace)
		var (
			ps  bpav1.ProvisioningList
			sws bpav1.SoftwareList
			cls bpav1.ClusterList
			wfs wfv1.WorkflowList
			bmh metal3v1.BareMetalHostList
			sec corev1.SecretList
			cms corev1.ConfigMapList
		)
		for _, l := range []struct {
			list client.ObjectList
			opts []client.ListOption
		}{{&ps, nil}, {&sws, nil}, {&cls, nil}, {&wfs, nil}, {&bmh, nil}, {&sec, []client.ListOption{bpa}}, {&cms, []client.ListOption{bpa}}} {
			if err := s.base.Client.List(s.ctx, l.list, append(l.opts, ns)...); err != nil {
				return nil, err
			}
		}
		st.Provisionings = append(st.Provisionings, ps.Items...)
		st.Softwares = append(st.Softwares, sws.Items...)
		st.Clusters = append(st.Clusters, cls.Items...)
		st.Workflows = append(st.Workflows, wfs.Items...)
		st.Hosts = append(st.Hosts, bmh.Items...)
		st.Secrets = append(st.Secrets, sec.Items...)
		st.ConfigMaps = append(st.ConfigMaps, cms.Items...)
	}
	if err := s.appNodes(st); err != nil {
		return nil, err
	}
	return st, nil
}

// appNodes files each cluster's application Nodes under "namespace/cluster".
func (s *soak) appNodes(st *chaos.State) error {
	for _, c := range s.clusters {
		_, nodes, err := c.nodes(s.ctx)
		if err != nil {
			return err
		}
		st.Nodes[c.site.Namespace+"/"+c.name] = nodes
	}
	return nil
}

// writer collects the report.
type writer struct{ strings.Builder }

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
