package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/test/reference"
)

// The offline verbs on ICN's own files (when BPA_REFERENCE_DIR is set): the same outcomes
// as the project's look-alike testdata gives in hosts_test.go and leases_test.go.

// icnHosts are BareMetalHosts for ICN's MACs, in the spellings ICN's files use; their NICs
// record no address.
const icnHosts = `apiVersion: metal3.io/v1alpha1
kind: BareMetalHostList
items:
  - metadata: {name: bpa-test-bmh}
    spec: {online: true, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}, bootMACAddress: "3c:fd:fe:9c:88:63"}
    status: {provisioning: {state: provisioned, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}, operationalStatus: OK, hardware: {cpu: {count: 72}, ramMebibytes: 262144, nics: [{name: eth3, mac: "08:00:27:00:ab:c0"}, {name: eth5, mac: "a4:bf:01:64:86:6f", ip: 172.22.0.54}]}}
  - metadata: {name: icn-1}
    spec: {online: true, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}, bootMACAddress: "00:c6:14:04:61:b2"}
    status: {provisioning: {state: provisioned, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}, operationalStatus: OK, hardware: {cpu: {count: 8}, ramMebibytes: 16384}}
  - metadata: {name: icn-2}
    spec: {online: true, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}, bootMACAddress: "00:C5:12:06:61:B2"}
    status: {provisioning: {state: provisioned, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}, operationalStatus: OK, hardware: {cpu: {count: 8}, ramMebibytes: 16384}}
  - metadata: {name: icn-3}
    spec: {online: true, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}
    status: {provisioning: {state: provisioned, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}, operationalStatus: OK, hardware: {cpu: {count: 8}, ramMebibytes: 16384, nics: [{name: eth0, mac: "00-c4-13-04-62-b5"}]}}
  - metadata: {name: icn-4}
    spec: {online: true, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}
    status: {provisioning: {state: provisioned, image: {url: "http://images.example/ubuntu-22.04.qcow2", checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", checksumType: sha256}}, operationalStatus: OK, hardware: {cpu: {count: 8}, ramMebibytes: 16384, nics: [{name: eth0, mac: "00:c3:11:02:61:b5"}]}}
`

const icnE2EMaster = `apiVersion: bpa.akraino.org/v1alpha1
kind: Provisioning
metadata: {name: icn-e2e, labels: {cluster: icn-e2e}}
spec:
  masters:
    - master-test: {mac-address: 08:00:27:00:AB:C0, cpu: 64, memory: 200Gi}
`

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestReferenceICNLeases(t *testing.T) {
	leases := reference.Path(t, "icn", "e2e", "dhcpd.leases")
	out, _, err := bpa(t, "leases", "-o", "json", "-f", leases, "--now", "2019-08-08T23:00:00Z")
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"mac": "00:c3:11:02:61:b5", "ip": "192.168.50.65", "hostname": "bpa-test-3", "expires": "2019-08-08T23:52:49Z"},
		{"mac": "00:c4:13:04:62:b5", "ip": "192.168.50.64", "hostname": "bpa-test-2", "expires": "2019-08-08T23:52:49Z"},
		{"mac": "08:00:27:00:ab:c0", "ip": "192.168.50.63", "hostname": "master-test", "expires": "2019-08-08T23:52:49Z"}]`, out)
	out, _, err = bpa(t, "leases", "-o", "json", "-f", leases)
	require.NoError(t, err)
	assert.Equal(t, "[]\n", out)
}

func TestReferenceICNHosts(t *testing.T) {
	e2e := reference.Path(t, "icn", "e2e")
	leases := filepath.Join(e2e, "dhcpd.leases")
	hosts := writeTemp(t, "hosts.yaml", icnHosts)

	master := writeTemp(t, "master.yaml", icnE2EMaster)
	out, _, err := bpa(t, "hosts", "-o", "json", "-f", master, "--bmh", hosts, "--leases", leases, "--now", "2019-08-08T23:00:00Z")
	require.NoError(t, err)
	assert.JSONEq(t, `[{"name": "master-test", "roles": ["master", "worker"], "mac": "08:00:27:00:ab:c0",
		"bareMetalHost": "bpa-test-bmh", "ip": "192.168.50.63", "etcd": true}]`, out)
	_, _, err = bpa(t, "hosts", "-f", master, "--bmh", hosts, "--leases", leases)
	requireExit1(t, err, "no current lease for 1 MAC(s): 08:00:27:00:ab:c0 (node master-test, BareMetalHost bpa-test-bmh) in "+leases+" at ")

	_, _, err = bpa(t, "hosts", "-f", examples+"provisioning-by-mac.yaml", "--bmh", filepath.Join(e2e, "bmh-bpa-test.yaml"))
	requireExit1(t, err, `bmh-bpa-test.yaml: BareMetalHost bpa-test-bmh: unknown field "spec.status", `)
	assert.Contains(t, err.Error(), `unknown field "spec.userData.spec"`)

	_, _, err = bpa(t, "hosts", "-f", reference.Path(t, "icn", "provisioning", "bpa_v1alpha1_provisioning_cr_sample_multiple_2.yaml"),
		"--bmh", hosts, "--leases", leases, "--now", "2019-08-08T23:00:00Z")
	requireExit1(t, err, "no current lease for 2 MAC(s): 00:c5:12:06:61:b2 (node master-2, BareMetalHost icn-2), "+
		"00:c6:14:04:61:b2 (node master-1, BareMetalHost icn-1) in "+leases+" at 2019-08-08T23:00:00Z")
}
