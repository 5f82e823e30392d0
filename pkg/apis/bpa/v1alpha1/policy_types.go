package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyName is the one BPAPolicy BPA reads. The ValidatingAdmissionPolicy binding names it
// as its params, and the controller and the ad-hoc lookup step read it by this name.
const PolicyName = "default"

// DefaultKubesprayImage is the only kubespray image repository a site allows until its
// admin says otherwise.
const DefaultKubesprayImage = "quay.io/kubespray/kubespray"

// BPAPolicySpec holds what a site's admin decides and a CR author never does. Everything
// it does not grant is refused, so an empty spec is the safe default: only the kubespray
// image above, BareMetalHosts from the CR's own namespace only, no lease files read from a
// node, and host keys always checked.
//
// +kubebuilder:validation:XValidation:rule="!has(self.etcdBackupServer) || (has(self.artifactServers) && self.artifactServers.exists(s, s.url == self.etcdBackupServer))",message="etcdBackupServer must be the url of one of artifactServers (its caBundle is what the backup step trusts)",fieldPath=".etcdBackupServer"
type BPAPolicySpec struct {
	// KubesprayImages are the image repositories (without tag or digest) a Provisioning may
	// run kubespray from. The kubespray container gets the cluster's SSH key, so an image
	// outside this list could read it. Empty means quay.io/kubespray/kubespray only.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?$`
	KubesprayImages []string `json:"kubesprayImages,omitempty"`

	// Namespaces grant rights beyond the defaults to the CRs of some namespaces.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Namespaces []NamespaceGrant `json:"namespaces,omitempty"`

	// ArtifactServers are the only artifact servers (bpa serve) a Provisioning's
	// spec.offline.url may name: the run-kubespray step and every node fetch from that URL,
	// so a URL of the CR author's choosing would make BPA probe any address it can reach
	// (a blind SSRF). No entry, no offline Provisioning. When a Provisioning's
	// spec.offline.url equals an entry's url, its caBundle is written to each node
	// (ArtifactsCAPath and the OS trust store) before any kubespray playbook that downloads,
	// and containerd's mirrors name it. Only the admin sets a CA: a CR author has no field
	// for one, since a trusted CA can impersonate any server.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=url
	ArtifactServers []ArtifactServer `json:"artifactServers,omitempty"`

	// HostRelease is what BPA does to a BareMetalHost when it releases it (a Provisioning
	// deleted, a node removed). Deprovision, the default, removes the host's image
	// (spec.image, userData, metaData, networkData), so metal3 deprovisions and cleans it:
	// the next consumer never gets the last one's disk. Retain leaves the OS in place, for
	// sites where one tenant reuses its hosts and reimaging costs too much: only
	// Provisionings of the namespace that released a host may claim it again before metal3
	// has deprovisioned it. Power and BMC settings are never touched.
	// +optional
	// +kubebuilder:default=Deprovision
	HostRelease HostReleasePolicy `json:"hostRelease,omitempty"`

	// EtcdBackupServer is the artifact server (`bpa serve`) that stores the clusters' etcd
	// snapshots: one of ArtifactServers' URLs, whose caBundle the backup step checks its
	// certificate with. Each cluster's snapshots are kept under its namespace and name, and
	// the server lets a caller write, read or delete them only with the RBAC right on the
	// etcdbackups resource of BPA's group in that namespace (the backup step's account has
	// it in its own namespace); nothing reads them anonymously. A snapshot holds every
	// Secret of the cluster. Without it, no Provisioning takes backups, and a day-2
	// operation runs only when its CR sets spec.etcdBackup.beforeDay2: Skip.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^https://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`
	EtcdBackupServer string `json:"etcdBackupServer,omitempty"`
}

// HostReleasePolicy is what release does to a host's operating system.
// +kubebuilder:validation:Enum=Deprovision;Retain
type HostReleasePolicy string

const (
	HostReleaseDeprovision HostReleasePolicy = "Deprovision"
	HostReleaseRetain      HostReleasePolicy = "Retain"
)

