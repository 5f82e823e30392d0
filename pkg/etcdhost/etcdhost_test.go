package etcdhost

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The snapshot is tried on the live cluster's etcd members by name, never on a host that is
// leaving, runs no etcd or has no address.
func TestMembers(t *testing.T) {
	m, err := Members([]bpav1.HostStatus{
		{Name: "w1", IP: "10.0.0.9"},
		{Name: "m3", Etcd: true, IP: "10.0.0.3"},
		{Name: "m1", Etcd: true, Removing: true, IP: "10.0.0.1"},
		{Name: "m2", Etcd: true, IP: "10.0.0.2"},
		{Name: "m0", Etcd: true},
	})
	require.NoError(t, err)
	require.Len(t, m, 2)
	assert.Equal(t, []string{"m2", "m3"}, []string{m[0].Name, m[1].Name})

	_, err = Members([]bpav1.HostStatus{{Name: "w1", IP: "10.0.0.9"}})
	assert.ErrorContains(t, err, "no etcd member")
}
