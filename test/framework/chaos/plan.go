// Package chaos is the chaos soak's framework (test/soak), shared so other suites can reuse
// it: a seeded Plan of operations and faults, and the invariant checkers that judge what a
// site looks like once the workload has settled (invariants.go).
//
// A Plan is a pure function of its seed and sizes: the same seed gives the same operations,
// in the same order per cluster, and the same faults, with the same kinds, targets, gaps and
// outages. What a seed cannot fix is timing: which step of which run a fault lands in
// depends on how fast the machine runs the steps.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Kind is a kind of fault: what is killed, or which host is taken away.
type Kind string

// The faults the soak injects, each followed by a recovery after an outage.
const (
	// KillController: kill -9 of a site's BPA controller; recovery starts it again.
	KillController Kind = "bpa-controller"
	// KillWorkflowController: kill -9 of Argo's workflow-controller.
	KillWorkflowController Kind = "workflow-controller"
	// KillAPIServer: kill -9 of the main kube-apiserver; restarted with the same flags.
	KillAPIServer Kind = "kube-apiserver"
	// KillEtcd: kill -9 of the rig's etcd; restarted on the same data dir.
	KillEtcd Kind = "etcd"
	// KillKubelet and KillContainerd: kill -9 of the real node's daemons.
	KillKubelet    Kind = "kubelet"
	KillContainerd Kind = "containerd"
	// FreezeHost: a simulated host's sshd stops answering (SIGSTOP) for the outage.
	FreezeHost Kind = "host-frozen"
	// CutHostNetwork: a simulated host's link goes down for the outage.
	CutHostNetwork Kind = "host-network-cut"
)

// Kinds is every Kind, in a fixed order.
var Kinds = []Kind{KillController, KillWorkflowController, KillAPIServer, KillEtcd, KillKubelet, KillContainerd, FreezeHost, CutHostNetwork}

// HostFault says whether k takes a simulated host away (rather than killing a process).
func (k Kind) HostFault() bool { return k == FreezeHost || k == CutHostNetwork }

// Fault is one fault of a Plan.
type Fault struct {
	Kind Kind
	// Gap is the wait before it, after the previous fault's recovery.
	Gap time.Duration
	// Outage is how long the target stays down before its recovery.
	Outage time.Duration
	// Pick chooses the target among those the kind has at the moment (a site, a host of a
	// running cluster): the soak takes Pick modulo their number.
	Pick int
}

func (f Fault) String() string {
	return fmt.Sprintf("%s (pick %d) after %s, down %s", f.Kind, f.Pick, f.Gap, f.Outage)
}

// OpKind is a kind of operation on a cluster, after its creation.
type OpKind string

// The operations of the workload.
const (
	ScaleOut       OpKind = "scale-out"       // a spare host joins as a worker
	ScaleIn        OpKind = "scale-in"        // a worker is removed
	SoftwareChange OpKind = "software-change" // the cluster's Software pins another version
	Recreate       OpKind = "delete-recreate" // the Provisioning is deleted and applied again
)

// OpKinds is every OpKind, in a fixed order.
var OpKinds = []OpKind{ScaleOut, ScaleIn, SoftwareChange, Recreate}

// Config sizes a Plan.
type Config struct {
	Faults   int
	Clusters int
	// OpsPerCluster is how many operations follow each cluster's creation.
	OpsPerCluster int
	// MaxGap and MaxOutage bound a fault's Gap and Outage (drawn uniformly from 0 to them).
	MaxGap, MaxOutage time.Duration
}

// Plan is a seeded workload and fault schedule.
type Plan struct {
	Seed   uint64
	Config Config
	Faults []Fault
	// Ops are each cluster's operations, in order, after its creation.
	Ops [][]OpKind
}

// NewPlan draws a Plan from seed. The first faults are every Kind once, in a seeded order,
// and the first operation of the clusters, taken together, every OpKind once, so that even a
// short plan covers each kind; the rest are drawn at random.
func NewPlan(seed uint64, c Config) Plan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := Plan{Seed: seed, Config: c}
	kinds := shuffled(rng, Kinds)
	for i := range c.Faults {
		k := Kinds[rng.IntN(len(Kinds))]
		if i < len(kinds) {
			k = kinds[i]
		}
		p.Faults = append(p.Faults, Fault{Kind: k, Gap: duration(rng, c.MaxGap), Outage: duration(rng, c.MaxOutage), Pick: rng.IntN(1 << 16)})
	}
	ops := shuffled(rng, OpKinds)
	for i := range c.Clusters {
		var list []OpKind
		for j := range c.OpsPerCluster {
			k := OpKinds[rng.IntN(len(OpKinds))]
			if n := j*c.Clusters + i; n < len(ops) {
				k = ops[n]
			}
			list = append(list, k)
		}
		p.Ops = append(p.Ops, list)
	}
	return p
}

func shuffled[T any](rng *rand.Rand, in []T) []T {
	out := append([]T(nil), in...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// duration is uniform in [0, upTo], to the 100 ms.
func duration(rng *rand.Rand, upTo time.Duration) time.Duration {
	steps := int(upTo / (100 * time.Millisecond))
	return time.Duration(rng.IntN(steps+1)) * 100 * time.Millisecond
}
