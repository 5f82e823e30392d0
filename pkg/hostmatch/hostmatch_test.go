package hostmatch

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/framework/hostfixture"
)

// hostOpt shapes a test BareMetalHost.
type hostOpt func(*metal3v1.BareMetalHost)

func bmh(name string, opts ...hostOpt) metal3v1.BareMetalHost {
	h := metal3v1.BareMetalHost{}
	h.Name = name
	h.Namespace = "metal3"
	h.Status.OperationalStatus = metal3v1.OperationalStatusOK
	h.Status.HardwareDetails = &metal3v1.HardwareDetails{}
	hostfixture.Provisioned(&h)
	for _, o := range opts {
		o(&h)
	}
	return h
}

func hw(cpu, ramMiB int) hostOpt {
	return func(h *metal3v1.BareMetalHost) {
		h.Status.HardwareDetails.CPU.Count = cpu
		h.Status.HardwareDetails.RAMMebibytes = ramMiB
	}
}

func nic(mac, ip string) hostOpt {
	return func(h *metal3v1.BareMetalHost) {
		h.Status.HardwareDetails.NIC = append(h.Status.HardwareDetails.NIC, metal3v1.NIC{MAC: mac, IP: ip})
	}
}

func boot(mac string) hostOpt { return func(h *metal3v1.BareMetalHost) { h.Spec.BootMACAddress = mac } }

func label(k, v string) hostOpt {
	return func(h *metal3v1.BareMetalHost) {
		if h.Labels == nil {
			h.Labels = map[string]string{}
		}
		h.Labels[k] = v
	}
}

var (
	sriov = label(bpav1.SRIOVFeatureLabel, "true")
	qat   = label(bpav1.QATFeatureLabel, "true")
)

func claimedBy(cluster string) hostOpt { return label(bpav1.HostClaimLabel, cluster) }

func errorMessage(msg string) hostOpt {
	return func(h *metal3v1.BareMetalHost) { h.Status.ErrorMessage = msg }
}

func opError(h *metal3v1.BareMetalHost) { h.Status.OperationalStatus = metal3v1.OperationalStatusError }

func deleting(h *metal3v1.BareMetalHost) {
	now := metav1.Now()
	h.DeletionTimestamp = &now
}

func notInspected(h *metal3v1.BareMetalHost) { h.Status.HardwareDetails = nil }

// spec reads a ProvisioningSpec written as in a CR.
func spec(t testing.TB, y string) *bpav1.ProvisioningSpec {
	t.Helper()
	s := &bpav1.ProvisioningSpec{}
	require.NoError(t, yaml.UnmarshalStrict([]byte(y), s))
	return s
}

// assignment summarises a result as node=host, in node order.
func assignment(hs []bpav1.HostStatus) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.Name + "=" + h.BareMetalHost
	}
	return strings.Join(parts, " ")
}

