package backupetcd

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The snapshot is taken on the first etcd member by name of the live cluster, never on a
// host that is leaving or does not run etcd.
func TestFirstEtcdMember(t *testing.T) {
	m, err := FirstEtcdMember([]bpav1.HostStatus{
		{Name: "w1", IP: "10.0.0.9"},
		{Name: "m3", Etcd: true, IP: "10.0.0.3"},
		{Name: "m1", Etcd: true, Removing: true, IP: "10.0.0.1"},
		{Name: "m2", Etcd: true, IP: "10.0.0.2"},
	})
	require.NoError(t, err)
	assert.Equal(t, "m2", m.Name)

	_, err = FirstEtcdMember([]bpav1.HostStatus{{Name: "w1", IP: "10.0.0.9"}})
	assert.ErrorContains(t, err, "no etcd member")
	_, err = FirstEtcdMember([]bpav1.HostStatus{{Name: "m1", Etcd: true}})
	assert.ErrorContains(t, err, "m1 has no IP address")
}

// A failure names the reason the controller stalls the CR with, and that nothing changed.
func TestFailureNamesTheReason(t *testing.T) {
	err := failed("on %s: %v", "m1", "boom")
	assert.Regexp(t, `^EtcdBackupFailed: on m1: boom; the operation after it did not start and nothing was changed$`, err.Error())
}
