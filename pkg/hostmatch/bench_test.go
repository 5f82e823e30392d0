package hostmatch

import (
	"fmt"
	"math/rand"
	"testing"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// benchInstance is a large site: 10,000 hosts of mixed sizes (some in error, some claimed by
// other clusters, a third with SR-IOV) and a 1,000-node cluster: 3 masters, 100 workers
// pinned by MAC, the rest chosen by cpu, memory, SR-IOV and QAT.
func benchInstance() (*bpav1.ProvisioningSpec, []metal3v1.BareMetalHost) {
	r := rand.New(rand.NewSource(1))
	cpus := []int{8, 12, 16, 24, 32, 48, 64, 96}
	rams := []int{16384, 32768, 65536, 131072, 262144}
	hosts := make([]metal3v1.BareMetalHost, 10_000)
	for i := range hosts {
		opts := []hostOpt{
			hw(cpus[r.Intn(len(cpus))], rams[r.Intn(len(rams))]),
			boot(fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&255, i>>8&255, i&255)),
			label("rack", fmt.Sprintf("r%d", r.Intn(10))),
		}
		switch x := r.Intn(100); {
		case x < 2:
			opts = append(opts, errorMessage("power failure"))
		case x < 7:
			opts = append(opts, claimedBy("other"))
		}
		if r.Intn(100) < 30 {
			opts = append(opts, sriov)
		}
		if r.Intn(100) < 15 {
			opts = append(opts, qat)
		}
		hosts[i] = bmh(fmt.Sprintf("host-%05d", i), opts...)
	}
	s := &bpav1.ProvisioningSpec{}
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	i32 := func(v int) *int32 { c := int32(v); return &c }
	for i := 0; i < 3; i++ {
		s.Masters = append(s.Masters, bpav1.NodeEntry{fmt.Sprintf("master-%d", i): {CPU: i32(8), Memory: q("16Gi")}})
	}
	for i := 0; i < 997; i++ {
		req := &bpav1.NodeRequirements{
			CPU:    i32([]int{8, 16, 24, 32}[r.Intn(4)]),
			Memory: q([]string{"16Gi", "32Gi", "64Gi"}[r.Intn(3)]),
			SRIOV:  r.Intn(100) < 20,
			QAT:    r.Intn(100) < 10,
		}
		if i < 100 {
			// Pin to a usable host with the same MAC the generator gave it.
			h := 100 * i
			for hosts[h].Status.ErrorMessage != "" || hosts[h].Labels[bpav1.HostClaimLabel] != "" {
				h++
			}
			req = &bpav1.NodeRequirements{MACAddress: hosts[h].Spec.BootMACAddress}
		}
		s.Workers = append(s.Workers, bpav1.NodeEntry{fmt.Sprintf("worker-%03d", i): req})
	}
	return s, hosts
}

// BenchmarkMatch10kHosts1kNodes is the target: under 100 ms.
func BenchmarkMatch10kHosts1kNodes(b *testing.B) {
	s, hosts := benchInstance()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := MatchSpec(s, nil, nil, Claimant{Cluster: "mine"}, hosts)
		if err != nil || len(got) != 1000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstFit10kHosts1kNodes is the naive baseline on the same instance.
func BenchmarkFirstFit10kHosts1kNodes(b *testing.B) {
	s, hosts := benchInstance()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nodes, err := Nodes(s)
		if err != nil {
			b.Fatal(err)
		}
		sel, _ := SelectorsOf(s)
		got, err := firstFit(nodes, sel, "mine", hosts)
		if err != nil || len(got) != 1000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatchAdversarial1k is the worst case for the greedy pass: 500 nodes needing 4
// CPUs take the 500 small QAT hosts first, and each of the 500 QAT nodes then needs an
// augmenting path. First-fit fails this instance outright.
func BenchmarkMatchAdversarial1k(b *testing.B) {
	s := &bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m": nil}}}
	four := int32(4)
	var hosts []metal3v1.BareMetalHost
	for i := 0; i < 500; i++ {
		s.Workers = append(s.Workers, bpav1.NodeEntry{fmt.Sprintf("cpu-%03d", i): {CPU: &four}})
		hosts = append(hosts,
			bmh(fmt.Sprintf("p-%03d", i), hw(4, 4096), qat, boot(fmt.Sprintf("52:54:00:00:%02x:%02x", i>>8, i&255))),
			bmh(fmt.Sprintf("q-%03d", i), hw(8, 4096), boot(fmt.Sprintf("52:54:00:01:%02x:%02x", i>>8, i&255))))
	}
	for i := 0; i < 500; i++ {
		s.Workers = append(s.Workers, bpav1.NodeEntry{fmt.Sprintf("qat-%03d", i): {QAT: true}})
	}
	hosts = append(hosts, bmh("z", hw(96, 4096), boot("52:54:00:02:00:00")))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := MatchSpec(s, nil, nil, Claimant{Cluster: "c"}, hosts); err != nil {
			b.Fatal(err)
		}
	}
}
