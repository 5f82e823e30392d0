// Package controller holds BPA's reconcilers: Provisioning and Software create Workflows
// from the translator and mirror them into their status; Cluster aggregates the two.
package controller

import (
	"context"
	"fmt"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Options configure the controller manager.
type Options struct {
	// Namespaces to watch; empty means all.
	Namespaces []string
	// MetricsAddr and ProbeAddr are listen addresses; "0" disables the server.
	MetricsAddr string
	ProbeAddr   string
	// LeaderElection makes replicas elect one active controller.
	LeaderElection          bool
	LeaderElectionNamespace string
	// ApplyTemplates makes the controller server-side apply the WorkflowTemplates into each
	// watched namespace at start.
	ApplyTemplates bool
	// StepImage replaces the bpa image in the WorkflowTemplates.
	StepImage string
	// Translator options (service account of the step pods).
	Translator translator.Options
}

// Scheme knows every kind the controller reads or writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, bpav1.AddToScheme, wfv1.AddToScheme, metal3v1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// trimWorkflow keeps the informer cache small: status mirroring needs nodes, not the copies
// of every template Argo stores in each Workflow, nor managed fields.
func trimWorkflow(obj any) (any, error) {
	if wf, ok := obj.(*wfv1.Workflow); ok {
		wf.ManagedFields = nil
		wf.Status.StoredTemplates = nil
		wf.Status.StoredWorkflowSpec = nil
		wf.Spec.Templates = nil
	}
	return obj, nil
}

// NewManager builds the manager with BPA's reconcilers registered.
func NewManager(cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	defaultNamespaces := map[string]cache.Config{}
	for _, ns := range opts.Namespaces {
		defaultNamespaces[ns] = cache.Config{}
	}
	hasCluster, err := labels.NewRequirement(bpav1.ClusterNameLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	leNamespace := opts.LeaderElectionNamespace
	if leNamespace == "" && len(opts.Namespaces) > 0 {
		leNamespace = opts.Namespaces[0]
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  Scheme(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.ProbeAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "bpa-controller.bpa.akraino.org",
		LeaderElectionNamespace: leNamespace,
		Cache: cache.Options{
			DefaultNamespaces: defaultNamespaces,
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&wfv1.Workflow{}: {Transform: trimWorkflow},
				// Only the address ConfigMaps BPA publishes, not every ConfigMap.
				&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*hasCluster)},
			},
		},
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, err
	}
	if err := SetupProvisioning(mgr, opts.Translator); err != nil {
		return nil, fmt.Errorf("provisioning controller: %w", err)
	}
	if err := SetupSoftware(mgr, opts.Translator); err != nil {
		return nil, fmt.Errorf("software controller: %w", err)
	}
	if err := SetupCluster(mgr); err != nil {
		return nil, fmt.Errorf("cluster controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	if opts.ApplyTemplates {
		if err := mgr.Add(&templateApplier{client: mgr.GetClient(), namespaces: opts.Namespaces, image: opts.StepImage}); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

// Run builds the manager and runs it until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	mgr, err := NewManager(cfg, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
