package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// ClusterLabel names the cluster a CR belongs to. It is required (enforced by the
	// ValidatingAdmissionPolicy in config/admission) because CRD CEL rules cannot see labels.
	ClusterLabel = "cluster"
	// OwnerLabel is the ICN tenant label; BPA carries it along but gives it no meaning.
	OwnerLabel = "owner"

	// RerunAnnotation asks for a new run of the current generation: any new value starts one.
	RerunAnnotation = "bpa.akraino.org/rerun"

	// DeleteNodesAnnotation names, comma-separated, the pool members a scale-down removes
	// first (Cluster API's delete-machine, on the Provisioning since nodes have no object).
	DeleteNodesAnnotation = "bpa.akraino.org/delete-nodes"
	// SkipResetAnnotation, set to "true", lets a Provisioning with deletionPolicy Reset be
	// deleted without resetting its hosts (when Argo is gone, or the reset keeps failing);
	// it also stops waiting for a reset that runs. Any other value is reported and ignored.
	SkipResetAnnotation = "bpa.akraino.org/skip-reset"

	// Labels BPA puts on the Workflows it creates, and that `argo submit --from` runs carry
	// through the WorkflowTemplates' workflowMetadata, so the controller can find both.
	ProvisioningNameLabel = "bpa.akraino.org/provisioning"
	SoftwareNameLabel     = "bpa.akraino.org/software"
	ClusterNameLabel      = "bpa.akraino.org/cluster"
	// EtcdBackupOfLabel names the Provisioning a scheduled etcd backup Workflow snapshots
	// (spec.etcdBackup.schedule). It is not ProvisioningNameLabel: such a Workflow is not a
	// run of the CR's spec, and the run reconciler never mirrors or replaces it.
	EtcdBackupOfLabel = "bpa.akraino.org/etcd-backup-of"

	// RestoreAnnotation asks BPA to restore the cluster's etcd from one of its verified
	// snapshots on the site's backup server: the value is the snapshot's name (as
	// status.backups lists it), optionally followed by "@" and any token, so that the same
	// snapshot can be restored again. Each new value is one restore; the Workflow that runs
	// it carries RestoreOfLabel.
	RestoreAnnotation = "bpa.akraino.org/restore"
	// RestoreRequestPattern is the shape of RestoreAnnotation's value: a snapshot's name as
	// the backup server accepts them (one path segment), then optionally "@" and a token. A
	// name ending in .json (the server's records) is refused too. config/admission's
	// policy spells the same rules.
	RestoreRequestPattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,252}(@.*)?$`
	// RestoreOfLabel names the Provisioning whose etcd a restore Workflow restores. Like
	// EtcdBackupOfLabel, it is not ProvisioningNameLabel: a restore is not a run of the spec.
	RestoreOfLabel = "bpa.akraino.org/restore-of"
	// RenewCertificatesAnnotation asks BPA to renew the cluster's kubeadm certificates, one
	// control-plane node at a time with the cluster's health checked between them
	// (docs/protecting.md#renewing-certificates): each new value is one renewal; its Workflow
	// carries RenewalOfLabel.
	RenewCertificatesAnnotation = "bpa.akraino.org/renew-certificates"
	// RenewalOfLabel names the Provisioning whose certificates a renewal Workflow renews.
	RenewalOfLabel = "bpa.akraino.org/certificate-renewal-of"
	// DriftCheckOfLabel names the Provisioning a drift check Workflow (spec.driftCheck)
	// reads. Like EtcdBackupOfLabel, it is not ProvisioningNameLabel: a check is no run.
	DriftCheckOfLabel = "bpa.akraino.org/drift-check-of"
	// RemediationOfLabel names the Provisioning a remediation Workflow (spec.remediation)
	// acts for; RemediationNodeLabel the node it acts on. A rung is no run of the spec.
	RemediationOfLabel   = "bpa.akraino.org/remediation-of"
	RemediationNodeLabel = "bpa.akraino.org/remediation-node"

	// TriggerAnnotation on a Workflow says why BPA started it when no CR was edited
	// ("htop 3.2.2-3 uploaded"); the CR's conditions, events and status repeat it.
	TriggerAnnotation = "bpa.akraino.org/trigger"

	// HostClaimLabel shows, on a BareMetalHost, the cluster that claimed it. The claim itself
	// is spec.consumerRef (metal3's own field, which Cluster API's Metal3 provider honours
	// too); the label is for selection and display.
	HostClaimLabel = "bpa.akraino.org/cluster"

	// HostReleasedFromAnnotation and HostReleasedAtAnnotation record, on a BareMetalHost BPA
	// released, the namespace/name of the Provisioning that held it and when (RFC 3339). No
	// other Provisioning claims the host until metal3 has deprovisioned it since then (its
	// status.operationHistory.deprovision started at or after that time and ended), so a
	// tenant's disk never reaches the next one. They sit outside the bpa.akraino.org/ prefix
	// on purpose: the steps' admission policy lets a step write bpa.akraino.org/ annotations
	// of hosts, and a step must not be able to wash a host it is about to claim.
	HostReleasedFromAnnotation = "host.bpa.akraino.org/released-from"
	HostReleasedAtAnnotation   = "host.bpa.akraino.org/released-at"
	// HostUnhealthyAnnotation marks a BareMetalHost that graded remediation replaced
	// because its node stayed dead: BPA sets it when it releases the host, in the same
	// write, and no Provisioning claims the host while it is there, so neither the cluster
	// that left it nor another tenant gets a dead host that may still hold the cluster's
	// data. An admin removes it once the host is repaired (and cleaned). Outside the
	// bpa.akraino.org/ prefix for the same reason as the release marks.
	HostUnhealthyAnnotation = "host.bpa.akraino.org/unhealthy"

	// ManagedByLabel marks the Secrets and ConfigMaps BPA's steps write. The admission
	// policy lets the steps write only objects that carry it, so a step's credentials cannot
	// touch a user's Secrets.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "bpa"
	// Host capability labels a node with sriov/qat requirements looks for.
	SRIOVFeatureLabel = "feature.bpa.akraino.org/sriov"
	QATFeatureLabel   = "feature.bpa.akraino.org/qat"
)

// RunPhase mirrors the phase of the Workflow that is carrying out the CR.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Error
type RunPhase string

const (
	PhasePending   RunPhase = "Pending"
	PhaseRunning   RunPhase = "Running"
	PhaseSucceeded RunPhase = "Succeeded"
	PhaseFailed    RunPhase = "Failed"
	PhaseError     RunPhase = "Error"
)

// SSHConfig says how steps reach the cluster's hosts. The Secret is mounted into the step
// pods that need it; its content never appears in a Workflow parameter.
type SSHConfig struct {
	// SecretName names a Secret (type kubernetes.io/ssh-auth) in the CR's namespace with the
	// private key under `ssh-privatekey` and the hosts' public keys under `known_hosts`.
	// Defaults to `<cluster>-ssh`. The Secret must carry the label
	// `bpa.akraino.org/cluster: <cluster>`: that is its owner's consent to this cluster's
	// runs mounting it. Only its two keys are mounted.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SecretName string `json:"secretName,omitempty"`

	// User is the login user; steps use sudo when it is not root.
	// +optional
	// +kubebuilder:default=root
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_-]{0,31}$`
	User string `json:"user,omitempty"`

	// Port is the hosts' SSH port.
	// +optional
	// +kubebuilder:default=22
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// InsecureIgnoreHostKey skips the known_hosts check. Only for labs: it lets anyone on
	// the path impersonate a host and receive the cluster's admin credentials.
	// +optional
	InsecureIgnoreHostKey bool `json:"insecureIgnoreHostKey,omitempty"`
}

