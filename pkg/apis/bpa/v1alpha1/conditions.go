package v1alpha1

// BPA's status vocabulary: every condition type and reason a BPA object carries, and the
// event reasons the controller records, in one place. Tools (kstatus, `kubectl wait`,
// `bpa describe`, alerting rules) match on these strings, so their values never change.

// Condition types. Ready, Reconciling and Stalled are kstatus's (Flux's) trio: Ready says
// whether the object is what its spec asks, Reconciling that a run is under way, Stalled
// that nothing more happens until a person acts. The others add detail to a Provisioning.
const (
	// ConditionReady is True when the last run succeeded (or nothing needed to run), False
	// with the reason of whatever stands in the way.
	ConditionReady = "Ready"
	// ConditionReconciling is True while a run is pending or running; it carries the same
	// reason as Ready.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when BPA will not go on by itself; its message says what to
	// change (the spec, the rerun annotation, a Secret, the site policy) or what to retry.
	ConditionStalled = "Stalled"
	// ConditionEtcdQuorum says which masters run etcd and how many failures they tolerate
	// (kubespray.EtcdMembers: always an odd number, as kubespray requires); False with
	// ReasonEvenEtcdCount when the spec's etcd choice is not one kubespray accepts.
	ConditionEtcdQuorum = "EtcdQuorum"
	// ConditionDeleting (Cluster API's name) is set on a Provisioning deleted with
	// deletionPolicy Reset while it waits for kubespray's reset.yml on its hosts; its reason
	// is one of ReasonReset*, or ReasonArgoUnavailable, mirrored into Ready and into
	// Reconciling (the reset runs) or Stalled (it needs a person).
	ConditionDeleting = "Deleting"
	// ConditionEtcdBackedUp says whether the cluster's newest etcd snapshot is verified and
	// stored (True, ReasonBackupVerified, naming it), or why the last one taken on
	// spec.etcdBackup.schedule failed (False, ReasonEtcdBackupFailed or
	// ReasonNoBackupServer). It does not hold up Ready: the cluster is as the spec asks.
	ConditionEtcdBackedUp = "EtcdBackedUp"
	// ConditionCertificatesExpiring is True when a certificate of status.certificates
	// expires within spec.certificates.expiryWarningDays (or has expired), its message naming
	// the earliest (node, component, date); False when none does. The controller looks
	// again when it would turn True, without a new run. It does not affect Ready.
	ConditionCertificatesExpiring = "CertificatesExpiring"
	// ConditionEtcdRestored says how the last restore the bpa.akraino.org/restore
	// annotation asked for went: True (ReasonEtcdRestored) when etcd serves the snapshot and
	// the control plane runs again; False while it runs (ReasonRestoring) or when it failed
	// or was refused (ReasonEtcdRestoreFailed, ReasonNoBackupServer, ReasonInvalidSpec), the
	// message naming what and what to do. It does not change Ready.
	ConditionEtcdRestored = "EtcdRestored"
	// ConditionCertificatesRenewed says how the last certificate renewal the
	// bpa.akraino.org/renew-certificates annotation asked for went: True
	// (ReasonCertificatesRenewed) when every control-plane node's certificates were renewed
	// and verify passed; False while it runs (ReasonRenewing) or when it failed or was refused
	// (ReasonCertificateRenewalFailed, ReasonInvalidSpec). It does not change Ready.
	ConditionCertificatesRenewed = "CertificatesRenewed"
	// ConditionDrifted says whether the live cluster differs from what BPA applied
	// (status.applied), as the last drift check (spec.driftCheck) found: True
	// (ReasonDriftFound) naming each differing field, False when none differs (ReasonNoDrift),
	// Unknown when the check could not read the cluster (ReasonDriftCheckFailed). It does not
	// change Ready.
	ConditionDrifted = "Drifted"
	// ConditionRemediating says what graded remediation (spec.remediation) does: True while a
	// rung is taken (ReasonRemediating), False when no worker is due (ReasonWorkersHealthy)
	// or when it holds (ReasonRemediationHeld, ReasonRemediationCoolingDown,
	// ReasonRemediationInProgress, ReasonRemediationExhausted), the message saying why. It
	// does not change Ready.
	ConditionRemediating = "Remediating"
)

