// Package controller holds BPA's reconcilers: Provisioning and Software create Workflows
// from the translator and mirror them into their status; Cluster aggregates the two.
package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Options configure the controller manager.
type Options struct {
	// Namespaces to watch; empty means all.
	Namespaces []string
	// MetricsAddr and ProbeAddr are listen addresses; "0" disables the server.
	MetricsAddr string
	ProbeAddr   string
	// MetricsInsecure serves metrics over plain HTTP to anyone who reaches the port, as
	// controller-runtime does by default. BPA's default is HTTPS, and only for a bearer token
	// the apiserver accepts (TokenReview) that may get the nonResourceURL /metrics
	// (SubjectAccessReview): the bpa-metrics-reader ClusterRole.
	MetricsInsecure bool
	// LeaderElection makes replicas elect one active controller.
	LeaderElection          bool
	LeaderElectionNamespace string
	// ApplyTemplates makes the controller server-side apply the WorkflowTemplates into each
	// watched namespace at start.
	ApplyTemplates bool
	// StepImage replaces the bpa image in the WorkflowTemplates.
	StepImage string
	// MaxConcurrentReconciles is how many CRs of each kind reconcile at once; 0 means
	// controller-runtime's default of one, which makes 500 new CRs wait in one line.
	MaxConcurrentReconciles int
	// SkipNameValidation lets one process build more than one manager (tests, benchmarks);
	// controller-runtime otherwise refuses a second controller of the same name.
	SkipNameValidation bool
	// Translator options (service account of the step pods).
	Translator translator.Options
	// ArgoPollInterval is how often the controller looks for Argo Workflows being installed
	// or uninstalled under it (see argo.go); 0 means 30 s.
	ArgoPollInterval time.Duration
}

// trimWorkflow keeps the informer cache small: status mirroring needs a few nodes and a few
// of their fields, not the copies of every template Argo stores in each Workflow, nor
// managed fields, nor every retry attempt's pod. Compressed nodes are unpacked here, once
// per Workflow update, rather than on every reconcile, and trimmed like the others.
func trimWorkflow(obj any) (any, error) {
	if wf, ok := obj.(*wfv1.Workflow); ok {
		wf.ManagedFields = nil
		wf.Status.StoredTemplates = nil
		wf.Status.StoredWorkflowSpec = nil
		wf.Spec.Templates = nil
		if wf.Status.CompressedNodes != "" {
			// On failure the packed nodes stay, and observe.Workflow reports the error.
			_ = packer.DecompressWorkflow(wf)
		}
		wf.Status.Nodes = observedNodes(wf.Status.Nodes)
	}
	return obj, nil
}

// observedNodes keeps what observe.Workflow reads: the nodes named after a step, every
// child of install-software (its per-host results), and the failed children of a failed
// kept node (their messages say what failed), each with only the fields those read.
func observedNodes(nodes wfv1.Nodes) wfv1.Nodes {
	out := make(wfv1.Nodes, len(observedSteps))
	var keep func(id string, allChildren bool)
	keep = func(id string, allChildren bool) {
		n, ok := nodes[id]
		if _, done := out[id]; !ok || done {
			return
		}
		out[id] = wfv1.NodeStatus{
			ID: n.ID, DisplayName: n.DisplayName, Type: n.Type, Phase: n.Phase, Message: n.Message,
			StartedAt: n.StartedAt, FinishedAt: n.FinishedAt, Children: n.Children,
			Inputs: n.Inputs, Outputs: n.Outputs,
		}
		failed := n.Phase == wfv1.NodeFailed || n.Phase == wfv1.NodeError
		for _, c := range n.Children {
			if cn := nodes[c]; allChildren || (failed && (cn.Phase == wfv1.NodeFailed || cn.Phase == wfv1.NodeError)) {
				keep(c, false)
			}
		}
	}
	for id, n := range nodes {
		if step := observe.StepName(n.DisplayName); observedSteps[step] || observedSteps[translator.StepBase(step)] {
			keep(id, step == "install-software")
		}
	}
	return out
}

// workflowListPage is how many Workflows one list request of the Workflow informer asks
// for. A Workflow with a long run's nodes is tens of KiB (55 KiB in test/bench), so the
// apiserver's usual single answer for 1,000 of them is a 55 MB body that decodes into
// several times that before a transform can trim anything.
const workflowListPage = 50

