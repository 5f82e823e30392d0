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

// ErrArgoInstalled ends a controller that started without Argo once the Workflow kind is
// served, so that it restarts with Workflow watches.
var ErrArgoInstalled = errors.New("Argo Workflows is now installed (the Workflow kind is served): restarting to watch Workflows")

// defaultArgoPollInterval is how often a controller started without Argo looks for it.
const defaultArgoPollInterval = 30 * time.Second

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

// argoWatch is the runnable of a controller started without Argo: it returns
// ErrArgoInstalled, which stops the manager, once Workflows are served.
type argoWatch struct {
	disc  discovery.DiscoveryInterface
	every time.Duration
}

// NeedLeaderElection is false: every replica must restart, not only the leader.
func (w *argoWatch) NeedLeaderElection() bool { return false }

func (w *argoWatch) Start(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if ok, err := workflowsServed(w.disc); err == nil && ok {
				ctrl.Log.Info(ErrArgoInstalled.Error())
				return ErrArgoInstalled
			}
		}
	}
}
