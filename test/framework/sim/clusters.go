package sim

import (
	"context"
	"fmt"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The CR helpers the e2e scenarios and the chaos soak share.

// NewHost is a BareMetalHost named name for the site's n-th machine (its MAC and address
// from n: HostMAC, HostIP): 8 CPUs, 16 GiB, OK. AddHosts creates it and starts the machine.
func (s *Site) NewHost(name string, n int) metal3v1.BareMetalHost {
	mac := s.HostMAC(n)
	return metal3v1.BareMetalHost{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       metal3v1.BareMetalHostSpec{BootMACAddress: mac},
		Status: metal3v1.BareMetalHostStatus{OperationalStatus: metal3v1.OperationalStatusOK, HardwareDetails: &metal3v1.HardwareDetails{
			CPU: metal3v1.CPU{Count: 8}, RAMMebibytes: 16384, NIC: []metal3v1.NIC{{Name: "eth0", MAC: mac, IP: s.HostIP(n)}}}},
	}
}

// NewCluster makes BareMetalHosts, machines and a Provisioning (not yet applied) for a
// cluster of its own, labelled name: masters <prefix>m1.., workers <prefix>w1.., on the
// hosts <name>-<node> at HostIP(base)... Clusters of one site share its application
// apiserver, so clusters that live there at once need prefixes of their own for their Nodes.
func (s *Site) NewCluster(ctx context.Context, name, prefix string, base, masters, workers int) *bpav1.Provisioning {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{bpav1.ClusterLabel: name}}}
	var hosts []metal3v1.BareMetalHost
	add := func(role string, i int) bpav1.NodeEntry {
		node := fmt.Sprintf("%s%s%d", prefix, role, i)
		h := s.NewHost(name+"-"+node, base+len(hosts))
		hosts = append(hosts, h)
		return bpav1.NodeEntry{node: {MACAddress: h.Spec.BootMACAddress}}
	}
	for i := 1; i <= masters; i++ {
		p.Spec.Masters = append(p.Spec.Masters, add("m", i))
	}
	for i := 1; i <= workers; i++ {
		p.Spec.Workers = append(p.Spec.Workers, add("w", i))
	}
	s.AddHosts(ctx, hosts)
	return p
}

// Apply applies a Provisioning the way an operator would: its SSH Secret first, then the
// CR (in the site's namespace, pointed at the simulated machines' SSH port).
func (s *Site) Apply(ctx context.Context, p *bpav1.Provisioning) error {
	p.Namespace = s.Namespace
	if p.Spec.SSH == nil {
		p.Spec.SSH = &bpav1.SSHConfig{}
	}
	p.Spec.SSH.Port = int32(s.SSH.Port)
	s.CreateSSHSecret(ctx, p.Labels[bpav1.ClusterLabel])
	return s.Client.Create(ctx, p)
}
