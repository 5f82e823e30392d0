package clusterdrift

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func TestPackages(t *testing.T) {
	sw := &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: "tools", Generation: 2},
		Spec: bpav1.SoftwareSpec{
			MasterSoftware: []bpav1.SoftwareItem{{Name: "etcd-tools", Version: "3.5-1"}},
			WorkerSoftware: []bpav1.SoftwareItem{{Name: "jq", Version: "1.6-2"}, {Name: "tmux"}, {Name: "telnet", State: bpav1.PackageAbsent}, {Name: "htop", Version: bpav1.VersionLatest}},
		},
		Status: bpav1.SoftwareStatus{RunStatus: bpav1.RunStatus{Phase: bpav1.PhaseSucceeded, ObservedGeneration: 2}, Latest: []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-3"}}}}
	hosts := []bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}}, {Name: "w1", Roles: []string{"worker"}}}
	nodes, why, err := SoftwareNodes(sw, hosts)
	require.NoError(t, err)
	require.Empty(t, why)
	require.Len(t, nodes, 2)

	as := map[string]string{"jq": "1.6-2", "tmux": "3.3a-3", "htop": "3.2.2-3"}
	drift, err := Packages(sw.Name, nodes[1], as)
	require.NoError(t, err)
	assert.Empty(t, drift, "as the Software left it")

	drift, err = Packages(sw.Name, nodes[1], map[string]string{"jq": "1.6-1", "telnet": "0.17-44", "htop": "3.2.2-1"})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"node w1: package htop: installed 3.2.2-1, older than the newest 3.2.2-3 (Software tools)",
		"node w1: package jq: installed 1.6-1, wanted 1.6-2 (Software tools)",
		"node w1: package telnet: installed (0.17-44), wanted absent (Software tools)",
		"node w1: package tmux: not installed (Software tools)",
	}, drift)

	// A Software whose last run did not succeed says nothing yet of its hosts.
	sw.Generation = 3
	nodes, why, err = SoftwareNodes(sw, hosts)
	require.NoError(t, err)
	assert.Empty(t, nodes)
	assert.Contains(t, why, "generation 3 has not succeeded")
}
