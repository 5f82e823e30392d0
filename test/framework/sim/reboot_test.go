package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/hostfixture"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// rebootBridge is this file's own bridge (see etcdBridge).
const (
	rebootBridge     = "bpasimrebt0"
	rebootBridgeCIDR = "10.222.0.1/24"
)

// TestRebootAnnotationStandIn: w1's kubelet broken until a reboot (BreakUntilReboot) leaves
// its Node Unknown, and `systemctl start kubelet` fails. metal3's stand-in ignores a reboot
// annotation with a value the baremetal-operator's webhook refuses, and one on a host that is
// not provisioned; once the host is provisioned again it powers it off (status.poweredOn
// false, the machine unreachable), removes the annotation only after that, powers it on, and
// the machine comes back with its units running and its Node Ready. A host with no
// annotation is never touched.
func TestRebootAnnotationStandIn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := StartCluster(t, ctx, ClusterOptions{Bridge: rebootBridge, CIDR: rebootBridgeCIDR, Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, Etcd: true}, {Name: "w1", Roles: []string{"worker"}},
	}})
	kc, err := kubernetes.NewForConfig(c.App.RESTConfig)
	require.NoError(t, err)
	require.NoError(t, bpatest.InstallBareMetalHostCRD(ctx, c.App.RESTConfig))
	hc, err := client.New(c.App.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	const ns = "default"
	w1, m1 := c.Machines["w1"], c.Machines["m1"]
	machines := map[string]*simhost.Host{"bmh-w1": w1, "bmh-m1": m1}
	for name := range machines {
		h := hostfixture.Provisioned(&metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: metal3v1.BareMetalHostSpec{BootMACAddress: "00:11:22:33:44:55"}})
		status := h.Status
		require.NoError(t, hc.Create(ctx, h))
		h.Status = status
		require.NoError(t, hc.Status().Update(ctx, h))
	}
	startRebooter(t, hc, hc, ns, func(h *metal3v1.BareMetalHost) *simhost.Host { return machines[h.Name] })

	systemctl := func(verb, unit string) (string, int) {
		sc, err := sshexec.Dial(ctx, w1.IP, sshexec.Config{Port: w1.Port, KeyFile: w1.ClientKeyPath(), KnownHostsFile: w1.KnownHostsPath()})
		require.NoError(t, err)
		defer sc.Close()
		out, stderr, code, err := sc.Run(ctx, []string{"systemctl", verb, unit})
		require.NoError(t, err)
		return string(out) + string(stderr), code
	}
	require.NoError(t, BreakUntilReboot(w1, KubeletUnit))
	waitReady(t, ctx, kc, "w1", corev1.ConditionUnknown, rig.NodeMonitorGracePeriod+10*time.Second)
	out, code := systemctl("start", KubeletUnit)
	assert.NotZero(t, code, "a broken kubelet does not start")
	assert.Contains(t, out, "only after a reboot")

	host := func(name string) *metal3v1.BareMetalHost {
		h := &metal3v1.BareMetalHost{}
		require.NoError(t, hc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, h))
		return h
	}
	annotate := func(value string) {
		h := host("bmh-w1")
		h.Annotations = map[string]string{metal3v1.RebootAnnotationPrefix: value}
		require.NoError(t, hc.Update(ctx, h))
	}
	// What the stand-in is seen doing to bmh-w1, one entry per change.
	var mu sync.Mutex
	var seen []string
	watch, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for watch.Err() == nil {
			h := &metal3v1.BareMetalHost{}
			if hc.Get(watch, client.ObjectKey{Namespace: ns, Name: "bmh-w1"}, h) == nil {
				_, set := h.Annotations[metal3v1.RebootAnnotationPrefix]
				s := fmt.Sprintf("annotation %t, poweredOn %t", set, h.Status.PoweredOn)
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != s {
					seen = append(seen, s)
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	annotate(`{"mode":"evil"}`) // the webhook would refuse it
	time.Sleep(4 * rebootPoll)
	assert.True(t, host("bmh-w1").Status.PoweredOn, "an invalid value reboots nothing")
	assert.Contains(t, host("bmh-w1").Annotations, metal3v1.RebootAnnotationPrefix)

	h := host("bmh-w1")
	h.Status.Provisioning.State = metal3v1.StateDeprovisioning
	require.NoError(t, hc.Status().Update(ctx, h))
	annotate(`{"mode":"hard"}`)
	time.Sleep(4 * rebootPoll)
	assert.True(t, host("bmh-w1").Status.PoweredOn, "a host being deprovisioned is not rebooted")

	mu.Lock()
	seen = nil // from here: the reboot
	mu.Unlock()
	start := time.Now()
	h = host("bmh-w1")
	h.Status.Provisioning.State = metal3v1.StateProvisioned
	require.NoError(t, hc.Status().Update(ctx, h))
	require.Eventually(t, func() bool {
		h := host("bmh-w1")
		_, set := h.Annotations[metal3v1.RebootAnnotationPrefix]
		return !set && h.Status.PoweredOn
	}, time.Minute, 100*time.Millisecond, "powered off and on, the annotation removed")
	time.Sleep(200 * time.Millisecond) // the watch sees it too
	stop()
	wg.Wait()
	// Off first, then the annotation removed (seen while off: the boot takes bootTime), then
	// on; the watch may miss the shortest of these, never see them in another order.
	order := []string{"annotation true, poweredOn true", "annotation true, poweredOn false", "annotation false, poweredOn false", "annotation false, poweredOn true"}
	next := 0
	for _, s := range seen {
		i := slices.Index(order[next:], s)
		require.GreaterOrEqual(t, i, 0, "%q out of order in %q", s, seen)
		next += i + 1
	}
	assert.Contains(t, seen, "annotation false, poweredOn false", "the annotation is removed while the host is off")
	assert.Equal(t, order[3], seen[len(seen)-1])
	waitReady(t, ctx, kc, "w1", corev1.ConditionTrue, 30*time.Second)
	t.Logf("sim metal3: w1 Ready %s after its host became rebootable", time.Since(start).Round(100*time.Millisecond))
	for _, u := range []string{KubeletUnit, ContainerdUnit} {
		out, code := systemctl("is-active", u)
		assert.Zero(t, code, u)
		assert.Equal(t, "active\n", out, u)
	}
	assert.True(t, host("bmh-m1").Status.PoweredOn, "a host with no annotation is left alone")
	waitReady(t, ctx, kc, "m1", corev1.ConditionTrue, time.Second)
}
