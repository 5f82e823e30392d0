package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// Clusters that do not answer (each read waits out nodeReaderTimeout) do not hold another
// tenant's remediation: on a real kube-apiserver, with the manager's default of one
// reconcile at a time, two hung clusters are read and a third cluster's reconcile still
// comes within seconds, not after their timeouts.
func TestRemediationHungClustersHoldNoOther(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := rig.ForTest(t, rig.Options{MinimalArgoCRDs: true})
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	mgr, err := ctrl.NewManager(r.RESTConfig, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(t, err)
	hung := make(chan string, 4)
	nodes := func(ctx context.Context, p *bpav1.Provisioning) ([]corev1.Node, error) {
		if strings.HasPrefix(p.Name, "hung") {
			hung <- p.Name
			select { // a cluster that takes all of nodeReaderTimeout
			case <-ctx.Done():
			case <-time.After(nodeReaderTimeout):
			}
			return nil, errors.New("timed out")
		}
		return nil, errors.New("answered")
	}
	require.NoError(t, SetupRemediation(mgr, translator.Options{}, nodes))
	go func() { _ = mgr.Start(ctx) }()

	c := mgr.GetClient()
	create := func(name string) {
		p := newProvisioning()
		p.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: r.Namespace, Labels: map[string]string{"cluster": name}}
		p.Spec.Workers = []bpav1.NodeEntry{{"w1": nil}}
		p.Spec.Remediation = &bpav1.Remediation{}
		require.NoError(t, c.Create(ctx, p))
		p.Status.Applied = &bpav1.AppliedState{Hosts: remediatedHosts, Generation: p.Generation}
		p.Status.Phase, p.Status.ObservedGeneration = bpav1.PhaseSucceeded, p.Generation
		require.NoError(t, c.Status().Update(ctx, p))
	}
	create("hung-a")
	create("hung-b")
	<-hung // one hung read under way
	start := time.Now()
	create("fast")
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, nodeReaderTimeout/2, true, func(ctx context.Context) (bool, error) {
		p := &bpav1.Provisioning{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: "fast"}, p); err != nil {
			return false, nil
		}
		return meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionRemediating) != nil, nil
	}), "the fast cluster waited behind the hung ones")
	t.Logf("the fast cluster reconciled %s after it was made", time.Since(start).Round(time.Millisecond))
}
