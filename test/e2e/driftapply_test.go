package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// assertDriftPutBack: with spec.driftCheck.reconcile: Apply, drift a run puts back is put back
// through the normal plan. Node w of cluster prov reports another kubelet release and loses
// package pkg of Software sw; the check asks once for a rerun of the spec (cluster.yml
// installs kube_version's kubelet) and of the Software (which installs the package), and the
// check after those runs finds neither.
func (e *env) assertDriftPutBack(t *testing.T, prov, sw, w string, m *simhost.Host, pkg string) {
	t.Helper()
	start := time.Now()
	kc, err := kubernetes.NewForConfig(e.App.RESTConfig)
	require.NoError(t, err)
	n, err := kc.CoreV1().Nodes().Get(e.ctx, w, metav1.GetOptions{})
	require.NoError(t, err)
	applied := n.Status.NodeInfo.KubeletVersion
	n.Status.NodeInfo.KubeletVersion = "v1.31.0"
	_, err = kc.CoreV1().Nodes().UpdateStatus(e.ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	pkgs := m.Packages()
	had := pkgs[pkg]
	delete(pkgs, pkg)
	m.SetPackages(pkgs)

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &bpav1.Provisioning{}
		if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: prov}, p); err != nil {
			return err
		}
		p.Spec.DriftCheck = &bpav1.DriftCheck{Interval: metav1.Duration{Duration: time.Minute}, Reconcile: bpav1.DriftApply}
		return e.Client.Update(e.ctx, p)
	}))
	kubelet := "node " + w + ": kubelet v1.31.0, applied " + applied
	got := &bpav1.Provisioning{}
	e.waitWithin(t, 6*time.Minute, got, prov, func() bool {
		return got.Status.Drift != nil && got.Status.Drift.Reconcile != nil
	}, "a check to ask for the runs that put drift back")
	rec := got.Status.Drift.Reconcile
	require.Contains(t, rec.Fields, kubelet)
	assert.True(t, slices.ContainsFunc(rec.Fields, func(l string) bool { return strings.HasPrefix(l, "node "+w+": package "+pkg) }), "%v", rec.Fields)
	assert.True(t, rec.Provisioning)
	assert.Equal(t, []string{sw}, rec.Softwares)
	request := rec.Request
	assert.True(t, strings.HasPrefix(request, bpav1.DriftRerunPrefix), request)

	e.waitWithin(t, 12*time.Minute, got, prov, func() bool {
		c := meta.FindStatusCondition(got.Status.Conditions, bpav1.ConditionDrifted)
		return got.Status.LastHandledRerun == request && got.Status.Drift != nil && got.Status.Drift.Reconcile == nil &&
			c != nil && !strings.Contains(c.Message, "node "+w+":")
	}, "the runs to put the drift back and a check to find it gone")
	n, err = kc.CoreV1().Nodes().Get(e.ctx, w, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, applied, n.Status.NodeInfo.KubeletVersion, "cluster.yml's kubelet")
	assert.Equal(t, had, m.Packages()[pkg], "the Software's rerun installed it again")
	s := &bpav1.Software{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: sw}, s))
	assert.Equal(t, request, s.Status.LastHandledRerun)
	assert.Equal(t, bpav1.PhaseSucceeded, s.Status.Phase)
	assert.Equal(t, 1, e.countEvents(t, prov, bpav1.EventDriftReconcile, corev1.EventTypeNormal), "asked once")
	t.Logf("drift put back %s after the change (a check, a rerun of the spec and of the Software, a check)", time.Since(start).Round(time.Second))
}