// newInformer builds the cache's informers, as controller-runtime would, except that the
// Workflow informer lists in pages and trims each page as it arrives: the initial list
// (and any relist) then never holds more than one page of whole Workflows, which keeps the
// controller's peak memory near its steady state instead of several times it.
func newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*wfv1.Workflow); ok {
		lw = pagedTrimmingListWatch(toolscache.ToListerWatcherWithContext(lw), workflowListPage)
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

func pagedTrimmingListWatch(lw toolscache.ListerWatcherWithContext, pageSize int64) *toolscache.ListWatch {
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.Limit = pageSize
			// Always "", a consistent list of the newest state, paginated. The watch cache
			// answers "0" in one piece whatever the limit. And a relist asks for the last
			// resourceVersion the informer saw: with a limit, the apiserver reads exactly
			// that revision from etcd, the state of then, and the watch from it, which a
			// restarted apiserver's fresh watch cache no longer holds, fails as too old;
			// the informer relisted the same old state until etcd compacted it (minutes):
			// it saw no Workflow change meanwhile (found by the chaos soak, a kill -9 of
			// the apiserver). The newest state is never older than what it asks for.
			opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
			var all *wfv1.WorkflowList
			for {
				obj, err := lw.ListWithContext(ctx, opts)
				if err != nil {
					return nil, err
				}
				page, ok := obj.(*wfv1.WorkflowList)
				if !ok {
					return obj, nil
				}
				for i := range page.Items {
					_, _ = trimWorkflow(&page.Items[i])
				}
				// Every page is the snapshot of the first one: its resourceVersion is the list's.
				if all == nil {
					all = page
				} else {
					all.Items = append(all.Items, page.Items...)
				}
				if page.Continue == "" {
					all.Continue, all.RemainingItemCount = "", nil
					return all, nil
				}
				opts.Continue, opts.ResourceVersion = page.Continue, ""
			}
		},
		WatchFuncWithContext: lw.WatchWithContext,
	}
}

// observedSteps are the step names of every kind the controller mirrors, and the plan task
// of an ad-hoc run (observe.AdHocPlan).
var observedSteps = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range slices.Concat(translator.ProvisioningSteps, translator.PlanSteps, translator.SoftwareSteps, translator.RequestSteps, translator.DriftSteps, translator.RestartSteps, translator.RebootSteps, []string{translator.AdHocPlanTask}) {
		m[s] = true
	}
	return m
}()

// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions serve the metrics the kubebuilder-v4 way: HTTPS (a self-signed certificate
// unless one is given), and the apiserver's delegated authentication and authorization.
func metricsOptions(opts Options) metricsserver.Options {
	if opts.MetricsInsecure {
		return metricsserver.Options{BindAddress: opts.MetricsAddr}
	}
	return metricsserver.Options{BindAddress: opts.MetricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
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
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	argo, err := workflowsServed(disc)
	if err != nil {
		return nil, fmt.Errorf("looking for Argo Workflows: %w", err)
	}
	byObject := map[client.Object]cache.ByObject{
		// Only the address ConfigMaps BPA publishes, not every ConfigMap.
		&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*hasCluster)},
	}
	if argo { // see argo.go
		byObject[&wfv1.Workflow{}] = cache.ByObject{Transform: trimWorkflow}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme.New(),
		Metrics:                 metricsOptions(opts),
		HealthProbeBindAddress:  opts.ProbeAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "bpa-controller.bpa.akraino.org",
		LeaderElectionNamespace: leNamespace,
		Controller: config.Controller{
			MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
			SkipNameValidation:      &opts.SkipNameValidation,
		},
		Cache: cache.Options{
			NewInformer:       newInformer,
			DefaultNamespaces: defaultNamespaces,
			DefaultTransform:  cache.TransformStripManagedFields(),
			ByObject:          byObject,
		},
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, err
	}
	every := opts.ArgoPollInterval
	if every == 0 {
		every = defaultArgoPollInterval
	}
	if !argo {
		ctrl.Log.Info("Argo Workflows is not installed (the Workflow kind argoproj.io/v1alpha1 is not served): starting without Workflow watches; runs wait with ArgoUnavailable, and the controller restarts once Argo is served", "pollInterval", every)
	}
	served := func() (bool, error) { return workflowsServed(disc) }
	if err := mgr.Add(&argoWatch{served: served, wasServed: argo, every: every}); err != nil {
		return nil, err
	}
	if err := setupIndexes(context.Background(), mgr, argo); err != nil {
		return nil, fmt.Errorf("cache indexes: %w", err)
	}
	if err := SetupProvisioning(mgr, opts.Translator, argo); err != nil {
		return nil, fmt.Errorf("provisioning controller: %w", err)
	}
	if argo {
		if err := SetupBackupSchedule(mgr, opts.Translator); err != nil {
			return nil, fmt.Errorf("etcd backup schedule: %w", err)
		}
		if err := SetupRequests(mgr, opts.Translator); err != nil {
			return nil, fmt.Errorf("requested operations: %w", err)
		}
		if err := SetupDriftCheck(mgr, opts.Translator); err != nil {
			return nil, fmt.Errorf("drift check: %w", err)
		}
		if err := SetupRemediation(mgr, opts.Translator, NodeReaderSource(mgr.GetAPIReader())); err != nil {
			return nil, fmt.Errorf("remediation: %w", err)
		}
	}
	if err := SetupSoftware(mgr, opts.Translator, argo); err != nil {
		return nil, fmt.Errorf("software controller: %w", err)
	}
	if err := SetupCluster(mgr); err != nil {
		return nil, fmt.Errorf("cluster controller: %w", err)
	}
	if err := registerStatusMetrics(mgr); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	if opts.ApplyTemplates && argo { // without Argo, the restart once it is served applies them
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
