// Package v1alpha1 holds the bpa.akraino.org/v1alpha1 API: Provisioning, Software and Cluster.
//
// The shapes of masters/workers and of software items are dictated by the Akraino ICN
// samples (lists of single-key maps), which every BPA release must keep accepting.
//
// +kubebuilder:object:generate=true
// +groupName=bpa.akraino.org
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every BPA kind.
	GroupVersion = schema.GroupVersion{Group: "bpa.akraino.org", Version: "v1alpha1"}

	// SchemeBuilder registers the BPA kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the BPA kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
