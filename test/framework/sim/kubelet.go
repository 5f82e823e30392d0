package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// The units kubespray installs on every node, which a simulated machine's systemctl acts on
// once the machine joined (kubeletUnits).
const (
	KubeletUnit    = "kubelet"
	ContainerdUnit = "containerd"
)

// KubeletHeartbeat is how often a simulated kubelet renews its Node's Lease. A real kubelet
// renews every 10 s (a quarter of its 40 s lease); the rig's node-lifecycle controller waits
// rig.NodeMonitorGracePeriod, so this is shorter in proportion.
const KubeletHeartbeat = 2 * time.Second

// kubeletUserAgent tells the simulated kubelets' requests apart in the audit log.
const kubeletUserAgent = "bpa-sim-kubelet"

// kubeletLease is what a real kubelet's Lease says: 40 s (its nodeLeaseDurationSeconds).
const kubeletLease = 40

// kubeletUnits are one machine's kubelet and containerd units. There is no kubelet on a
// simulated machine: the stand-in's join registers the Node, and the site's heartbeat loop
// (startKubelets) posts the Node's heartbeat for every machine whose units both run. So
// stopping either one (or the machine) is what a dead kubelet is to the cluster: no
// heartbeat, and the real node-lifecycle controller marks the Node Unknown.
type kubeletUnits struct {
	h       *simhost.Host
	mu      sync.Mutex
	stopped map[string]bool
	// broken units fail to start until the machine boots again (BreakUntilReboot).
	broken map[string]bool
	// off: the machine has no power (the metal3 stand-in's power cycle, reboot.go).
	off bool
}

// machineKubelets holds every machine's units, by machine.
var machineKubelets sync.Map // *simhost.Host → *kubeletUnits

// addKubeletUnits gives machine h the kubelet and containerd units.
func addKubeletUnits(h *simhost.Host) {
	k := &kubeletUnits{h: h, stopped: map[string]bool{}, broken: map[string]bool{}}
	machineKubelets.Store(h, k)
	for _, name := range []string{KubeletUnit, ContainerdUnit} {
		h.AddUnit(name, simhost.Unit{
			Loaded: k.joined,
			Active: func() bool { return k.joined() && !k.isStopped(name) },
			Start:  func(context.Context) error { return k.start(name) },
			Stop:   func() error { k.set(name, true); return nil },
		})
	}
}

// start starts unit name, unless it is broken until the next boot.
func (k *kubeletUnits) start(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.broken[name] {
		return fmt.Errorf("%s exited 1 at start (simulated fault: it starts again only after a reboot)", name)
	}
	k.stopped[name] = false
	return nil
}

// breakUntilReboot stops unit name and fails its starts until boot.
func (k *kubeletUnits) breakUntilReboot(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped[name], k.broken[name] = true, true
}

// powerOff: no power, no heartbeat.
func (k *kubeletUnits) powerOff() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.off = true
}

// boot: power again, and the units, enabled as kubespray leaves them, run; a fault that
// lived in memory is gone.
func (k *kubeletUnits) boot() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.off, k.stopped, k.broken = false, map[string]bool{}, map[string]bool{}
}

// joined: the units are there while the machine has the kubelet's client certificate, which
// the stand-in's join writes and its reset removes, as kubespray installs the units on a
// node and its reset removes them.
func (k *kubeletUnits) joined() bool {
	_, err := os.Stat(k.h.File(simcerts.KubeletClient))
	return err == nil
}

func (k *kubeletUnits) isStopped(name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.off || k.stopped[name]
}

func (k *kubeletUnits) set(name string, stopped bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped[name] = stopped
}

// beating: the machine runs and both units are active (a kubelet without its runtime
// reports nothing useful; the simulation keeps it to one rule).
func (k *kubeletUnits) beating() bool {
	return k.h.Alive() && k.joined() && !k.isStopped(KubeletUnit) && !k.isStopped(ContainerdUnit)
}

// startKubelets starts the heartbeat loop of app's Nodes until t ends: every KubeletHeartbeat,
// each Node whose InternalIP is a machine (machineAt) that is beating gets its Lease in
// kube-node-lease renewed and, when its Ready condition is not True (a new Node the
// controller has not seen, or one it marked Unknown), Ready True posted, as a kubelet that
// (re)starts does. A Node of no machine gets nothing, as one whose host is gone.
func startKubelets(t framework.T, app *rig.AppAPIServer, machineAt func(ip string) *simhost.Host) {
	t.Helper()
	cfg := rest.CopyConfig(app.RESTConfig)
	cfg.UserAgent = kubeletUserAgent
	kc, err := kubernetes.NewForConfig(cfg)
	must(t, err, "the simulated kubelets' client")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(KubeletHeartbeat)
		defer tick.Stop()
		for {
			beat(ctx, kc, machineAt)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// beat is one round of heartbeats; errors wait for the next round, as a kubelet retries.
func beat(ctx context.Context, kc kubernetes.Interface, machineAt func(string) *simhost.Host) {
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		h := machineAt(internalIP(n))
		if h == nil {
			continue
		}
		k, ok := machineKubelets.Load(h)
		if !ok || !k.(*kubeletUnits).beating() {
			continue
		}
		_ = renewLease(ctx, kc, n)
		_ = postReady(ctx, kc, n)
	}
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// renewLease renews (or creates, owned by the Node as the kubelet's is) kube-node-lease/<node>.
func renewLease(ctx context.Context, kc kubernetes.Interface, n *corev1.Node) error {
	leases := kc.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, n.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Namespace: corev1.NamespaceNodeLease, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID,
			}}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.Name), LeaseDurationSeconds: ptr.To[int32](kubeletLease), RenewTime: &now},
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// postReady posts Ready True where the Node's Ready is Unknown or False, as a patch of that
// one condition (a kubelet patches its status). A Node with no Ready condition is being
// joined: the stand-in's join posts its first Ready on the Node it read, and a write between
// its read and its update would fail it with a conflict.
func postReady(ctx context.Context, kc kubernetes.Interface, n *corev1.Node) error {
	stale := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			stale = c.Status != corev1.ConditionTrue
		}
	}
	if !stale {
		return nil
	}
	now := metav1.Now()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}}}})
	if err != nil {
		return err
	}
	_, err = kc.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
