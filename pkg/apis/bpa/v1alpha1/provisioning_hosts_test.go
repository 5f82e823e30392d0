package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHostNamespace(t *testing.T) {
	p := &Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa"}}
	if got := p.HostNamespace(); got != "bpa" {
		t.Errorf("without spec.bareMetalHostNamespace: got %q, want the CR's namespace", got)
	}
	p.Spec.BareMetalHostNamespace = "metal3"
	if got := p.HostNamespace(); got != "metal3" {
		t.Errorf("with spec.bareMetalHostNamespace: got %q, want metal3", got)
	}
}
