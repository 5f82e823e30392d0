package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterSpec ties one cluster's Provisioning and Software together.
// +kubebuilder:validation:XValidation:rule="has(self.provisioningCR) || has(self.softwareCR)",message="a Cluster names a provisioningCR, a softwareCR, or both"
type ClusterSpec struct {
	// ProvisioningCR names a Provisioning in the same namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ProvisioningCR string `json:"provisioningCR,omitempty"`
	// SoftwareCR names a Software in the same namespace. Its runs wait until the
	// Provisioning has Succeeded.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SoftwareCR string `json:"softwareCR,omitempty"`
}

// ClusterStatus aggregates the named CRs.
type ClusterStatus struct {
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	ProvisioningPhase RunPhase `json:"provisioningPhase,omitempty"`
	// +optional
	SoftwarePhase RunPhase `json:"softwarePhase,omitempty"`
	// +optional
	KubeconfigSecretName string `json:"kubeconfigSecretName,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Cluster is one cluster's Provisioning and Software, seen as a whole. Deleting it leaves
// the CRs it names in place.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=bpa
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.cluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Provisioning",type=string,JSONPath=`.spec.provisioningCR`
// +kubebuilder:printcolumn:name="Software",type=string,JSONPath=`.spec.softwareCR`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterSpec   `json:"spec,omitempty"`
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterList is a list of Cluster.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Cluster{}, &ClusterList{})
}
