package controller

import (
	"context"
	"errors"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Without Argo. The controller's caches index and watch Workflows, and controller-runtime
// gives up on a kind that is not served (a crash loop after CacheSyncTimeout), so a
// controller restarted after Argo was uninstalled would reconcile nothing: a deletion with
// deletionPolicy Reset would wait without the ArgoUnavailable condition that says what to
// do, and a new CR would show nothing at all. So when the Workflow kind is not served at
// start, the controller runs without Workflow watches: deletions proceed (or wait with
// ArgoUnavailable), a CR that needs a run is Stalled with ArgoUnavailable, and the
// controller looks for Argo every ArgoPollInterval. Once Argo is served it stops with
// ErrArgoInstalled, and its Deployment starts it again, this time watching Workflows.
//
// The other way round, a controller that started with Argo looks just as often for Argo
// being gone. Deleting Argo's CRD deletes every Workflow with it. A controller that sees
// those deletions reports each run deleted; one that was down at the time, or whose watch
// ended first, would show a run in flight as Running for ever, and its Workflow informer
// would fail on every relist. So once the Workflow kind is no longer served the controller
// stops with ErrArgoRemoved and starts again without Workflow watches, where a run that its
// CR shows in flight, or shows deleted, is reported gone with Argo, with what to do
// (reconcileRun).

// ErrArgoInstalled ends a controller that started without Argo once the Workflow kind is
// served, so that it restarts with Workflow watches.
var ErrArgoInstalled = errors.New("Argo Workflows is now installed (the Workflow kind is served): restarting to watch Workflows")

// ErrArgoRemoved ends a controller that started with Argo once the Workflow kind is no
// longer served, so that it restarts without Workflow watches and reports the runs that
// were lost with Argo's Workflows.
var ErrArgoRemoved = errors.New("Argo Workflows was uninstalled (the Workflow kind is no longer served): restarting without Workflow watches")

// IsRestart says whether err only asks the controller to start again, now watching what
// is served: ErrArgoInstalled or ErrArgoRemoved.
func IsRestart(err error) bool {
	return errors.Is(err, ErrArgoInstalled) || errors.Is(err, ErrArgoRemoved)
}

// defaultArgoPollInterval is how often the controller looks for Argo being installed or
// uninstalled under it.
const defaultArgoPollInterval = 30 * time.Second

// argoConfirmations is how many looks in a row must see Argo come or go.
const argoConfirmations = 2

// workflowsServed says whether the apiserver serves Argo's Workflow kind.
func workflowsServed(d discovery.DiscoveryInterface) (bool, error) {
	gv := wfv1.SchemeGroupVersion.String()
	list, err := d.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Kind == wfv1.WorkflowSchemaGroupVersionKind.Kind {
			return true, nil
		}
	}
	return false, nil
}

// argoWatch stops the manager when Argo is installed or uninstalled under it: it returns
// ErrArgoInstalled once Workflows are served if they were not at start (wasServed), and
// ErrArgoRemoved once they are not if they were. It believes a change only when
// argoConfirmations looks in a row see it (a restart with runs reported gone is not to be
// set off by one odd answer), and a failed look changes nothing.
type argoWatch struct {
	served    func() (bool, error)
	wasServed bool
	every     time.Duration
}

// NeedLeaderElection is false: every replica must restart, not only the leader.
func (w *argoWatch) NeedLeaderElection() bool { return false }

func (w *argoWatch) Start(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	seen := 0 // looks in a row that saw a change
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			ok, err := w.served()
			if err != nil {
				continue
			}
			if ok == w.wasServed {
				seen = 0
				continue
			}
			if seen++; seen < argoConfirmations {
				continue
			}
			if ok {
				ctrl.Log.Info(ErrArgoInstalled.Error())
				return ErrArgoInstalled
			}
			ctrl.Log.Info(ErrArgoRemoved.Error())
			return ErrArgoRemoved
		}
	}
}