// ArtifactServer is an artifact server and the CA its certificate chains to.
type ArtifactServer struct {
	// URL is the server's base, exactly as Provisionings write spec.offline.url.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^https://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`
	URL string `json:"url"`

	// CABundle is one or more PEM CERTIFICATE blocks and nothing else (cert-manager's
	// ca.crt, say). BPA parses every certificate and sends the nodes only its own
	// re-encoding of them. Each goes into every node's OS trust store, where every program
	// trusts it, so each must be a CA with X.509 name constraints that permit the server's
	// host and nothing the admin did not choose: permitted DNS subtrees (no top-level
	// domain), and permitted IP ranges or all of 0.0.0.0/0 and ::/0 excluded. Admission
	// checks that every certificate carries name constraints (the rule below finds the
	// extension's object identifier, 2.5.29.30, in each block's base64: CEL cannot parse
	// X.509); `bpa lint --policy`, the controller and the steps check what they permit
	// (nodetrust.CheckScope). At most 16 KiB (a few CAs of the server's own: the rule's
	// CEL cost grows with the length, and 64 KiB did not fit the apiserver's budget).
	// +kubebuilder:validation:MaxLength=16384
	// +kubebuilder:validation:Pattern=`^(\s*-----BEGIN CERTIFICATE-----[\sA-Za-z0-9+/=]+-----END CERTIFICATE-----)+\s*$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([^-]*-----BEGIN CERTIFICATE-----[^-]*(B[^!-~]*g[^!-~]*N[^!-~]*V[^!-~]*H[^!-~]*R[^!-~]*[4-7]|Y[^!-~]*D[^!-~]*V[^!-~]*R[^!-~]*0[^!-~]*e|G[^!-~]*A[^!-~]*1[^!-~]*U[^!-~]*d[^!-~]*H[^!-~]*[g-v])[^-]*-----END CERTIFICATE-----)+[^-]*$')",message="every certificate must carry X.509 name constraints that keep it to the artifact server: each goes into every node's OS trust store, where every program trusts it for every name it vouches for (see docs/security.md; bpa lint --policy checks the names)"
	CABundle string `json:"caBundle"`

	// AptKey is the ASCII-armored OpenPGP public key that signs the server's apt repository
	// (the public half of `bpa serve --apt-signing-key`). A Software with aptSource bpa
	// needs it: nodes check the repository's signatures with it (apt's Signed-By), and BPA
	// never adds a repository they cannot check. Public keys only; BPA parses it and sends
	// the nodes its own re-encoding.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	// +kubebuilder:validation:Pattern=`^\s*-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(\r?\n|[A-Za-z0-9+/=\s]|Version: [ -~]*\r?\n|Comment: [ -~]*\r?\n)*-----END PGP PUBLIC KEY BLOCK-----\s*$`
	AptKey string `json:"aptKey,omitempty"`

	// Index names the ArtifactIndex this server records its apt repository's packages in
	// (`bpa serve --index`). Softwares whose items say `version: latest` follow it: a newer
	// version uploaded starts their runs. Only the index named here is read for this server,
	// so no other object (and no other server) can tell BPA what it holds.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Index string `json:"index,omitempty"`

	// Namespaces are the namespaces whose Provisionings may name this server. Empty means
	// every namespace: listing a server is already the admin's opt-in, and what it holds is
	// read anonymously by every node that uses it, so it is a site-wide resource like
	// kubesprayImages. List namespaces to keep a server (and its CA on their nodes) to some
	// tenants.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`
}

// Where BPA puts an artifact server's apt repository on a node: the key its signatures are
// checked with, and the deb822 source naming it (written last, so it marks a finished setup).
const (
	AptKeyPath    = "/etc/apt/keyrings/bpa-artifacts.asc"
	AptSourcePath = "/etc/apt/sources.list.d/bpa-artifacts.sources"
	// AptPreferencesPath pins the repository: only the packages the Software being installed
	// names may come from it (see nodetrust.AptPreferences).
	AptPreferencesPath = "/etc/apt/preferences.d/bpa-artifacts.pref"
)

// ArtifactsCAPath is where BPA installs an artifact server's CA on every node, whatever its
// OS family; containerd_registries_mirrors[].mirrors[].ca names it.
const ArtifactsCAPath = "/etc/bpa/artifacts-ca.crt"

// NamespaceGrant gives the CRs of some namespaces more than the defaults.
type NamespaceGrant struct {
	// Names are the namespaces this grant applies to.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	Names []string `json:"names"`

	// BareMetalHostNamespaces these namespaces' Provisionings may draw hosts from, besides
	// their own namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	BareMetalHostNamespaces []string `json:"bareMetalHostNamespaces,omitempty"`

	// LeaseHostPaths are the node files a Provisioning may read DHCP leases from
	// (spec.leases.hostPath). A path not listed here is never mounted.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=4096
	LeaseHostPaths []string `json:"leaseHostPaths,omitempty"`

	// AllowInsecureHostKey lets these namespaces' CRs set ssh.insecureIgnoreHostKey, which
	// lets anyone on the path impersonate a host and receive the cluster's credentials.
	// +optional
	AllowInsecureHostKey bool `json:"allowInsecureHostKey,omitempty"`

	// AllowReboot lets these namespaces' Provisionings take graded remediation's Reboot rung:
	// the reboot-node step (account bpa-step-reboot-node) sets metal3's reboot.metal3.io
	// annotation on a worker's BareMetalHost claimed by the Provisioning, and metal3 power
	// cycles it. Steps touch power nowhere else; without this grant the rung is skipped as if
	// spec.remediation.rungs did not list it (docs/remediation.md).
	// +optional
	AllowReboot bool `json:"allowReboot,omitempty"`
}

// BPAPolicy is the site admin's policy for BPA CRs: which kubespray images may run, which
// BareMetalHost namespaces and lease files each namespace may use, and whether host-key
// checking may be turned off. It is cluster-scoped and BPA reads only the one named
// "default"; CR authors should never be granted write access to it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=bpa
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="metadata.name: BPA reads only the BPAPolicy named default"
type BPAPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BPAPolicySpec `json:"spec,omitempty"`
}

// BPAPolicyList is a list of BPAPolicy.
//
// +kubebuilder:object:root=true
type BPAPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BPAPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BPAPolicy{}, &BPAPolicyList{})
}
