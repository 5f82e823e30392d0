package integration

import (
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestMirrorAfterAPIServerRestart: the controller keeps mirroring its Workflows after the
// apiserver was killed (kill -9) and restarted mid-run, as after etcd was. The chaos soak
// found a controller that had stopped seeing its Workflows' updates after such a restart.
func TestMirrorAfterAPIServerRestart(t *testing.T) {
	ctx, r, c := crdsOnRig(t, rig.Options{MinimalArgoCRDs: true})
	ns := r.Namespace
	require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1-ssh",
		Labels: map[string]string{bpav1.ClusterNameLabel: "c1"}}, Data: map[string][]byte{"ssh-privatekey": []byte("k"), "known_hosts": []byte("h")}}))
	stop, stopped := startController(ctx, t, r, controller.Options{ArgoPollInterval: time.Hour})
	defer func() { stop(); require.NoError(t, <-stopped) }()
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{bpav1.ClusterLabel: "c1"}},
		Spec: bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}}}
	require.NoError(t, c.Create(ctx, p))
	var wf wfv1.Workflow
	eventually(t, "the run's Workflow", func() bool {
		l := &wfv1.WorkflowList{}
		require.NoError(t, c.List(ctx, l, client.InNamespace(ns)))
		if len(l.Items) == 1 {
			wf = l.Items[0]
		}
		return len(l.Items) == 1
	})
	phase := func(want bpav1.RunPhase) func() bool {
		return func() bool {
			got := &bpav1.Provisioning{}
			return c.Get(ctx, client.ObjectKeyFromObject(p), got) == nil && got.Status.Phase == want
		}
	}
	playArgo(ctx, t, c, &wf, wfv1.WorkflowRunning, map[string]wfv1.NodePhase{"discover-hosts": wfv1.NodeSucceeded})
	eventually(t, "Running mirrored", phase(bpav1.PhaseRunning))

	for _, fault := range []struct {
		name          string
		kill          func() error
		restart       func() error
		phase         wfv1.WorkflowPhase
		mirrored      bpav1.RunPhase
		stepSucceeded string
	}{
		{"kube-apiserver", r.KillAPIServer, func() error { return r.RestartAPIServer(ctx) }, wfv1.WorkflowRunning, bpav1.PhaseRunning, "render-inventory"},
		{"etcd", r.KillEtcd, func() error { return r.RestartEtcd(ctx) }, wfv1.WorkflowFailed, bpav1.PhaseFailed, "run-kubespray"},
	} {
		require.NoError(t, fault.kill(), fault.name)
		time.Sleep(time.Second)
		require.NoError(t, fault.restart(), fault.name)
		playArgo(ctx, t, c, &wf, fault.phase, map[string]wfv1.NodePhase{"discover-hosts": wfv1.NodeSucceeded, fault.stepSucceeded: wfv1.NodeSucceeded})
		eventually(t, string(fault.mirrored)+" mirrored after a restart of "+fault.name, func() bool {
			got := &bpav1.Provisioning{}
			if c.Get(ctx, client.ObjectKeyFromObject(p), got) != nil {
				return false
			}
			for _, s := range got.Status.Steps {
				if s.Name == fault.stepSucceeded && s.Phase == string(wfv1.NodeSucceeded) {
					return got.Status.Phase == fault.mirrored
				}
			}
			return false
		})
	}
}
