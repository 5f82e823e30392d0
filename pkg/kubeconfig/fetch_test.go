package kubeconfig

import (
	"testing"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func TestFirstMaster(t *testing.T) {
	m, err := FirstMaster([]bpav1.HostStatus{
		{Name: "worker-0", IP: "10.0.0.9", Roles: []string{"worker"}},
		{Name: "master-b", IP: "10.0.0.2", Roles: []string{"master"}},
		{Name: "master-a", IP: "10.0.0.1", Roles: []string{"worker", "master"}},
	})
	if err != nil || m.Name != "master-a" {
		t.Errorf("got %v, %v", m, err)
	}
	if _, err := FirstMaster([]bpav1.HostStatus{{Name: "w", Roles: []string{"worker"}}}); err == nil {
		t.Error("no master must be an error")
	}
	if _, err := FirstMaster([]bpav1.HostStatus{{Name: "m", Roles: []string{"master"}}}); err == nil {
		t.Error("a master without IP must be an error")
	}
}
