package v1alpha1

import (
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Debian policy syntax for package names and versions. A version is [epoch:]upstream[-revision]
// and starts with a digit; neither can start with '-' or hold a space or shell metacharacter.
//
// A name cannot end in '-' or '+' either, although Debian policy allows it: apt-get reads a
// trailing '-' as "remove" and '+' as "install" (`apt-get install openssh-server-` removes
// openssh-server). g++ and gobjc++ are therefore out of reach; build-essential brings g++.
const (
	DebianPackageNamePattern = `^[a-z0-9][a-z0-9+.-]*[a-z0-9.]$`
	DebianVersionPattern     = `^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`
	MaxPackageFieldLength    = 128
)

// VersionLatest as an item's version tracks the newest version of the package in the
// artifact server's repository (spec.aptSource bpa): a newer one uploaded is installed on
// the hosts that have an older one, with no CR edit; a host never goes down to it. It
// cannot be mistaken for a Debian version, which starts with a digit.
const VersionLatest = "latest"

// PackageState says whether a package should be installed or removed.
type PackageState string

const (
	PackagePresent PackageState = "present"
	PackageAbsent  PackageState = "absent"
)

// SoftwareItem is a package name (`- curl`) or a single-key map with options
// (`- jq: {version: 1.5+dfsg-1ubuntu0.1}`), as in the ICN samples. `version: latest`
// (VersionLatest) tracks the artifact server's newest version, with spec.aptSource bpa only.
//
// An OpenAPI schema cannot type a value that is either a string or an object, and CRD CEL
// rules cannot run on an untyped value, so the ValidatingAdmissionPolicy in config/admission
// validates both forms. Names and versions follow Debian policy syntax (DebianPackageNamePattern,
// DebianVersionPattern), so no value can start with '-' or carry shell metacharacters.
//
// +kubebuilder:validation:Type=""
// +kubebuilder:pruning:PreserveUnknownFields
type SoftwareItem struct {
	Name    string       `json:"-"`
	Version string       `json:"-"`
	State   PackageState `json:"-"`
}

type softwareOptions struct {
	Version string       `json:"version,omitempty"`
	State   PackageState `json:"state,omitempty"`
}

// MarshalJSON writes the short form when there are no options, as a user would.
func (s SoftwareItem) MarshalJSON() ([]byte, error) {
	if s.Version == "" && s.State == "" {
		return json.Marshal(s.Name)
	}
	return json.Marshal(map[string]softwareOptions{s.Name: {Version: s.Version, State: s.State}})
}

// UnmarshalJSON reads both forms.
func (s *SoftwareItem) UnmarshalJSON(data []byte) error {
	var name string
	if err := json.Unmarshal(data, &name); err == nil {
		*s = SoftwareItem{Name: name}
		return nil
	}
	var m map[string]*softwareOptions
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("software item must be a package name or {<name>: {version: <v>}}: %w", err)
	}
	if len(m) != 1 {
		return fmt.Errorf("software item must have exactly one package name, got %d", len(m))
	}
	for n, o := range m {
		*s = SoftwareItem{Name: n}
		if o != nil {
			s.Version, s.State = o.Version, o.State
		}
	}
	return nil
}

// SoftwareSpec lists the packages for the cluster's masters and workers. Removing an item
// never uninstalls the package; say `state: absent` for that.
type SoftwareSpec struct {
	// +optional
	// +kubebuilder:validation:MaxItems=256
	MasterSoftware []SoftwareItem `json:"masterSoftware,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=256
	WorkerSoftware []SoftwareItem `json:"workerSoftware,omitempty"`

	// SSH says how to reach the hosts; defaults to the Secret `<cluster>-ssh` as root.
	// +optional
	SSH *SSHConfig `json:"ssh,omitempty"`
	// AptSource says where apt finds the packages. Empty: the nodes' own apt sources.
	// `bpa`: also the signed flat repository of the cluster's artifact server (its
	// Provisioning's spec.offline.url, at /apt/), for offline sites. The key the nodes check
	// its signatures with, and the CA of its certificate, are the site admin's (BPAPolicy
	// spec.artifactServers[].aptKey and caBundle), never the CR's.
	// +optional
	// +kubebuilder:validation:Enum=bpa
	AptSource string `json:"aptSource,omitempty"`
}

// AptSourceBPA takes packages from the cluster's artifact server as well.
const AptSourceBPA = "bpa"

// Tracked are the names of the packages the spec's items track (`version: latest`), sorted
// and each once.
func (s *SoftwareSpec) Tracked() []string {
	var names []string
	for _, list := range [][]SoftwareItem{s.MasterSoftware, s.WorkerSoftware} {
		for _, it := range list {
			if it.Version == VersionLatest && it.State != PackageAbsent && !slices.Contains(names, it.Name) {
				names = append(names, it.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// PackageStatus is one package on one host.
type PackageStatus struct {
	Name string `json:"name"`
	// Wanted is the item's version: a pinned version, latest, absent, or empty for any.
	Wanted    string `json:"wanted,omitempty"`
	Installed string `json:"installed,omitempty"`
	// Target is, for a latest item, the newest version the artifact server held when the run
	// started: the host gets it unless it has it or a newer one.
	// +optional
	Target string `json:"target,omitempty"`
}

// HostSoftwareStatus is the outcome of the install on one host.
type HostSoftwareStatus struct {
	Name    string `json:"name"`
	IP      string `json:"ip,omitempty"`
	Phase   string `json:"phase,omitempty"`
	Message string `json:"message,omitempty"`
	// Changed is true when the run had to install something on this host.
	// +optional
	Changed bool `json:"changed,omitempty"`
	// +optional
	// +listType=atomic
	Packages []PackageStatus `json:"packages,omitempty"`
}

// SoftwareStatus mirrors the software Workflow, per host.
type SoftwareStatus struct {
	RunStatus `json:",inline"`

	// HostSoftware is the per-host result of the last run that covered the host (a run
	// started by an upload covers only the hosts that need the new version).
	// +optional
	// +listType=atomic
	HostSoftware []HostSoftwareStatus `json:"hostSoftware,omitempty"`

	// Latest are the versions the items saying `version: latest` resolved to for the current
	// run: the newest of each package in the artifact server's index. A newer one in the
	// index starts a run.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=512
	Latest []PackageVersion `json:"latest,omitempty"`

	// IndexRevision is the revision of the artifact server's ArtifactIndex that Latest was
	// read from.
	// +optional
	IndexRevision int64 `json:"indexRevision,omitempty"`

	// Trigger says why the current run started when nobody edited the Software, e.g.
	// "htop 3.2.2-3 uploaded" (the run's Workflow carries it as bpa.akraino.org/trigger).
	// +optional
	Trigger string `json:"trigger,omitempty"`

	// NodesHash identifies the set of nodes the last run covered, so a node joining the
	// cluster starts a run of its own.
	// +optional
	NodesHash string `json:"nodesHash,omitempty"`
}

// Software installs OS packages on a cluster's masters and workers and keeps them there.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name: at most 63 characters, because it labels the Workflows of its runs"
// +kubebuilder:resource:shortName=sw,categories=bpa
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.cluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Workflow",type=string,JSONPath=`.status.workflow.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Software struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SoftwareSpec   `json:"spec,omitempty"`
	Status SoftwareStatus `json:"status,omitempty"`
}

// SoftwareList is a list of Software.
//
// +kubebuilder:object:root=true
type SoftwareList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Software `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Software{}, &SoftwareList{})
}
