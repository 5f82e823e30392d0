package controller

import (
	"context"
	"net/http"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// The refusals a Workflow too large to store meets, as client-go returns them (both seen on
// test/framework/rig's real kube-apiserver and etcd, see test/integration's TestWorkflowTooLarge).
var (
	bodyTooLarge = apierrors.NewRequestEntityTooLargeError("limit is 3145728")
	etcdRefusal  = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: "etcdserver: request is too large"}}
)

// A Workflow the apiserver refuses for its size stalls the CR with reason WorkflowTooLarge,
// naming the size and the limit, with one Warning event; the reconcile succeeds (no backoff
// retry), and the CR is not planned again until its spec or rerun annotation changes.
// Before, the reconcile failed and was retried with backoff, planning the run again each time.
func TestWorkflowTooLargeStallsWithoutReplanning(t *testing.T) {
	for name, tc := range map[string]struct {
		refusal error
		limit   string
	}{
		"the apiserver's request body limit (413)": {bodyTooLarge, "more than the apiserver's request body limit (Request entity too large: limit is 3145728)"},
		"etcd's --max-request-bytes":               {etcdRefusal, "more than etcd's limit on one request (etcdserver: request is too large; etcd's --max-request-bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			refuse := true
			r, c, rec := newTestReconcilerWith(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*wfv1.Workflow); ok && refuse {
					return tc.refusal
				}
				return c.Create(ctx, obj, opts...)
			}}, newProvisioning())
			plans := 0
			translate := r.kind.translate
			r.kind.translate = func(ctx context.Context, obj runObject, o translator.Options) (*wfv1.Workflow, error) {
				plans++
				return translate(ctx, obj, o)
			}
			run := func() *bpav1.Provisioning {
				res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "p"}})
				require.NoError(t, err, "a refusal for size is not an error to retry")
				assert.Zero(t, res.RequeueAfter)
				p := &bpav1.Provisioning{}
				require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "p"}, p))
				return p
			}

			p := run()
			assert.Empty(t, workflows(t, c))
			stalled := condition(p, bpav1.ConditionStalled)
			assert.Equal(t, metav1.ConditionTrue, stalled.Status)
			assert.Equal(t, bpav1.ReasonWorkflowTooLarge, stalled.Reason)
			assert.Equal(t, int64(1), stalled.ObservedGeneration)
			assert.Regexp(t, `^Workflow p-provision-1 for generation 1 is \d+ bytes \(\d+\.\d KiB\) as JSON, `, stalled.Message)
			assert.Contains(t, stalled.Message, tc.limit)
			assert.Equal(t, bpav1.ReasonWorkflowTooLarge, condition(p, bpav1.ConditionReady).Reason)
			assert.Equal(t, stalled.Message, p.Status.Message)
			require.Len(t, rec.Events, 1)
			assert.Equal(t, "Warning WorkflowTooLarge "+stalled.Message, <-rec.Events)

			// Nothing changed: not planned again, nothing written, no second event.
			before := p.ResourceVersion
			p = run()
			assert.Equal(t, 1, plans, "planned again for an unchanged spec")
			assert.Equal(t, before, p.ResourceVersion)
			assert.Empty(t, rec.Events)

			// A new rerun request plans again (the site's admin may have raised the limit).
			p.Annotations = map[string]string{bpav1.RerunAnnotation: "1"}
			require.NoError(t, c.Update(context.Background(), p))
			run()
			assert.Equal(t, 2, plans)
			<-rec.Events

			// A new spec is planned, and its run starts.
			refuse = false
			p = run()
			assert.Equal(t, 2, plans, "planned again for an unchanged spec")
			p.Spec.Masters = []bpav1.NodeEntry{{"m2": nil}}
			p.Generation = 2 // the fake client does not count generations
			require.NoError(t, c.Update(context.Background(), p))
			p = run()
			assert.Equal(t, 3, plans)
			require.Len(t, workflows(t, c), 1)
			assert.Equal(t, int64(2), p.Status.ObservedGeneration)
			assert.Empty(t, condition(p, bpav1.ConditionStalled).Type, "the run started: no longer Stalled")
		})
	}
}

// Other errors are not refusals for size.
func TestSizeLimitOnlyForSizeRefusals(t *testing.T) {
	assert.Empty(t, sizeLimit(nil))
	assert.Empty(t, sizeLimit(apierrors.NewInternalError(assert.AnError)))
	assert.Empty(t, sizeLimit(apierrors.NewBadRequest("request is too large, but not etcd's words")))
	assert.NotEmpty(t, sizeLimit(bodyTooLarge))
	assert.NotEmpty(t, sizeLimit(etcdRefusal))
}
