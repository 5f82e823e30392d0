package soak

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/akraino-edge-stack/bpa/test/framework/chaos"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
)

// shortFaults is the short version's number of faults: every kind once, and two more.
const shortFaults = 10

// config reads BPA_SOAK_FAULTS and BPA_SOAK_SEED (default: shortFaults, a random seed) and
// sizes the plan: the short version keeps outages and gaps short and has one operation per
// cluster after its creation (three of the four kinds), to stay within its 4 minutes (with
// two it took 4m8s on two shared cores); a long one draws outages up to 10 s and gives each
// cluster about one operation per six faults, so operations run while the faults land.
func config(t *testing.T) (uint64, chaos.Config) {
	faults := shortFaults
	if v := os.Getenv("BPA_SOAK_FAULTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BPA_SOAK_FAULTS=%q: want a positive number", v)
		}
		faults = n
	}
	seed := uint64(time.Now().UnixNano()) % 1_000_000
	if v := os.Getenv("BPA_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("BPA_SOAK_SEED=%q: want a number", v)
		}
		seed = n
	}
	c := chaos.Config{Faults: faults, Clusters: len(layout), OpsPerCluster: 1, MaxGap: 3 * time.Second, MaxOutage: 3 * time.Second}
	if faults > shortFaults {
		c.OpsPerCluster, c.MaxGap, c.MaxOutage = max(2, faults/6), 8*time.Second, 10*time.Second
	}
	return seed, c
}

// layout places the clusters: two on the first site, one on the second; each has a master,
// a worker and a spare host for scale-out, at HostIP(base)...
var layout = []struct {
	site int
	name string
	base int
}{{0, "c1", 10}, {0, "c2", 20}, {1, "c3", 10}}

// TestSoak runs the plan the seed draws and checks the invariants once the workload has
// settled; on a violation it prints the seed and the replay command.
func TestSoak(t *testing.T) {
	seed, cfg := config(t)
	plan := chaos.NewPlan(seed, cfg)
	replay := (&chaos.Report{Plan: plan}).Replay()
	t.Logf("soak seed %d, %d faults, %d operations per cluster (replay: %s)", seed, cfg.Faults, cfg.OpsPerCluster, replay)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Faults)*time.Minute+20*time.Minute)
	defer cancel()

	start := time.Now()
	base := sim.Start(t, sim.Options{})
	// The wall time starts once the node is ours: waiting for another test's is not the soak's.
	begin := time.Now().Add(-base.Node.Started)
	t.Logf("node lock and start: %s", time.Since(start).Round(time.Second))
	s := &soak{t: t, ctx: ctx, base: base, plan: plan, history: map[string]record{}}
	for range 2 {
		s.sites = append(s.sites, base.NewSite(t))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, site := range s.sites {
				t.Logf("controller log of %s (tail):\n%s", site.Namespace, tail(site.ControllerLog(), 40))
			}
		}
	})
	for i, l := range layout {
		s.clusters = append(s.clusters, s.newCluster(l.site, l.name, l.base, plan.Ops[i]))
	}
	stopWatch := s.watchWorkflows()

	var wg sync.WaitGroup
	for _, c := range s.clusters {
		wg.Go(func() { c.run(s) })
	}
	wg.Go(s.injectFaults)
	wg.Wait()
	s.settle()
	stopWatch()

	r := s.judge()
	r.Wall = time.Since(begin)
	var out writer
	r.Write(&out)
	t.Log(out.String())
	if len(r.Violations) > 0 || len(r.Faults) != cfg.Faults {
		t.Errorf("soak seed %d: %d violations, %d of %d faults injected; replay: %s", seed, len(r.Violations), len(r.Faults), cfg.Faults, replay)
	}
}