// Reasons of ConditionRemediating (and its events; each rung also has an event,
// "Remediation" + the rung: RemediationRestart, RemediationReboot, RemediationReplace).
const (
	// ReasonRemediating: a rung is taken now on the node the message names.
	ReasonRemediating = "Remediating"
	// ReasonWorkersHealthy: no worker has been unhealthy for unhealthyFor.
	ReasonWorkersHealthy = "WorkersHealthy"
	// ReasonRemediationHeld: more workers are unhealthy than maxUnhealthy allows; nothing is
	// done (a network or power fault that replacing hosts would make worse).
	ReasonRemediationHeld = "RemediationHeld"
	// ReasonRemediationCoolingDown: a rung was taken within the cooldown.
	ReasonRemediationCoolingDown = "RemediationCoolingDown"
	// ReasonRemediationInProgress: a rung's Workflow still runs.
	ReasonRemediationInProgress = "RemediationInProgress"
	// ReasonRemediationExhausted: a node has no rung left (every rung taken in its episode,
	// or a second Replace within a day); a person must look.
	ReasonRemediationExhausted = "RemediationExhausted"
	// ReasonRemediationNoSpare: a worker is due the Replace rung but no BareMetalHost other
	// than its own matches its entry; nothing is touched, and the message names the entry.
	ReasonRemediationNoSpare = "RemediationNoSpare"
	// ReasonNodesUnread: the application cluster's Nodes could not be read (no node-reader
	// kubeconfig yet, or the API did not answer); nothing is decided.
	ReasonNodesUnread = "NodesUnread"
)

// Reasons of ConditionDrifted (and its event).
const (
	// ReasonNoDrift: the last check found the cluster as BPA applied it.
	ReasonNoDrift = "NoDrift"
	// ReasonDriftFound: the last check found fields that differ; the message names them.
	ReasonDriftFound = "DriftFound"
	// ReasonDriftCheckFailed: the last check's Workflow failed (the cluster's API or its
	// first master could not be reached, say); the message says why.
	ReasonDriftCheckFailed = "DriftCheckFailed"
)

// Reasons of ConditionCertificatesRenewed (and its events).
const (
	// ReasonRenewing: the renewal's Workflow runs.
	ReasonRenewing = "Renewing"
	// ReasonCertificatesRenewed: every control-plane node's certificates were renewed, one
	// node at a time, and verify read them.
	ReasonCertificatesRenewed = "CertificatesRenewed"
	// ReasonCertificateRenewalFailed: renew-certificates stopped; the message names the
	// master and the check that failed, the masters renewed before it and that the others
	// were not touched (or that nothing was, when a check before the first failed).
	ReasonCertificateRenewalFailed = "CertificateRenewalFailed"
)

// Reasons of ConditionEtcdRestored (and its events).
const (
	// ReasonRestoring: the restore's Workflow runs.
	ReasonRestoring = "Restoring"
	// ReasonEtcdRestored: etcd serves the snapshot and verify passed.
	ReasonEtcdRestored = "EtcdRestored"
	// ReasonEtcdRestoreFailed: the restore failed; the message says whether the cluster
	// was left as it was or where the data that was replaced was kept.
	ReasonEtcdRestoreFailed = "EtcdRestoreFailed"
)

// Reasons of ConditionCertificatesExpiring.
const (
	// ReasonCertificateExpiring: a certificate expires within the warning period.
	ReasonCertificateExpiring = "CertificateExpiring"
	// ReasonCertificateExpired: a certificate's notAfter has passed.
	ReasonCertificateExpired = "CertificateExpired"
	// ReasonCertificatesValid: every certificate read outlives the warning period.
	ReasonCertificatesValid = "CertificatesValid"
)

// ReasonBackupVerified is ConditionEtcdBackedUp's True reason.
const ReasonBackupVerified = "BackupVerified"

