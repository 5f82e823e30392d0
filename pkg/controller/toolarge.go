package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Words of the refusals an object too large to store meets, as the apiserver passes them on:
// etcd's own (the request exceeds its --max-request-bytes; a 500 whose message is etcd's)
// and that of the apiserver's etcd client (a gRPC message over its send limit). The
// apiserver's request body limit is a 413 of its own reason (RequestEntityTooLarge).
const (
	etcdTooLarge = "etcdserver: request is too large"
	grpcTooLarge = "trying to send message larger than max"
)

// sizeLimit says which limit refused an object when err is a refusal for its size: the
// apiserver's words, with what the limit is when they do not say it. "" for any other error.
func sizeLimit(err error) string {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) {
		return ""
	}
	msg := status.Status().Message
	switch {
	case apierrors.IsRequestEntityTooLargeError(err):
		return "the apiserver's request body limit (" + msg + ")"
	case strings.Contains(msg, etcdTooLarge):
		return "etcd's limit on one request (" + msg + "; etcd's --max-request-bytes, 1.5 MiB unless the site's admin changed it)"
	case strings.Contains(msg, grpcTooLarge):
		return "the apiserver's limit on a message to etcd (" + msg + ")"
	}
	return ""
}

// refuseTooLarge marks obj Stalled because the apiserver refused wf, the Workflow of the run
// (generation gen, rerun request rerun, revision revision) for its size, limit being
// sizeLimit's answer, and records that run as handled: the same inputs plan the same
// Workflow, so planning it again on every retry would only cost the shared reconcile workers
// the plan and the apiserver the same refusal (sizeRefused).
func (r *runReconciler) refuseTooLarge(obj runObject, wf *wfv1.Workflow, limit, rerun, revision string) {
	st, gen := obj.GetRunStatus(), obj.GetGeneration()
	size := "of unknown size"
	if data, err := json.Marshal(wf); err == nil {
		size = fmt.Sprintf("%d bytes (%.1f KiB) as JSON", len(data), float64(len(data))/1024)
	}
	msg := fmt.Sprintf("Workflow %s for generation %d is %s, more than %s allows, so the run cannot start; a run's Workflow names every node it adds or removes: change fewer nodes in one generation (scale a pool in steps). It is not planned again until the spec changes or the %s annotation gets a new value",
		wf.Name, gen, size, limit, bpav1.RerunAnnotation)
	st.LastHandledRerun = rerun
	if r.kind.setRevision != nil {
		r.kind.setRevision(obj, revision)
	}
	setStalled(st, gen, bpav1.ReasonWorkflowTooLarge, msg)
	r.Recorder.Event(obj, corev1.EventTypeWarning, bpav1.ReasonWorkflowTooLarge, msg)
}

// sizeRefused says whether the run obj would start now is the one refuseTooLarge recorded:
// the same generation (the Stalled condition's), rerun request and revision.
func (r *runReconciler) sizeRefused(obj runObject, rerun, revision string) bool {
	st := obj.GetRunStatus()
	c := meta.FindStatusCondition(st.Conditions, bpav1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != bpav1.ReasonWorkflowTooLarge || c.ObservedGeneration != obj.GetGeneration() || st.LastHandledRerun != rerun {
		return false
	}
	return r.kind.handledRevision == nil || r.kind.handledRevision(obj) == revision
}
