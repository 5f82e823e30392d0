package stepio

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Certificates is verify's certificates output (CertificatesFile): what it read of the
// cluster's certificates, bounded to bpav1.MaxCertificates entries, and the hosts (or the
// served chain) it could not read, bounded too.
type Certificates struct {
	CheckedAt    metav1.Time               `json:"checkedAt"`
	Certificates []bpav1.CertificateStatus `json:"certificates,omitempty"`
	Problems     []string                  `json:"problems,omitempty"`
}
