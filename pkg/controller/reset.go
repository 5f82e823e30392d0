package controller

import (
	"context"
	"fmt"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// A Provisioning deleted with deletionPolicy Reset waits for kubespray's reset.yml on its
// hosts before they are released. Every state it waits in is the condition
// bpav1.ConditionDeleting with one of its reasons (bpav1.ReasonReset*, ArgoUnavailable, or
// a refusal's), mirrored into Ready and into Reconciling (the reset runs) or Stalled (it
// needs a person), and an event when it changes.

// SkipResetValue is the value of the bpa.akraino.org/skip-reset annotation that lets the
// deletion go on without the reset (or without waiting for the one running).
const SkipResetValue = "true"

// skipHint says how to stop waiting.
var skipHint = fmt.Sprintf("or set the annotation %s=%s to release the hosts without resetting them", bpav1.SkipResetAnnotation, SkipResetValue)

// resetBeforeRelease carries out spec.deletionPolicy Reset. It says whether the deletion
// may go on: no reset asked for, nothing to reset, the reset succeeded, or it is skipped.
// While not, the CR's status says why, and res asks to look again where no event would.
func (r *runReconciler) resetBeforeRelease(ctx context.Context, obj runObject, res *ctrl.Result) (bool, error) {
	p := obj.(*bpav1.Provisioning)
	hosts := translator.ResetHosts(p)
	if p.Spec.DeletionPolicy != bpav1.DeletionReset || len(hosts) == 0 || resetDone(p) {
		return true, nil // Retain, or nothing ever ran on a host
	}
	if v := p.Annotations[bpav1.SkipResetAnnotation]; v == SkipResetValue {
		r.Recorder.Eventf(p, corev1.EventTypeWarning, bpav1.EventResetSkipped, "%s=%s: releasing %s without resetting them", bpav1.SkipResetAnnotation, v, translator.ResetSummary(hosts))
		return true, nil
	}
	before := p.DeepCopy()
	reason, msg, err := r.reset(ctx, p, res)
	if reason == "" {
		return err == nil, err // done, as a write the cache had not shown yet says; or an error
	}
	stalled := reason != bpav1.ReasonResetRunning && reason != bpav1.ReasonResetSucceeded
	if v := p.Annotations[bpav1.SkipResetAnnotation]; stalled && v != "" {
		msg += fmt.Sprintf(" (%s is %q: only %q skips the reset)", bpav1.SkipResetAnnotation, v, SkipResetValue)
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionDeleting, metav1.ConditionTrue, reason, msg)
	if stalled {
		setStalled(&p.Status.RunStatus, p.Generation, reason, msg)
	} else {
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionReady, metav1.ConditionFalse, reason, msg)
		setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&p.Status.Conditions, bpav1.ConditionStalled)
		p.Status.Message = msg
	}
	if perr := r.reportDeleting(ctx, before, p); perr != nil {
		return false, perr
	}
	return reason == bpav1.ReasonResetSucceeded, err
}

func resetDone(p *bpav1.Provisioning) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionDeleting)
	return c != nil && c.Reason == bpav1.ReasonResetSucceeded
}

// reset finds or starts the reset Workflow and says how it is doing, as the Deleting
// condition's reason and message. An error with a reason is reported and retried; no
// reason and no error means the status already records the reset as done.
func (r *runReconciler) reset(ctx context.Context, p *bpav1.Provisioning, res *ctrl.Result) (reason, msg string, _ error) {
	hosts := translator.ResetSummary(translator.ResetHosts(p))
	argoUnavailable := func() (string, string, error) {
		res.RequeueAfter = refusalRetry // no event says when Argo is back
		return bpav1.ReasonArgoUnavailable, fmt.Sprintf("deletionPolicy is Reset, but Argo Workflows is not installed (the Workflow kind is not served), so reset.yml cannot run on %s; install Argo again to let the reset run, %s", hosts, skipHint), nil
	}
	list := &wfv1.WorkflowList{}
	err := r.Reader.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.ProvisioningNameLabel: p.Name})
	if argoGone(err) {
		return argoUnavailable()
	}
	if err != nil {
		return "", "", err
	}
	// Every other run of the CR stops first, so none of its kubespray runs races the reset
	// on the same hosts (the reset also waits for the cluster's mutex).
	var current *wfv1.Workflow
	var others []wfv1.Workflow
	for i := range list.Items {
		wf := &list.Items[i]
		if wf.Labels[translator.ResetLabel] != "true" || !ownedBy(wf, p) {
			others = append(others, *wf)
		} else if current == nil || current.CreationTimestamp.Before(&wf.CreationTimestamp) {
			current = wf
		}
	}
	if err := r.deleteEach(ctx, others); err != nil {
		return "", "", err
	}
	if current == nil {
		// The reset may have succeeded and its Workflow been deleted since, in a reconcile
		// whose status write the cache has not shown yet: ask the apiserver.
		fresh := &bpav1.Provisioning{}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			return "", "", err
		}
		if resetDone(fresh) {
			return "", "", nil
		}
		if current, reason, msg, err = r.startReset(ctx, p, hosts, res); current == nil {
			if argoGone(err) {
				return argoUnavailable()
			}
			return reason, msg, err
		}
	}
	switch current.Status.Phase {
	case wfv1.WorkflowSucceeded:
		return bpav1.ReasonResetSucceeded, fmt.Sprintf("Workflow %s reset %s; releasing them", current.Name, hosts), nil
	case wfv1.WorkflowFailed, wfv1.WorkflowError:
		msg := fmt.Sprintf("Workflow %s, which runs reset.yml on %s, %s", current.Name, hosts, current.Status.Phase)
		if current.Status.Message != "" {
			msg += ": " + current.Status.Message
		}
		return bpav1.ReasonResetFailed, msg + fmt.Sprintf("; fix the cause and `argo retry %s` (or delete it to start a new reset), %s", current.Name, skipHint), nil
	}
	return bpav1.ReasonResetRunning, fmt.Sprintf("Workflow %s runs reset.yml on %s; the hosts are released when it succeeds", current.Name, hosts), nil
}