func TestMatchByMAC(t *testing.T) {
	hosts := []metal3v1.BareMetalHost{
		bmh("host-a", hw(16, 32768), nic("00:C6:14:04:61:B2", "127.0.1.1")),
		bmh("host-b", hw(16, 32768), boot("00-c2-12-03-62-b1")),
		bmh("host-c", hw(16, 32768), nic("00:c2:12:03:62:b2", "")),
	}
	got, err := MatchSpec(spec(t, `
masters:
  - master:
      mac-address: 00-c6-14-04-61-b2
workers:
  - worker-1:
      mac-address: 00:C2:12:03:62:B1
  - worker-2:
      mac-address: 00:c2:12:03:62:b2
`), nil, nil, Claimant{Cluster: "cluster-abc", Namespace: "metal3"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, []bpav1.HostStatus{
		{Name: "master", Roles: []string{"master"}, MAC: "00:c6:14:04:61:b2", BareMetalHost: "host-a", Etcd: true},
		{Name: "worker-1", Roles: []string{"worker"}, MAC: "00:c2:12:03:62:b1", BareMetalHost: "host-b"},
		{Name: "worker-2", Roles: []string{"worker"}, MAC: "00:c2:12:03:62:b2", BareMetalHost: "host-c"},
	}, got)
}

func TestMatchByMACErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		hosts []metal3v1.BareMetalHost
		want  string
	}{
		"no such MAC": {
			[]metal3v1.BareMetalHost{bmh("host-a", nic("00:00:00:00:00:01", ""))},
			"node master-1: no BareMetalHost has a NIC with MAC 00:c6:14:04:61:b2",
		},
		"too few CPUs": {
			[]metal3v1.BareMetalHost{bmh("host-a", hw(8, 65536), nic("00:c6:14:04:61:b2", ""))},
			"node master-1: BareMetalHost host-a (MAC 00:c6:14:04:61:b2) does not meet the node's requirements: cpu: it has 8, the node needs 10",
		},
		"too little memory and no sriov": {
			[]metal3v1.BareMetalHost{bmh("host-a", hw(16, 2048), nic("00:c6:14:04:61:b2", ""))},
			"memory: it has 2048Mi, the node needs 4Gi; sriov: it lacks the label feature.bpa.akraino.org/sriov=true",
		},
		"not inspected": {
			[]metal3v1.BareMetalHost{bmh("host-a", boot("00:c6:14:04:61:b2"), notInspected)},
			"host-a (MAC 00:c6:14:04:61:b2) does not meet the node's requirements: it has no status.hardware",
		},
		"in error": {
			[]metal3v1.BareMetalHost{bmh("host-a", hw(16, 8192), sriov, nic("00:c6:14:04:61:b2", ""), errorMessage("BMC unreachable"))},
			"node master-1: the host with MAC 00:c6:14:04:61:b2 cannot be used: BareMetalHost host-a is in error: BMC unreachable",
		},
		"operational status error": {
			[]metal3v1.BareMetalHost{bmh("host-a", hw(16, 8192), sriov, nic("00:c6:14:04:61:b2", ""), opError)},
			"BareMetalHost host-a is in error (operationalStatus error)",
		},
		"claimed by another cluster": {
			[]metal3v1.BareMetalHost{bmh("host-a", hw(16, 8192), sriov, nic("00:c6:14:04:61:b2", ""), claimedBy("cluster-xyz"))},
			`BareMetalHost host-a is claimed by cluster "cluster-xyz"`,
		},
		"being deleted": {
			[]metal3v1.BareMetalHost{bmh("host-a", hw(16, 8192), sriov, nic("00:c6:14:04:61:b2", ""), deleting)},
			"BareMetalHost host-a is being deleted",
		},
		"MAC on two usable hosts": {
			[]metal3v1.BareMetalHost{
				bmh("host-a", hw(16, 8192), sriov, nic("00:c6:14:04:61:b2", "")),
				bmh("host-b", hw(16, 8192), sriov, boot("00:c6:14:04:61:b2")),
			},
			"node master-1: MAC 00:c6:14:04:61:b2 is on several BareMetalHosts (host-a, host-b)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := MatchSpec(spec(t, `
masters:
  - master-1:
      mac-address: 00:c6:14:04:61:b2
      cpu: 10
      memory: 4Gi
      sriov: true
`), nil, nil, Claimant{Cluster: "cluster-abc", Namespace: "metal3"}, tc.hosts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestMatchByMACSkipsAStaleDuplicate(t *testing.T) {
	got, err := MatchSpec(spec(t, "masters: [{master-1: {mac-address: 00:c6:14:04:61:b2}}]"), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, []metal3v1.BareMetalHost{
		bmh("old", nic("00:c6:14:04:61:b2", ""), deleting),
		bmh("new", nic("00:c6:14:04:61:b2", "")),
	})
	require.NoError(t, err)
	assert.Equal(t, "master-1=new", assignment(got))
}

func TestTwoNodesOnOneHost(t *testing.T) {
	_, err := MatchSpec(spec(t, `
masters: [{master-1: {mac-address: 00:00:00:00:00:01}}]
workers: [{worker-1: {mac-address: 00:00:00:00:00:02}}]
`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, []metal3v1.BareMetalHost{bmh("host-a", nic("00:00:00:00:00:01", ""), nic("00:00:00:00:00:02", ""))})
	assert.ErrorContains(t, err, "nodes master-1 and worker-1 name MACs of the same BareMetalHost host-a")
}

// TestFirstFitTrap is the example: first-fit gives host A to the master and then
// has nothing for the worker.
func TestFirstFitTrap(t *testing.T) {
	s := spec(t, `
masters: [{master-1: {cpu: 10}}]
workers: [{worker-1: {cpu: 20, sriov: true}}]
`)
	hosts := []metal3v1.BareMetalHost{bmh("host-a", hw(32, 65536), sriov, boot("00:00:00:00:00:0a")), bmh("host-b", hw(12, 16384), boot("00:00:00:00:00:0b"))}
	got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, "master-1=host-b worker-1=host-a", assignment(got))
	assert.Equal(t, "00:00:00:00:00:0b", got[0].MAC, "a node chosen by resources reports its host's boot MAC")

	nodes, err := Nodes(s)
	require.NoError(t, err)
	_, err = firstFit(nodes, Selectors{}, "c", hosts)
	assert.Error(t, err, "the baseline falls into the trap")
}

// TestAugmentingPath needs more than smallest-fit: the smallest host for node-1 is the only
// one with QAT, which node-2 needs.
func TestAugmentingPath(t *testing.T) {
	got, err := MatchSpec(spec(t, `
masters: [{node-1: {cpu: 4}}]
workers: [{node-2: {qat: true}}]
`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, []metal3v1.BareMetalHost{
		bmh("p", hw(4, 4096), qat, boot("00:00:00:00:00:01")),
		bmh("q", hw(8, 4096), boot("00:00:00:00:00:02")),
	})
	require.NoError(t, err)
	assert.Equal(t, "node-1=q node-2=p", assignment(got))
}

func TestPreferenceAndDeterminism(t *testing.T) {
	s := spec(t, `
masters: [{master-1: {cpu: 8, memory: 8Gi}}]
workers: [{worker-1: {cpu: 8}}, {worker-2: {cpu: 8}}]
`)
	hosts := []metal3v1.BareMetalHost{
		bmh("big", hw(64, 262144), boot("00:00:00:00:00:01")),
		bmh("small-2", hw(8, 16384), boot("00:00:00:00:00:02")),
		bmh("small-1", hw(8, 16384), boot("00:00:00:00:00:03")),
		bmh("tiny-ram", hw(8, 4096), boot("00:00:00:00:00:04")),
		bmh("medium", hw(16, 16384), boot("00:00:00:00:00:05")),
	}
	want := "master-1=small-1 worker-1=tiny-ram worker-2=small-2"
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		r.Shuffle(len(hosts), func(a, b int) { hosts[a], hosts[b] = hosts[b], hosts[a] })
		got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
		require.NoError(t, err)
		assert.Equal(t, want, assignment(got), "the host order must not matter")
	}
	// Hosts this cluster already claimed come first, so a rerun keeps them.
	hosts = append(hosts[:0:0], hosts...)
	for i := range hosts {
		if hosts[i].Name == "big" || hosts[i].Name == "medium" {
			claimedBy("c")(&hosts[i])
		}
	}
	got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, "master-1=medium worker-1=big worker-2=tiny-ram", assignment(got))
}

func TestExcludedHostsAreNeverChosen(t *testing.T) {
	s := spec(t, "masters: [{master-1: {cpu: 1}}]")
	bad := []metal3v1.BareMetalHost{
		bmh("a-error", hw(1, 1024), boot("00:00:00:00:00:01"), errorMessage("power failure")),
		bmh("b-operr", hw(1, 1024), boot("00:00:00:00:00:02"), opError),
		bmh("c-deleting", hw(1, 1024), boot("00:00:00:00:00:03"), deleting),
		bmh("d-claimed", hw(1, 1024), boot("00:00:00:00:00:04"), claimedBy("other")),
		bmh("e-nomac", hw(1, 1024)),
		bmh("f-uninspected", boot("00:00:00:00:00:06"), notInspected),
		bmh("g-small", hw(0, 1024), boot("00:00:00:00:00:07")),
	}
	_, err := MatchSpec(s, nil, nil, Claimant{Cluster: "mine", Namespace: "metal3"}, bad)
	require.ErrorIs(t, err, ErrNoAssignment)
	assert.Contains(t, err.Error(), "node master-1 (cpu ≥ 1, roles master+worker): none of the 7 BareMetalHosts qualifies "+
		`(2 in error; 1 being deleted; 1 claimed by cluster "other"; 1 not inspected; 1 too few CPUs; 1 without a MAC address)`)

	got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "mine", Namespace: "metal3"}, append(bad, bmh("z-good", hw(1, 1024), boot("00:00:00:00:00:09"), claimedBy("mine"))))
	require.NoError(t, err)
	assert.Equal(t, "master-1=z-good", assignment(got), "a host already claimed by this cluster is fine")
}

func TestHallViolation(t *testing.T) {
	_, err := MatchSpec(spec(t, `
masters: [{m: {cpu: 4}}]
workers: [{w1: {cpu: 16}}, {w2: {cpu: 16}}]
`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, []metal3v1.BareMetalHost{
		bmh("a", hw(32, 1024), boot("00:00:00:00:00:01")),
		bmh("b", hw(4, 1024), boot("00:00:00:00:00:02")),
	})
	require.ErrorIs(t, err, ErrNoAssignment)
	assert.Contains(t, err.Error(), "2 nodes (w1, w2) can only use 1 BareMetalHosts (a)")
}

func TestSelectors(t *testing.T) {
	s := spec(t, `
masters: [{master-1: {}}]
workers: [{worker-1: {}}]
masterSelector:
  matchLabels: {rack: r1}
workerSelector:
  matchExpressions:
    - {key: rack, operator: In, values: [r2, r3]}
`)
	hosts := []metal3v1.BareMetalHost{
		bmh("a", hw(1, 1), boot("00:00:00:00:00:01"), label("rack", "r2")),
		bmh("b", hw(2, 1), boot("00:00:00:00:00:02"), label("rack", "r1")),
	}
	got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, "master-1=b worker-1=a", assignment(got))

	// A MAC pin must respect the selector too.
	s.Masters[0]["master-1"] = &bpav1.NodeRequirements{MACAddress: "00:00:00:00:00:01"}
	_, err = MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
	assert.ErrorContains(t, err, "node master-1: BareMetalHost a (MAC 00:00:00:00:00:01) does not meet the node's requirements: its labels do not match masterSelector")

	s.MasterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "rack", Operator: "Bogus"}}}
	_, err = MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
	assert.ErrorContains(t, err, "masterSelector:")
}

func TestCombinedRoles(t *testing.T) {
	hosts := []metal3v1.BareMetalHost{
		bmh("a", hw(8, 8192), nic("90:e2:ba:cd:df:bd", "")),
		bmh("b", hw(8, 8192), boot("00:00:00:00:00:02")),
	}
	for name, tc := range map[string]struct{ spec, want string }{
		// ICN bpa_v1alpha1_provisioning_cr_sample_single_2.yaml
		"same name and MAC in both lists": {`
masters: [{master-1: {mac-address: 90:e2:ba:cd:df:bd}}]
workers: [{master-1: {mac-address: 90:E2:BA:CD:DF:BD}}]`, "master-1 master,worker"},
		// ICN bpa_v1alpha1_provisioning_cr_sample_single_3.yaml
		"null worker entry": {`
masters: [{master-1: {mac-address: 90:e2:ba:cd:df:bd}}]
workers: [{master-1: }]`, "master-1 master,worker"},
		// ICN bpa_v1alpha1_provisioning_cr_sample_single.yaml
		"no workers": {`
masters: [{master-1: {mac-address: 90:e2:ba:cd:df:bd}}]`, "master-1 master,worker"},
		"separate worker": {`
masters: [{master-1: {mac-address: 90:e2:ba:cd:df:bd}}]
workers: [{worker-1: }]`, "master-1 master; worker-1 worker"},
		"requirements of both entries": {`
masters: [{node: {cpu: 4}}]
workers: [{node: {memory: 8Gi}}]`, "node master,worker"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MatchSpec(spec(t, tc.spec), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
			require.NoError(t, err)
			var parts []string
			for _, h := range got {
				parts = append(parts, h.Name+" "+strings.Join(h.Roles, ","))
			}
			assert.Equal(t, tc.want, strings.Join(parts, "; "))
		})
	}
	_, err := MatchSpec(spec(t, `
masters: [{node: {cpu: 4}}]
workers: [{node: {cpu: 16}}]`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
	assert.ErrorIs(t, err, ErrNoAssignment, "both entries' requirements hold")
}

func TestNodesErrors(t *testing.T) {
	for name, tc := range map[string]struct{ spec, want string }{
		"MAC mismatch": {`
masters: [{node: {mac-address: 00:00:00:00:00:01}}]
workers: [{node: {mac-address: 00:00:00:00:00:02}}]`, "node node: masters and workers give it different mac-addresses"},
		"duplicate MAC": {`
masters: [{a: {mac-address: 00:00:00:00:00:01}}]
workers: [{b: {mac-address: 00-00-00-00-00-01}}]`, "nodes a and b both name mac-address 00:00:00:00:00:01"},
		"bad MAC":      {`masters: [{a: {mac-address: "00:00:00:00:00"}}]`, `node a: mac-address "00:00:00:00:00" is not a MAC address`},
		"two keys":     {`masters: [{a: {}, b: {}}]`, "masters[0]: an entry names exactly one node, this one has 2"},
		"bad name":     {`masters: [{A_1: {}}]`, `masters[0]: node name "A_1"`},
		"listed twice": {`masters: [{a: {}}, {a: {}}]`, "masters: node a is listed twice"},
		"no masters":   {`masters: []`, "at least one master"},
		"zero memory":  {`masters: [{a: {memory: "0"}}]`, "node a: memory 0: must be positive"},
		"negative cpu": {`masters: [{a: {cpu: -1}}]`, "node a: cpu must be at least 1"},
		"etcd on a worker": {`
masters: [{a: }]
workers: [{a: }, {b: {etcd: true}}]`, "workers[1]: node b: etcd applies to masters only"},
		"explicit even etcd": {`masters: [{a: }, {b: {etcd: true}}, {c: {etcd: false}}]`, "2 masters run etcd"},
		"no etcd member":     {`masters: [{a: {etcd: false}}]`, "0 masters run etcd"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Nodes(spec(t, tc.spec))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// kubespray refuses an even etcd ("Stop if even number of etcd hosts"): without a choice in
// the CR, etcd runs on the largest odd number of masters, the first in CR order (not name
// order); with one, on the masters not marked etcd: false.
func TestEtcdMembership(t *testing.T) {
	for name, tc := range map[string]struct {
		spec string
		want []string
	}{
		"one":           {`masters: [{m1: }]`, []string{"m1"}},
		"two":           {`masters: [{m2: }, {m1: }]`, []string{"m2"}},
		"three":         {`masters: [{m3: }, {m1: }, {m2: }]`, []string{"m3", "m1", "m2"}},
		"four CR order": {`masters: [{m-c: }, {m-a: }, {m-d: }, {m-b: }]`, []string{"m-c", "m-a", "m-d"}},
		"four, one out": {`masters: [{m-c: }, {m-a: {etcd: false}}, {m-d: }, {m-b: }]`, []string{"m-c", "m-d", "m-b"}},
		"two, one said": {`masters: [{m1: {etcd: false}}, {m2: }]`, []string{"m2"}},
		"worker no etcd": {`
masters: [{m1: }]
workers: [{w1: }, {m1: }]`, []string{"m1"}},
	} {
		t.Run(name, func(t *testing.T) {
			nodes, err := Nodes(spec(t, tc.spec))
			require.NoError(t, err)
			var got []string
			for _, n := range nodes {
				if n.Etcd {
					got = append(got, n.Name)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestMemoryRoundsUp(t *testing.T) {
	got, err := MatchSpec(spec(t, `masters: [{a: {memory: "4294967297"}}]`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, []metal3v1.BareMetalHost{
		bmh("exact", hw(1, 4096), boot("00:00:00:00:00:01")),
		bmh("more", hw(1, 4097), boot("00:00:00:00:00:02")),
	})
	require.NoError(t, err)
	assert.Equal(t, "a=more", assignment(got), "4Gi plus one byte does not fit in 4096Mi")
}

func TestDuplicateHostName(t *testing.T) {
	_, err := MatchSpec(spec(t, `masters: [{a: {}}]`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, []metal3v1.BareMetalHost{bmh("x", boot("00:00:00:00:00:01")), bmh("x", boot("00:00:00:00:00:02"))})
	assert.ErrorContains(t, err, "BareMetalHost x is listed twice")
}

// TestMatchIsMaximum compares Match with brute force on many small random instances: it
// must find an assignment exactly when one exists, and every assignment must be valid.
func TestMatchIsMaximum(t *testing.T) {
	r := rand.New(rand.NewSource(42))
	for iter := 0; iter < 3000; iter++ {
		nNodes, nHosts := 1+r.Intn(5), r.Intn(7)
		var hosts []metal3v1.BareMetalHost
		for i := 0; i < nHosts; i++ {
			opts := []hostOpt{hw(1+r.Intn(4), 1024*(1+r.Intn(4))), boot(fmt.Sprintf("00:00:00:00:00:%02x", i))}
			if r.Intn(2) == 0 {
				opts = append(opts, sriov)
			}
			if r.Intn(3) == 0 {
				opts = append(opts, qat)
			}
			if r.Intn(8) == 0 {
				opts = append(opts, errorMessage("broken"))
			}
			hosts = append(hosts, bmh(fmt.Sprintf("h%d", i), opts...))
		}
		s := &bpav1.ProvisioningSpec{}
		for i := 0; i < nNodes; i++ {
			cpu := int32(1 + r.Intn(4))
			req := &bpav1.NodeRequirements{CPU: &cpu, SRIOV: r.Intn(3) == 0, QAT: r.Intn(4) == 0}
			e := bpav1.NodeEntry{fmt.Sprintf("n%d", i): req}
			if i == 0 {
				s.Masters = append(s.Masters, e)
			} else {
				s.Workers = append(s.Workers, e)
			}
		}
		nodes, err := Nodes(s)
		require.NoError(t, err)
		got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, hosts)
		exists := bruteForce(nodes, hosts)
		if !exists {
			require.ErrorIs(t, err, ErrNoAssignment, "iteration %d", iter)
			continue
		}
		require.NoError(t, err, "iteration %d: an assignment exists", iter)
		used := map[string]bool{}
		byName := map[string]*metal3v1.BareMetalHost{}
		for i := range hosts {
			byName[hosts[i].Name] = &hosts[i]
		}
		for _, hs := range got {
			require.False(t, used[hs.BareMetalHost], "host used twice")
			used[hs.BareMetalHost] = true
			n := nodes[indexOf(nodes, hs.Name)]
			h := newHost(byName[hs.BareMetalHost], Claimant{Cluster: "c", Namespace: "metal3"}, Selectors{})
			require.Empty(t, h.excluded)
			require.Empty(t, unmet(n, &h), "node %s on host %s", n.Name, h.name)
		}
	}
}

func indexOf(nodes []Node, name string) int {
	for i, n := range nodes {
		if n.Name == name {
			return i
		}
	}
	panic(name)
}

func bruteForce(nodes []Node, bmhs []metal3v1.BareMetalHost) bool {
	hosts := make([]host, len(bmhs))
	for i := range bmhs {
		hosts[i] = newHost(&bmhs[i], Claimant{Cluster: "c", Namespace: "metal3"}, Selectors{})
	}
	used := make([]bool, len(hosts))
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(nodes) {
			return true
		}
		for i := range hosts {
			if !used[i] && hosts[i].excluded == "" && len(unmet(nodes[k], &hosts[i])) == 0 {
				used[i] = true
				if try(k + 1) {
					return true
				}
				used[i] = false
			}
		}
		return false
	}
	return try(0)
}

func TestErrNoAssignmentIsWrapped(t *testing.T) {
	_, err := MatchSpec(spec(t, `masters: [{a: {cpu: 4}}]`), nil, nil, Claimant{Cluster: "c", Namespace: "metal3"}, nil)
	assert.True(t, errors.Is(err, ErrNoAssignment))
	assert.Contains(t, err.Error(), "there are no BareMetalHosts")
}

// Claims are metal3's spec.consumerRef: a host another consumer holds (a Metal3Machine of
// Cluster API, another namespace's Provisioning, a Provisioning of the same name re-created)
// is never chosen, and the error names the consumer; a host whose consumerRef names this
// Provisioning is preferred like any of its own; a label-only claim of an earlier BPA is
// adopted only in the Provisioning's own namespace.
func TestConsumerRefClaims(t *testing.T) {
	me := Claimant{Cluster: "c", Namespace: "metal3", Name: "p", UID: "uid-1"}
	consumed := func(ref corev1.ObjectReference) hostOpt {
		return func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = &ref }
	}
	s := spec(t, "masters: [{m: {mac-address: 00:00:00:00:00:01}}]")
	host := func(opts ...hostOpt) []metal3v1.BareMetalHost {
		return []metal3v1.BareMetalHost{bmh("h", append([]hostOpt{hw(4, 4096), boot("00:00:00:00:00:01")}, opts...)...)}
	}
	for name, tc := range map[string]struct {
		opts []hostOpt
		err  string
	}{
		"capm3 machine": {[]hostOpt{consumed(corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3Machine", Namespace: "metal3", Name: "m-1"})},
			"is used by Metal3Machine metal3/m-1 (spec.consumerRef)"},
		"other namespace": {[]hostOpt{consumed(corev1.ObjectReference{APIVersion: "bpa.akraino.org/v1alpha1", Kind: "Provisioning", Namespace: "tenant-b", Name: "p"})},
			"is used by Provisioning tenant-b/p"},
		"same name, another uid": {[]hostOpt{consumed(corev1.ObjectReference{APIVersion: "bpa.akraino.org/v1alpha1", Kind: "Provisioning", Namespace: "metal3", Name: "p", UID: "uid-old"})},
			"is used by Provisioning metal3/p"},
		"label-only claim from another namespace": {[]hostOpt{claimedBy("c"), func(h *metal3v1.BareMetalHost) { h.Namespace = "shared" }},
			"is labelled bpa.akraino.org/cluster=c by an earlier BPA outside namespace metal3"},
		"ours by consumerRef":                      {[]hostOpt{consumed(*me.ConsumerRef())}, ""},
		"earlier BPA's label claim, own namespace": {[]hostOpt{claimedBy("c")}, ""},
		"free": {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MatchSpec(s, nil, nil, me, host(tc.opts...))
			if tc.err == "" {
				require.NoError(t, err)
				assert.Equal(t, "h", got[0].BareMetalHost)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}
