package hostmatch

import (
	"testing"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// TestPoolsChooseBySelectorAndKeepTheirHosts: a pool's members are chosen among the hosts its
// hostSelector selects (not workerSelector), named <pool>-<n>; members the cluster already
// has keep their hosts even when a better fit appears or their requirements grow; members
// leaving are listed as applied, marked Removing.
func TestPoolsChooseBySelectorAndKeepTheirHosts(t *testing.T) {
	hosts := []metal3v1.BareMetalHost{
		bmh("m", hw(8, 8192), boot("00:00:00:00:00:01")),
		bmh("big-edge", hw(64, 65536), boot("00:00:00:00:00:02"), label("pool", "edge")),
		bmh("small-edge", hw(4, 4096), boot("00:00:00:00:00:03"), label("pool", "edge")),
		bmh("small-core", hw(4, 4096), boot("00:00:00:00:00:04")),
	}
	s := spec(t, `
masters: [{m1: {mac-address: "00:00:00:00:00:01"}}]
workerSelector: {matchLabels: {pool: none}}
workerPools: [{name: edge, replicas: 1, cpu: 2, hostSelector: {matchLabels: {pool: edge}}}]`)
	got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, "edge-1=small-edge m1=m", assignment(got), "the smallest host of the pool's selector, workerSelector notwithstanding")

	// edge-1 runs on big-edge (say it was the only free host then): it stays there although
	// a smaller host is free and the pool now asks for more CPUs than big-edge has. The pool
	// shrinks from two members to one: edge-2, whose host is gone, is listed to be removed.
	applied := &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, MAC: "00:00:00:00:00:01", BareMetalHost: "m"},
		{Name: "edge-1", Roles: []string{"worker"}, MAC: "00:00:00:00:00:02", BareMetalHost: "big-edge", IP: "10.0.0.2"},
		{Name: "edge-2", Roles: []string{"worker"}, MAC: "00:00:00:00:00:09", BareMetalHost: "gone", IP: "10.0.0.9"},
	}}
	s.WorkerPools[0].CPU = ptr32(128)
	got, err = MatchSpec(s, applied, nil, Claimant{Cluster: "c"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, "edge-1=big-edge edge-2=gone m1=m", assignment(got))
	for _, h := range got {
		assert.Equal(t, h.Name == "edge-2", h.Removing, h.Name)
	}
}

func ptr32(v int32) *int32 { return &v }
