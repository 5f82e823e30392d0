package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxIndexedPackages bounds ArtifactIndex status.packages, so an index always fits in one
// object (each entry is well under 300 bytes).
const MaxIndexedPackages = 4096

// PackageVersion is one package at one version.
type PackageVersion struct {
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version"`
}

// ArtifactIndexStatus is what an artifact server's apt repository holds, as the server
// (bpa serve --index) last recorded it.
type ArtifactIndexStatus struct {
	// Revision counts the recorded changes of the repository: the server adds one each time
	// the set of packages changes, and never records an unchanged one again, so a restart
	// neither loses a change nor repeats one.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// Digest is the sha256 of the repository's Packages index, as nodes download it.
	// +optional
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest,omitempty"`
	// UpdatedAt is when the server recorded this revision.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
	// Packages are the newest version of each package in the repository, by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4096
	Packages []PackageVersion `json:"packages,omitempty"`
}

// ArtifactIndex is where an artifact server (`bpa serve --index NAME`) records the packages
// its signed apt repository holds, so that Softwares tracking `version: latest` follow
// uploads. The site admin creates it (config/serve ships one) and names it in the
// BPAPolicy's spec.artifactServers[].index; the server may write only its status, and
// only of this one object (config/serve/rbac.yaml). BPA reads an index only through the
// BPAPolicy entry of the server a cluster uses.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,path=artifactindexes,singular=artifactindex,categories=bpa
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Updated",type=date,JSONPath=`.status.updatedAt`
type ArtifactIndex struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status ArtifactIndexStatus `json:"status,omitempty"`
}

// ArtifactIndexList is a list of ArtifactIndex.
//
// +kubebuilder:object:root=true
type ArtifactIndexList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ArtifactIndex `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ArtifactIndex{}, &ArtifactIndexList{})
}
