package integration

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestWorkflowTooLarge: on a real kube-apiserver whose etcd takes requests of at most 64 KiB
// (its --max-request-bytes; the default 1.5 MiB and the apiserver's own 3 MiB body limit are
// far above any Workflow of a Provisioning within the node cap), a day-2 run that adds 999
// pool workers plans a Workflow of about 75 KiB, which etcd refuses. The Provisioning is
// Stalled with reason WorkflowTooLarge naming the size and etcd's limit, with a Warning
// event, and the controller neither retries nor plans again while the spec stays as it is:
// one Workflow create, however often the CR is reconciled. A smaller change then runs.
// Before, the reconcile failed and was retried with backoff, planning and creating again.
func TestWorkflowTooLarge(t *testing.T) {
	ctx, r, c := crdsOnRig(t, rig.Options{MinimalArgoCRDs: true, EtcdMaxRequestBytes: 64 << 10})
	ns := r.Namespace
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ssh",
		Labels: map[string]string{bpav1.ClusterNameLabel: "c1"}}}))

	// A cluster built by generation 1 (one master, an empty pool), as its run left it.
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big", Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, WorkerPools: []bpav1.WorkerPool{{Name: "edge"}},
			// No backup server on this rig: the run is the scale-up alone.
			EtcdBackup: &bpav1.EtcdBackup{BeforeDay2: bpav1.BackupSkip}}}
	builtAsSpecified(ctx, t, c, p)
	setReplicas := func(n int32) {
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p = getProvisioning(ctx, t, c, ns, "big")
			p.Spec.WorkerPools[0].Replicas = n
			return c.Update(ctx, p)
		}))
	}
	setReplicas(999) // generation 2: 1,000 nodes, the most a Provisioning may have

	var creates atomic.Int32
	cfg := rest.CopyConfig(r.RESTConfig)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/workflows") {
				creates.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
	stop, stopped := startControllerOn(ctx, t, cfg, ns, controller.Options{})
	t.Cleanup(func() { stop(); assert.NoError(t, <-stopped, "the controller ends cleanly when stopped") })

	stalled := func() *metav1.Condition {
		return meta.FindStatusCondition(getProvisioning(ctx, t, c, ns, "big").Status.Conditions, bpav1.ConditionStalled)
	}
	eventually(t, "Stalled WorkflowTooLarge", func() bool { s := stalled(); return s != nil && s.Reason == bpav1.ReasonWorkflowTooLarge })
	msg := stalled().Message
	t.Log(msg)
	assert.Regexp(t, `^Workflow big-provision-2 for generation 2 is \d+ bytes \(7\d\.\d KiB\) as JSON, more than etcd's limit on one request \(etcdserver: request is too large; etcd's --max-request-bytes`, msg)
	assertEvent(ctx, t, c, ns, "big", bpav1.ReasonWorkflowTooLarge)
	assert.Equal(t, int32(1), creates.Load())

	// Reconciled again and again (each annotation change is a reconcile): never planned,
	// never created again.
	for i := range 3 {
		before := reconciles(t)
		require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p = getProvisioning(ctx, t, c, ns, "big")
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, "example.com/touched", string(rune('a'+i)))
			return c.Update(ctx, p)
		}))
		eventually(t, "a reconcile", func() bool { return reconciles(t) > before })
	}
	assert.Equal(t, int32(1), creates.Load(), "the same spec was planned and created again")
	assert.Equal(t, bpav1.ReasonWorkflowTooLarge, stalled().Reason)

	// A change of fewer nodes runs.
	setReplicas(10)
	eventually(t, "the smaller run started", func() bool {
		p := getProvisioning(ctx, t, c, ns, "big")
		return p.Status.ObservedGeneration == p.Generation && p.Status.Workflow != nil
	})
	assert.Nil(t, stalled())
	assert.Equal(t, int32(2), creates.Load())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// reconciles is how many reconciles of Provisionings have finished in this process.
func reconciles(t *testing.T) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "provisioning" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