// WorkflowReference identifies the Workflow carrying out the current run.
type WorkflowReference struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid,omitempty"`
}

// StepStatus mirrors one DAG task of the Workflow.
type StepStatus struct {
	Name       string       `json:"name"`
	Phase      string       `json:"phase,omitempty"`
	Message    string       `json:"message,omitempty"`
	StartedAt  *metav1.Time `json:"startedAt,omitempty"`
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// HostStatus is one host BPA chose for the cluster.
type HostStatus struct {
	Name          string   `json:"name"`
	Roles         []string `json:"roles,omitempty"`
	MAC           string   `json:"mac,omitempty"`
	IP            string   `json:"ip,omitempty"`
	BareMetalHost string   `json:"bareMetalHost,omitempty"`
	// Etcd is true for a master that runs an etcd member.
	// +optional
	Etcd bool `json:"etcd,omitempty"`
	// Removing marks a node this run removes: it is in the inventory (kubespray removes
	// nodes that are still in it) but not in the cluster the run leaves.
	// +optional
	Removing bool `json:"removing,omitempty"`
}

// RunStatus is the part of the status every runnable kind shares.
type RunStatus struct {
	// Phase of the current (or last) run.
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the current run was started for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Workflow is the Workflow carrying out the current run.
	// +optional
	Workflow *WorkflowReference `json:"workflow,omitempty"`
	// Progress is Argo's `done/total` count of the run's steps.
	// +optional
	Progress string `json:"progress,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Message explains the phase, e.g. the failing step's error.
	// +optional
	Message string `json:"message,omitempty"`
	// Steps are the Workflow's tasks, in DAG order.
	// +optional
	// +listType=atomic
	Steps []StepStatus `json:"steps,omitempty"`
	// Hosts are the hosts the run chose, with their addresses.
	// +optional
	// +listType=atomic
	Hosts []HostStatus `json:"hosts,omitempty"`
	// LastHandledRerun is the value of the bpa.akraino.org/rerun annotation the current run
	// answers, so one request starts one run.
	// +optional
	LastHandledRerun string `json:"lastHandledRerun,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}
