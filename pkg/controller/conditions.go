package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// setRunConditions derives the kstatus conditions from the run's phase.
func setRunConditions(st *bpav1.RunStatus, gen int64, reason, msg string) {
	c := &st.Conditions
	switch st.Phase {
	case bpav1.PhaseSucceeded:
		setCondition(c, gen, bpav1.ConditionReady, metav1.ConditionTrue, bpav1.ReasonSucceeded, msg)
		meta.RemoveStatusCondition(c, bpav1.ConditionReconciling)
		meta.RemoveStatusCondition(c, bpav1.ConditionStalled)
	case bpav1.PhaseFailed, bpav1.PhaseError:
		if reason == "" {
			reason = bpav1.ReasonRunFailed
		}
		setCondition(c, gen, bpav1.ConditionReady, metav1.ConditionFalse, reason, msg)
		stalled := msg + "; change the spec or set the " + bpav1.RerunAnnotation + " annotation to run again, or `argo retry` the Workflow"
		if reason == bpav1.ReasonWorkflowDeleted || reason == bpav1.ReasonArgoUnavailable {
			stalled = msg // the Workflow is gone: nothing to retry, and msg says what to do
		}
		setCondition(c, gen, bpav1.ConditionStalled, metav1.ConditionTrue, reason, stalled)
		meta.RemoveStatusCondition(c, bpav1.ConditionReconciling)
	default:
		if reason == "" {
			reason = bpav1.ReasonProgressing
		}
		setCondition(c, gen, bpav1.ConditionReady, metav1.ConditionFalse, reason, msg)
		setCondition(c, gen, bpav1.ConditionReconciling, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(c, bpav1.ConditionStalled)
	}
}

func setStalled(st *bpav1.RunStatus, gen int64, reason, msg string) {
	setCondition(&st.Conditions, gen, bpav1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(&st.Conditions, gen, bpav1.ConditionStalled, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(&st.Conditions, bpav1.ConditionReconciling)
	st.Message = msg
}