// Reasons of a run's progress and outcome.
const (
	// ReasonSucceeded: the run's Workflow succeeded (for a Cluster: its Provisioning and
	// Software did). Ready is True.
	ReasonSucceeded = "Succeeded"
	// ReasonProgressing: a run is pending or running, for no more specific reason. The
	// controller mirrors the Workflow's steps into status as they go.
	ReasonProgressing = "Progressing"
	// ReasonUpToDate: the generation needs no operation (the cluster already is what the
	// spec asks, or no host needs an uploaded version); Ready is True without a run.
	ReasonUpToDate = "UpToDate"
	// ReasonWaitingForLock: the Workflow waits for the cluster's Argo mutex, held by another
	// run on the same cluster; it starts when that run ends.
	ReasonWaitingForLock = "WaitingForClusterLock"
	// ReasonWaitingForRun: a new generation waits for this CR's running Workflow to finish
	// rather than running beside it; the controller starts it then.
	ReasonWaitingForRun = "WaitingForRunningWorkflow"
	// ReasonWaitingForProvisioning: a Software waits for its cluster's Provisioning to
	// succeed (no nodes to install on yet); it runs when it does.
	ReasonWaitingForProvisioning = "WaitingForProvisioning"
	// ReasonPackageUploaded is the Reconciling reason of a Software run started because a
	// newer version of a package it tracks (`version: latest`) was uploaded to the artifact
	// server.
	ReasonPackageUploaded = "PackageUploaded"
	// ReasonRunFailed: the Workflow failed; the message names the failing step. Stalled
	// until the spec or the rerun annotation changes, or the Workflow is retried.
	ReasonRunFailed = "RunFailed"
	// ReasonNodeUnreachable: run-kubespray refused to remove (or to pre-flight) a node it
	// cannot reach over SSH and spec.nodeRemoval.allowUngraceful is not set; nothing was
	// run. A step's error message starts with this reason and a colon, which is how the
	// controller recognises it.
	ReasonNodeUnreachable = "NodeUnreachable"
	// ReasonPreflightFailed: the preflight step before an upgrade found the cluster unfit to
	// upgrade (etcd, a Node, disk space, the offline site's artifacts, drift of kubeadm's
	// config); nothing was changed. The message names the check and what to do. Like every
	// failed run it is Stalled until the spec or the rerun annotation changes, or the
	// Workflow is retried: the controller never runs the check again by itself.
	ReasonPreflightFailed = "PreflightFailed"
	// ReasonNodeNotUpgraded: after an upgrade, verify found a node that did not come back
	// Ready at the target Kubernetes version. The upgrade stops there: verify is not retried
	// on that path, and the message names the node and what to do.
	ReasonNodeNotUpgraded = "NodeNotUpgraded"
	// ReasonEtcdBackupFailed: the backup step before a day-2 operation (or a scheduled one)
	// could not take, store or verify an etcd snapshot; the operation did not start and
	// nothing was changed. The message names what failed. Like every failed run it is
	// Stalled until the spec or the rerun annotation changes, or the Workflow is retried.
	ReasonEtcdBackupFailed = "EtcdBackupFailed"
	// ReasonWorkflowDeleted: the run's Workflow was deleted before it finished; the rerun
	// annotation starts a new one.
	ReasonWorkflowDeleted = "WorkflowDeleted"
	// ReasonArgoUnavailable: the Workflow kind is not served (Argo Workflows is not
	// installed), so a run or a reset cannot start or be followed. The controller looks
	// again every ArgoPollInterval.
	ReasonArgoUnavailable = "ArgoUnavailable"
	// ReasonWorkflowTooLarge is the Stalled reason of a run whose Workflow the apiserver
	// refused for its size (its request body limit, or etcd's --max-request-bytes); the
	// message names the size and the limit. The same spec would plan the same Workflow, so
	// it is not planned again until the spec, the rerun annotation (or a Software's cluster
	// nodes) change.
	ReasonWorkflowTooLarge = "WorkflowTooLarge"
	// ReasonNotFound: a Cluster waits for the Provisioning or Software it names to exist.
	ReasonNotFound = "NotFound"
)

// Reasons a run is refused before it starts. The CR is Stalled with the reason and a
// message that names the field; nothing runs and the cluster stays as it is.
const (
	// ReasonInvalidSpec: the spec cannot be translated into a Workflow (or a Workflow of the
	// run's name exists and is not this CR's).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonEvenEtcdCount is ConditionEtcdQuorum's False reason: the masters chosen to run
	// etcd are an even number, which kubespray refuses.
	ReasonEvenEtcdCount = "EvenEtcdCount"
	// ReasonOddEtcdCount is ConditionEtcdQuorum's True reason.
	ReasonOddEtcdCount = "OddEtcdCount"
	// ReasonPolicyViolation: the site's BPAPolicy forbids a value of the spec (an image,
	// a server, an apt source, an offline URL); the message names the field and the rule.
	ReasonPolicyViolation = "PolicyViolation"
	// ReasonSSHSecretRefused: the SSH Secret the run would mount is missing or lacks its
	// owner's consent label (bpa.akraino.org/cluster: <cluster>). The controller looks again after a while,
	// since the Secret may be created or labelled later.
	ReasonSSHSecretRefused = "SSHSecretNotUsable"
	// ReasonClusterHeldByOther: another Provisioning already builds the cluster this one
	// names; one cluster has one Provisioning.
	ReasonClusterHeldByOther = "ClusterHeldByAnotherProvisioning"
	// ReasonLatestUnavailable is the Stalled reason of a Software whose `version: latest`
	// item cannot be resolved: the BPAPolicy names no index for its artifact server, the
	// server has recorded none, or the repository holds no such package. The message names
	// the item; the Software runs when the index or the policy changes.
	ReasonLatestUnavailable = "LatestUnavailable"
	// ReasonNoBackupServer: a day-2 operation needs a verified etcd snapshot
	// (spec.etcdBackup.beforeDay2: Required, the default) but the site policy names no
	// etcd backup server (BPAPolicy spec.etcdBackupServer); nothing runs until the admin
	// names one, or the CR sets beforeDay2: Skip.
	ReasonNoBackupServer = "NoEtcdBackupServer"
)

