package integration

import (
	"context"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/controller"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// controllerOnRig runs the controller (opts, watching the rig's namespace) on a real
// kube-apiserver with BPA's and metal3's CRDs. stopped receives what the manager's Start
// returned once stop was called or it stopped by itself.
func controllerOnRig(t *testing.T, ro rig.Options, opts controller.Options) (ctx context.Context, r *rig.Rig, c client.Client, stop func(), stopped <-chan error) {
	ctx, r, c = crdsOnRig(t, ro)
	stop, stopped = startController(ctx, t, r, opts)
	return ctx, r, c, stop, stopped
}

// crdsOnRig starts a rig (ro) with BPA's and metal3's CRDs, for a controller started later.
func crdsOnRig(t *testing.T, ro rig.Options) (ctx context.Context, r *rig.Rig, c client.Client) {
	r = rig.ForTest(t, ro)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallBareMetalHostCRD(ctx, r.RESTConfig))
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	ctrl.SetLogger(zap.New(zap.WriteTo(testWriter{t})))
	return ctx, r, c
}

// startController starts a controller (opts, watching the rig's namespace) on r, as its
// Deployment starts one (again).
func startController(ctx context.Context, t *testing.T, r *rig.Rig, opts controller.Options) (stop func(), stopped <-chan error) {
	return startControllerOn(ctx, t, r.RESTConfig, r.Namespace, opts)
}

// startControllerOn is startController with the client configuration cfg, watching ns.
func startControllerOn(ctx context.Context, t *testing.T, cfg *rest.Config, ns string, opts controller.Options) (stop func(), stopped <-chan error) {
	opts.Namespaces, opts.MetricsAddr, opts.ProbeAddr, opts.SkipNameValidation = []string{ns}, "0", "0", true
	mgr, err := controller.NewManager(cfg, opts)
	require.NoError(t, err, "building the controller")
	mctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	return stop, done
}

// getProvisioning reads a Provisioning, nil once it is gone.
func getProvisioning(ctx context.Context, t *testing.T, c client.Client, ns, name string) *bpav1.Provisioning {
	p := &bpav1.Provisioning{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); apierrors.IsNotFound(err) {
		return nil
	} else {
		require.NoError(t, err)
	}
	return p
}

// provisionedOn creates a Provisioning of cluster whose cluster was built on host
// <name>-host, as a finished run leaves it: the host claimed for it, status.applied naming
// the node. The running controller adds its finalizer first.
func provisionedOn(ctx context.Context, t *testing.T, c client.Client, ns, name, cluster string, policy bpav1.DeletionPolicy) {
	p := &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{bpav1.ClusterLabel: cluster}},
		Spec:       bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m1": nil}}, DeletionPolicy: policy},
	}
	require.NoError(t, c.Create(ctx, p))
	eventually(t, "the finalizer", func() bool { return len(getProvisioning(ctx, t, c, ns, name).Finalizers) > 0 })
	h := &metal3v1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-host", Labels: map[string]string{bpav1.HostClaimLabel: cluster}}}
	h.Spec.ConsumerRef = &corev1.ObjectReference{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Namespace: ns, Name: name, UID: p.UID}
	require.NoError(t, c.Create(ctx, h))
	// As the controller records a run that succeeded (it writes the status too: retried).
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p = getProvisioning(ctx, t, c, ns, name)
		p.Status.Applied = &bpav1.AppliedState{Generation: 1, Hosts: []bpav1.HostStatus{
			{Name: "m1", Roles: []string{"master", "worker"}, Etcd: true, IP: "10.0.0.1", BareMetalHost: h.Name}}}
		return c.Status().Update(ctx, p)
	}))
}
