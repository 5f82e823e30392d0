package hostmatch

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/reference"
)

// TestMalformedICNHost: a host dump with its status indented under spec (the shape of ICN's
// e2e host file). It must be a clear error naming the file, the host and the misplaced
// fields, never a panic and never a host silently without hardware.
func TestMalformedICNHost(t *testing.T) {
	_, err := ReadBareMetalHostsFile("testdata/status-under-spec.yaml")
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "testdata/status-under-spec.yaml: BareMetalHost edge-host-2: "), msg)
	assert.Contains(t, msg, `unknown field "spec.userData.spec"`)
	assert.Contains(t, msg, `unknown field "spec.status"`)
	assert.Contains(t, msg, "status belongs at the top level")
}

// TestReferenceMalformedICNHost: ICN's own file gives the same error.
func TestReferenceMalformedICNHost(t *testing.T) {
	_, err := ReadBareMetalHostsFile(reference.Path(t, "icn", "e2e", "bmh-bpa-test.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `BareMetalHost bpa-test-bmh: unknown field "spec.status"`)
	assert.Contains(t, err.Error(), `unknown field "spec.userData.spec"`)
	assert.Contains(t, err.Error(), "status belongs at the top level")
}

func TestInspectedHost(t *testing.T) {
	hosts, err := ReadBareMetalHostsFile("testdata/inspected-host.yaml")
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	h := hosts[0]
	assert.Equal(t, "edge-host-1", h.Name)
	assert.Equal(t, 48, h.Status.HardwareDetails.CPU.Count)
	assert.Equal(t, 196608, h.Status.HardwareDetails.RAMMebibytes)
	assert.Len(t, h.Status.HardwareDetails.NIC, 4)

	// A master is on it by the MAC of a NIC other than the boot one.
	got, err := MatchSpec(spec(t, "masters: [{edge-m1: {mac-address: 52:54:0A:40:00:01, cpu: 32, memory: 128Gi}}]"), nil, nil, Claimant{Cluster: "c"}, hosts)
	require.NoError(t, err)
	assert.Equal(t, "edge-m1=edge-host-1", assignment(got))
}

const host1 = `apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata: {name: host-1}
spec: {bootMACAddress: "00:00:00:00:00:01"}
`

func decode(t *testing.T, y string) ([]string, error) {
	t.Helper()
	hosts, err := DecodeBareMetalHosts("hosts.yaml", strings.NewReader(y))
	var names []string
	for _, h := range hosts {
		names = append(names, h.Name)
	}
	return names, err
}

func TestDecodeForms(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want []string
	}{
		"one host":      {host1, []string{"host-1"}},
		"multi-doc":     {"---\n# comment\n" + host1 + "---\n" + strings.ReplaceAll(host1, "host-1", "host-2") + "---\n", []string{"host-1", "host-2"}},
		"with a Secret": {"apiVersion: v1\nkind: Secret\nmetadata: {name: bmc}\nstringData: {username: admin}\n---\n" + host1, []string{"host-1"}},
		"BareMetalHostList": {`apiVersion: metal3.io/v1alpha1
kind: BareMetalHostList
metadata: {}
items:
  - metadata: {name: a}
    spec: {online: true, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}
    status: {provisioning: {state: provisioned, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}}
  - apiVersion: metal3.io/v1alpha1
    kind: BareMetalHost
    metadata: {name: b}
`, []string{"a", "b"}},
		"List": {`apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Secret
    metadata: {name: bmc}
  - apiVersion: metal3.io/v1alpha1
    kind: BareMetalHost
    metadata: {name: b}
`, []string{"b"}},
		"JSON": {`{"apiVersion": "metal3.io/v1alpha1", "kind": "BareMetalHostList", "items": [{"metadata": {"name": "j"}}]}`, []string{"j"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decode(t, tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"empty":          {"", "hosts.yaml: no BareMetalHost found"},
		"only a Secret":  {"apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n", "hosts.yaml: no BareMetalHost found"},
		"no kind":        {"metadata: {name: x}\n", "hosts.yaml: document 1: no kind"},
		"not an object":  {"- a\n- b\n", "hosts.yaml: document 1: not an object"},
		"wrong group":    {strings.Replace(host1, "metal3.io/v1alpha1", "example.com/v1", 1), `hosts.yaml: BareMetalHost host-1: apiVersion "example.com/v1": want metal3.io/v1alpha1`},
		"duplicate key":  {host1 + "spec: {}\n", `hosts.yaml: document 1: yaml: unmarshal errors: line 5: key "spec" already set in map`},
		"unknown field":  {host1 + "status: {hardware: {cpus: 4}}\n", `hosts.yaml: BareMetalHost host-1: unknown field "status.hardware.cpus"`},
		"wrong type":     {host1 + "status: {hardware: {cpu: {count: four}}}\n", `hosts.yaml: BareMetalHost host-1: json: cannot unmarshal string`},
		"no name":        {"apiVersion: metal3.io/v1alpha1\nkind: BareMetalHost\nspec: {}\n", "hosts.yaml: document 1: BareMetalHost without metadata.name"},
		"bad YAML":       {"kind: [\n", "hosts.yaml: document 1:"},
		"item unknown":   {"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: metal3.io/v1alpha1, kind: BareMetalHost, metadata: {name: z}, spec: {bogus: 1}}\n", `hosts.yaml: BareMetalHost z: unknown field "spec.bogus"`},
		"list unknown":   {"apiVersion: v1\nkind: List\nbogus: 1\nitems: []\n", `hosts.yaml: document 1: List: unknown field "bogus"`},
		"item not a map": {"apiVersion: v1\nkind: List\nitems: [3]\n", "hosts.yaml: document 1: items[0]: not an object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decode(t, tc.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// FuzzDecodeBareMetalHosts: no input panics the decoder, and whatever it accepts has names
// and is safe to match against.
//
// The seeds are small on purpose: with the 280-line ICN host as a seed, Go's coverage-guided
// fuzzer spends seconds per input and barely runs (the unit tests above cover that file).
// smallICNShape keeps its defining fault, status indented under spec.userData.
func FuzzDecodeBareMetalHosts(f *testing.F) {
	const smallICNShape = `apiVersion: metal3.io/v1alpha1
kind: BareMetalHost
metadata:
  name: bpa-test-bmh
spec:
  online: true
  userData:
    name: demo-user-data
    namespace: metal3
    spec:
    bootMACAddress: "3c:fd:fe:9c:88:63"
  status:
    errorMessage: ""
    hardware:
      cpu: {arch: x86_64, count: 72}
      nics:
      - {ip: "", mac: "08:00:27:00:ab:c0", name: eth3}
      ramMebibytes: 262144
    operationalStatus: OK
`
	const list = `apiVersion: v1
kind: List
items:
- apiVersion: metal3.io/v1alpha1
  kind: BareMetalHost
  metadata: {name: a, labels: {feature.bpa.akraino.org/sriov: "true"}}
  spec: {bootMACAddress: "00:00:00:00:00:01"}
  status:
    operationalStatus: OK
    errorMessage: ""
    hardware: {cpu: {count: 8}, ramMebibytes: 8192, nics: [{mac: "00:00:00:00:00:01", ip: 127.0.1.1}]}
- apiVersion: v1
  kind: Secret
  metadata: {name: bmc}
`
	for _, s := range []string{host1, smallICNShape, strings.Replace(smallICNShape, "\n  status:", "\nstatus:", 1), list,
		"---\n" + host1 + "---\n" + host1, `{"kind": "BareMetalHostList", "items": [{"metadata": {"name": "j"}}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		hosts, err := DecodeBareMetalHosts("fuzz.yaml", bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, h := range hosts {
			if h.Name == "" {
				t.Fatal("accepted a host without a name")
			}
		}
		_, _ = MatchSpec(fuzzSpec, nil, nil, Claimant{Cluster: "c"}, hosts)
	})
}

var fuzzSpec = &bpav1.ProvisioningSpec{Masters: []bpav1.NodeEntry{{"m": nil}}}