// startReset creates the reset Workflow once the checks every run passes allow it, or
// finds the one a lost status write or a stale list hid (the name is the generation's).
func (r *runReconciler) startReset(ctx context.Context, p *bpav1.Provisioning, hosts string, res *ctrl.Result) (_ *wfv1.Workflow, reason, msg string, _ error) {
	wf, err := translator.Reset(p, r.Options)
	if err != nil {
		return nil, bpav1.ReasonResetNotStarted, fmt.Sprintf("the reset Workflow cannot be built: %v; fix the spec, %s", err, skipHint), nil
	}
	// As before any run: the site policy may have been tightened since, and the SSH
	// Secret's owner may have withdrawn consent. No siblings: the hosts are this CR's to
	// reset whichever Provisioning holds the cluster's name next.
	pol, err := policy.Get(ctx, r.Client)
	if err != nil {
		return nil, "", "", err
	}
	params, err := translator.ProvisioningParameters(p)
	if err != nil {
		return nil, "", "", err
	}
	refusal, err := policy.AdmitProvisioning(ctx, pol, r.Reader, p, params["cluster"], params["ssh-secret"], nil)
	if err != nil {
		return nil, "", "", err
	}
	if refusal != nil {
		if refusal.Retry {
			res.RequeueAfter = refusalRetry
		}
		return nil, refusal.Reason, fmt.Sprintf("the reset of %s cannot start: %s; fix that, %s", hosts, refusal.Message, skipHint), nil
	}
	err = r.Create(ctx, wf)
	if err == nil {
		runsStarted.WithLabelValues("Reset").Inc()
		return wf, "", "", nil
	}
	if apierrors.IsAlreadyExists(err) {
		existing := &wfv1.Workflow{}
		if err = r.Reader.Get(ctx, client.ObjectKeyFromObject(wf), existing); err == nil && ownedBy(existing, p) {
			return existing, "", "", nil
		}
		if err == nil {
			err = fmt.Errorf("Workflow %s exists and is not this Provisioning's reset", wf.Name)
		}
	}
	return nil, bpav1.ReasonResetNotStarted, fmt.Sprintf("creating the reset Workflow %s: %v; %s", wf.Name, err, skipHint), err
}

// ownedBy says whether wf is a Workflow p made: controlled by p, or with no owner at all,
// as translator.Reset makes it when p is deleted in the foreground. An owner reference
// proves no more than the labels do (whoever may create Workflows here may write either);
// it keeps another CR's Workflows from counting.
func ownedBy(wf *wfv1.Workflow, p *bpav1.Provisioning) bool {
	return metav1.IsControlledBy(wf, p) || len(wf.OwnerReferences) == 0
}

// argoGone says whether err means the Workflow kind is not served: no mapping for it, or,
// when Argo's CRD is deleted while the controller runs, a 404 for the resource its cached
// mapping names (a list never answers NotFound otherwise).
func argoGone(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}

// reportDeleting writes the waiting state, and an event when it changed.
func (r *runReconciler) reportDeleting(ctx context.Context, before, after *bpav1.Provisioning) error {
	if err := r.writeStatus(ctx, before, after); err != nil {
		return err
	}
	was := meta.FindStatusCondition(before.Status.Conditions, bpav1.ConditionDeleting)
	now := meta.FindStatusCondition(after.Status.Conditions, bpav1.ConditionDeleting)
	if was != nil && was.Reason == now.Reason && was.Message == now.Message {
		return nil
	}
	eventType := corev1.EventTypeNormal
	if meta.IsStatusConditionTrue(after.Status.Conditions, bpav1.ConditionStalled) {
		eventType = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(after, eventType, now.Reason, "%s", now.Message)
	return nil
}