// Reasons the day-2 planner (translator.PlanChange) refuses a change kubespray cannot make
// to a live cluster. The message says what to do instead.
const (
	// ReasonDowngrade: the spec asks for an older kubespray or Kubernetes than the cluster
	// runs; neither downgrades.
	ReasonDowngrade = "DowngradeRefused"
	// ReasonSkippedMinor: the spec jumps several minors of kubespray or Kubernetes and no
	// chain of the releases pkg/kubespray records bridges them (both upgrade one minor at a
	// time); the message names the missing release.
	ReasonSkippedMinor = "SkippedMinorRefused"
	// ReasonUpgradeWithChanges: an upgrade and a node change in one edit; kubespray upgrades
	// an unchanged node set.
	ReasonUpgradeWithChanges = "UpgradeWithNodeChanges"
	// ReasonEtcdReplacement: etcd members added and removed in one edit; every inventory in
	// between would hold an even number of them.
	ReasonEtcdReplacement = "EtcdMembersAddedAndRemoved"
	// ReasonFirstControlPlane: the edit would remove or displace kubespray's first
	// control-plane node.
	ReasonFirstControlPlane = "FirstControlPlaneNode"
	// ReasonRoleChange: a node would change its control-plane or etcd role in place.
	ReasonRoleChange = "NodeRoleChange"
	// ReasonHostChange: a node would move to another host (MAC) in place.
	ReasonHostChange = "NodeHostChange"
	// ReasonReplaceRefused: status.applied.replacements names a node graded remediation may
	// not replace (a control-plane or etcd node, or one not in the cluster).
	ReasonReplaceRefused = "ReplaceRefused"
	// ReasonImmutableSetting: a day-2 change of a setting kubespray cannot apply to a live
	// cluster (pkg/kubespray's ImmutableSettings); the message names the field.
	ReasonImmutableSetting = "ImmutableSetting"
)

// Reasons of ConditionDeleting, while a Provisioning with deletionPolicy Reset waits for
// its reset before its hosts are released.
const (
	// ReasonResetRunning: the reset Workflow runs reset.yml; the hosts are released when it
	// succeeds.
	ReasonResetRunning = "ResetRunning"
	// ReasonResetFailed: the reset Workflow failed; `argo retry` it, delete it to start a new
	// one, or skip the reset (SkipResetAnnotation).
	ReasonResetFailed = "ResetFailed"
	// ReasonResetNotStarted: the reset Workflow cannot be built or created. A refusal of
	// the site policy or the SSH Secret carries its own reason instead.
	ReasonResetNotStarted = "ResetNotStarted"
	// ReasonResetSucceeded records, before the reset Workflow is deleted with the others,
	// that the reset is done: a reconcile after a crash must not start a second one.
	ReasonResetSucceeded = "ResetSucceeded"
)

// Event reasons that are not condition reasons. A run's phase changes are recorded as
// EventRunPrefix + the phase ("RunSucceeded", "RunFailed", ...); a condition's reason that
// changes is recorded under that reason.
const (
	// EventRunStarted: the controller created the run's Workflow.
	EventRunStarted = "RunStarted"
	// EventRunResumed: a finished Workflow runs again (`argo retry`).
	EventRunResumed = "RunResumed"
	// EventRunPrefix precedes the phase a run reached.
	EventRunPrefix = "Run"
	// EventResetSkipped: the skip-reset annotation released the hosts without a reset.
	EventResetSkipped = "ResetSkipped"
	// EventBackupStarted: the Workflow of a scheduled etcd snapshot was created.
	EventBackupStarted = "EtcdBackupStarted"
	// EventRestoreStarted: the Workflow of a requested etcd restore was created.
	EventRestoreStarted = "EtcdRestoreStarted"
	// EventRenewalStarted: the Workflow of a requested certificate renewal was created.
	EventRenewalStarted = "CertificateRenewalStarted"
	// EventDriftFound: a drift check found the cluster differing from status.applied where
	// the check before it had not (a Warning, once per change of the differing fields).
	EventDriftFound = "DriftFound"
	// EventDriftReconcile: with reconcile: Apply, BPA asked for the runs that put drift back.
	EventDriftReconcile = "DriftReconcile"
	// EventDriftNotPutBack (Warning): the same drift was found after the runs that were to
	// put it back; BPA does not try again.
	EventDriftNotPutBack = "DriftNotPutBack"
	// EventRemediationRestart: graded remediation's Restart rung's Workflow was created.
	// Warnings: ReasonRemediationHeld and ReasonRemediationExhausted, once each time they
	// begin.
	EventRemediationRestart = "RemediationRestart"
	// EventRemediationReboot: the Reboot rung's Workflow was created.
	EventRemediationReboot = "RemediationReboot"
	// EventRemediationReplace: graded remediation's Replace rung was taken (the runs that
	// move the worker to a spare host follow).
	EventRemediationReplace = "RemediationReplace"
)
