package hostmatch

import (
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// TestReplacementLeavesThenTakesASpare follows a worker graded remediation replaces through
// host matching: while it is applied on its dead host it is not asked for (the run removes
// it, listed Removing on that host); Spare names the host the next run gives it; once it
// left and the dead host was released with the unhealthy mark (retained: still
// provisioned, so without the mark its own namespace could take it at once, and it is the
// smallest fit), the node gets the spare under its name.
func TestReplacementLeavesThenTakesASpare(t *testing.T) {
	me := Claimant{Cluster: "c", Namespace: "metal3", Name: "p", UID: "uid-1"}
	ours := func(h *metal3v1.BareMetalHost) {
		h.Spec.ConsumerRef = me.ConsumerRef()
		h.Labels = map[string]string{bpav1.HostClaimLabel: "c"}
	}
	hosts := []metal3v1.BareMetalHost{
		bmh("m", hw(8, 8192), boot("00:00:00:00:00:01"), ours),
		bmh("dead", hw(2, 2048), boot("00:00:00:00:00:02"), ours),
		bmh("spare", hw(16, 16384), boot("00:00:00:00:00:03")),
	}
	p := &bpav1.Provisioning{Spec: *spec(t, `
masters: [{m1: {mac-address: "00:00:00:00:00:01"}}]
workers: [{w1: {cpu: 2}}]`)}
	p.Status.Applied = &bpav1.AppliedState{Hosts: []bpav1.HostStatus{
		{Name: "m1", Roles: []string{"master"}, MAC: "00:00:00:00:00:01", BareMetalHost: "m", Etcd: true},
		{Name: "w1", Roles: []string{"worker"}, MAC: "00:00:00:00:00:02", BareMetalHost: "dead"},
	}, Replacements: []bpav1.Replacement{{Node: "w1", BareMetalHost: "dead", DecidedAt: metav1.NewTime(time.Unix(1795860341, 0))}}}

	got, err := Match(p, me, hosts)
	require.NoError(t, err)
	assert.Equal(t, "m1=m w1=dead", assignment(got))
	assert.True(t, got[1].Removing, "the removal run lists w1 on its dead host, to be removed")
	spare, err := Spare(p, me, hosts, "w1")
	require.NoError(t, err)
	assert.Equal(t, "spare", spare)

	// The removal succeeded and w1 left status.applied, but its dead host is still claimed
	// (the release that marks it has not happened yet): w1 still does not go back to it,
	// though the cluster's own hosts are preferred and it is the smallest fit.
	removed := p.DeepCopy()
	removed.Status.Applied.Hosts = removed.Status.Applied.Hosts[:1]
	got, err = Match(removed, me, hosts)
	require.NoError(t, err)
	assert.Equal(t, "m1=m w1=spare", assignment(got), "never the dead host")

	// The removal succeeded: w1 left status.applied, its host was released (Retain) and marked.
	p.Status.Applied.Hosts = p.Status.Applied.Hosts[:1]
	hosts[1].Spec.ConsumerRef, hosts[1].Labels = nil, nil
	hosts[1].Annotations = map[string]string{bpav1.HostReleasedFromAnnotation: "metal3/p", bpav1.HostReleasedAtAnnotation: time.Now().UTC().Format(time.RFC3339),
		bpav1.HostUnhealthyAnnotation: "node w1 of metal3/p did not come back"}
	got, err = Match(p, me, hosts)
	require.NoError(t, err)
	assert.Equal(t, "m1=m w1=spare", assignment(got), "w1 joins again, on the spare")
	why, short := Unfit(&hosts[1], Claimant{Cluster: "other", Namespace: "tenant-b", Name: "q"})
	assert.Equal(t, "marked unhealthy", short, "no tenant takes the dead host: %s", why)

	// No spare: the only other host is too small for the entry; a MAC-named worker has none.
	hosts[2].Status.HardwareDetails.CPU.Count = 1
	p.Status.Applied.Hosts = append(p.Status.Applied.Hosts, bpav1.HostStatus{Name: "w1", Roles: []string{"worker"}, MAC: "00:00:00:00:00:02", BareMetalHost: "dead"})
	ours(&hosts[1])
	hosts[1].Annotations = nil
	_, err = Spare(p, me, hosts, "w1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no spare BareMetalHost for worker w1")
	hosts[2].Status.HardwareDetails.CPU.Count = 16
	p.Spec.Workers[0]["w1"].MACAddress = "00:00:00:00:00:02"
	_, err = Spare(p, me, hosts, "w1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "marked unhealthy", "a worker named by the MAC of its dead host has no spare")
}
