package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Condition reasons. kstatus reads Ready, Reconciling and Stalled; the reasons say why.
const (
	ReasonSucceeded              = "Succeeded"
	ReasonProgressing            = "Progressing"
	ReasonWaitingForLock         = "WaitingForClusterLock"
	ReasonWaitingForRun          = "WaitingForRunningWorkflow"
	ReasonWaitingForProvisioning = "WaitingForProvisioning"
	ReasonRunFailed              = "RunFailed"
	ReasonInvalidSpec            = "InvalidSpec"
	ReasonWorkflowDeleted        = "WorkflowDeleted"
	ReasonEvenEtcdCount          = "EvenEtcdCount"
	ReasonOddEtcdCount           = "OddEtcdCount"
	ReasonUpToDate               = "UpToDate"
	// ReasonNodeUnreachable: a node to remove cannot be reached and
	// spec.nodeRemoval.allowUngraceful is not set.
	ReasonNodeUnreachable = "NodeUnreachable"

	// ConditionEtcdQuorum says which masters run etcd and how many failures they tolerate
	// (kubespray.EtcdMembers: always an odd number, as kubespray requires); False with the
	// reason when the spec's etcd choice is not one kubespray accepts.
	ConditionEtcdQuorum = "EtcdQuorum"
)

func setCondition(conds *[]metav1.Condition, gen int64, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
}

// setRunConditions derives the kstatus conditions from the run's phase.
func setRunConditions(st *bpav1.RunStatus, gen int64, reason, msg string) {
	c := &st.Conditions
	switch st.Phase {
	case bpav1.PhaseSucceeded:
		setCondition(c, gen, bpav1.ConditionReady, metav1.ConditionTrue, ReasonSucceeded, msg)
		meta.RemoveStatusCondition(c, bpav1.ConditionReconciling)
		meta.RemoveStatusCondition(c, bpav1.ConditionStalled)
	case bpav1.PhaseFailed, bpav1.PhaseError:
		if reason == "" {
			reason = ReasonRunFailed
		}
		setCondition(c, gen, bpav1.ConditionReady, metav1.ConditionFalse, reason, msg)
		stalled := msg + "; change the spec or set the " + bpav1.RerunAnnotation + " annotation to run again, or `argo retry` the Workflow"
		if reason == ReasonWorkflowDeleted || reason == ReasonArgoUnavailable {
			stalled = msg // the Workflow is gone: nothing to retry, and msg says what to do
		}
		setCondition(c, gen, bpav1.ConditionStalled, metav1.ConditionTrue, reason, stalled)
		meta.RemoveStatusCondition(c, bpav1.ConditionReconciling)
	default:
		if reason == "" {
			reason = ReasonProgressing
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
