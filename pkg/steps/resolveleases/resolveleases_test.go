package resolveleases

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/leases"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

const ns = "bpa"

// setup puts the by-mac example in a fake cluster and writes the hosts discover-hosts
// would have chosen; it returns the client and the options to resolve them.
func setup(t *testing.T, mutate func(*metal3v1.BareMetalHost)) (client.Client, Options) {
	t.Helper()
	data, err := os.ReadFile("../../../examples/provisioning-by-mac.yaml")
	require.NoError(t, err)
	p := &bpav1.Provisioning{}
	require.NoError(t, yaml.UnmarshalStrict(data, p))
	p.Namespace, p.Generation = ns, 1
	bmhs, err := hostmatch.ReadBareMetalHostsFile("../../../examples/bmh/provisioning-by-mac.yaml")
	require.NoError(t, err)
	objs := []client.Object{p}
	for i := range bmhs {
		bmhs[i].Namespace = ns
		if mutate != nil {
			mutate(&bmhs[i])
		}
		objs = append(objs, &bmhs[i])
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	// The hosts discover-hosts chooses for the example: want, without addresses.
	hosts := make([]bpav1.HostStatus, len(want))
	for i, h := range want {
		h.IP, h.Roles = "", slices.Clone(h.Roles)
		hosts[i] = h
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in", "hosts.json")
	require.NoError(t, stepio.WriteHosts(in, hosts))
	return c, Options{CR: stepio.CR{Namespace: ns, Name: p.Name, Generation: 1}, HostsFile: in, Output: filepath.Join(dir, "out", "hosts.json")}
}

var want = []bpav1.HostStatus{
	{Name: "master", Roles: []string{"master"}, MAC: "00:c6:14:04:61:b2", IP: "10.213.1.11", BareMetalHost: "node-01", Etcd: true},
	{Name: "worker-1", Roles: []string{"worker"}, MAC: "00:c2:12:03:62:b1", IP: "10.213.1.12", BareMetalHost: "node-02"},
	{Name: "worker-2", Roles: []string{"worker"}, MAC: "00:c2:12:03:62:b2", IP: "10.213.1.13", BareMetalHost: "node-03"},
}

func TestFromBareMetalHostNICs(t *testing.T) {
	c, o := setup(t, nil)
	got, err := Run(context.Background(), c, o)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestFromLeasesFiles(t *testing.T) {
	for file, format := range map[string]string{"dhcpd.leases": "ISC", "dnsmasq.leases": "Dnsmasq"} {
		t.Run(format, func(t *testing.T) {
			// The NICs have no addresses: the file is the only source.
			c, o := setup(t, func(b *metal3v1.BareMetalHost) { b.Status.HardwareDetails.NIC[0].IP = "" })
			o.LeasesFile, o.Format = filepath.Join("../../../examples/leases", file), format
			got, err := Run(context.Background(), c, o)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestMissingLeasesFailForARetry(t *testing.T) {
	c, o := setup(t, func(b *metal3v1.BareMetalHost) {
		if b.Name != "node-02" {
			b.Status.HardwareDetails.NIC[0].IP = ""
		}
	})
	_, err := Run(context.Background(), c, o)
	var missing *leases.MissingError
	require.ErrorAs(t, err, &missing)
	assert.Equal(t, []string{"00:c2:12:03:62:b2", "00:c6:14:04:61:b2"}, missing.MACs())
	assert.EqualError(t, err, "no current lease for 2 MAC(s): 00:c2:12:03:62:b2 (node worker-2, BareMetalHost node-03), "+
		"00:c6:14:04:61:b2 (node master, BareMetalHost node-01) on the BareMetalHosts' NICs (status.hardware.nics[].ip); "+
		"retrying, DHCP may not have answered yet")

	// That file's leases ended in 2021: at the default --now none of them is current.
	c, o = setup(t, nil)
	o.LeasesFile, o.Format = "../../leases/testdata/dhcpd.leases", "isc"
	_, err = Run(context.Background(), c, o)
	require.ErrorAs(t, err, &missing)
	assert.Len(t, missing.MACs(), 3)
	o.Now = time.Date(2021, 3, 2, 10, 0, 0, 0, time.UTC)
	_, err = Run(context.Background(), c, o)
	require.ErrorAs(t, err, &missing)
	assert.Len(t, missing.MACs(), 3, "and the example hosts are not in that file")
}

func TestOptionErrors(t *testing.T) {
	c, o := setup(t, nil)
	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"file without format": {func(o *Options) { o.LeasesFile = "x" }, "--leases-file and --format go together"},
		"format without file": {func(o *Options) { o.Format = "isc" }, "--leases-file and --format go together"},
		"bad format":          {func(o *Options) { o.LeasesFile, o.Format = "../../../examples/leases/dhcpd.leases", "BareMetalHost" }, `unknown leases format "BareMetalHost"`},
		"missing file":        {func(o *Options) { o.LeasesFile, o.Format = "/nonexistent", "isc" }, "open /nonexistent"},
		"garbage file":        {func(o *Options) { o.LeasesFile, o.Format = "../../../examples/leases/dhcpd.leases", "dnsmasq" }, "../../../examples/leases/dhcpd.leases: line 1: want"},
		"changed CR":          {func(o *Options) { o.CR.Generation = 7 }, "changed since this run started (generation 7, now 1)"},
		"no hosts file":       {func(o *Options) { o.HostsFile = "/nonexistent" }, "reading hosts: open /nonexistent"},
	} {
		t.Run(name, func(t *testing.T) {
			o := o
			tc.mutate(&o)
			_, err := Run(context.Background(), c, o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCommandFlags(t *testing.T) {
	cmd := Command()
	require.NoError(t, cmd.ParseFlags([]string{"--namespace=n", "--provisioning=p", "--generation=2", "--leases-file=/var/lib/bpa/leases/leases", "--format=ISC"}))
	for flag, want := range map[string]string{"hosts-file": stepio.In(stepio.HostsFile), "output": stepio.Out(stepio.HostsFile), "format": "ISC", "leases-file": "/var/lib/bpa/leases/leases"} {
		assert.Equal(t, want, cmd.Flag(flag).Value.String(), flag)
	}
}
