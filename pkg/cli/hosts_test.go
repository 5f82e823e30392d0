package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Paths of the inputs the offline verbs are tested on.
const (
	examples      = "../../examples/"
	hostsTestdata = "testdata/hosts/"
	trickyLeases  = "../leases/testdata/tricky.leases"
	// An isc-dhcp file whose three leases ran 2021-03-02 09:15 to 10:15 UTC.
	expiredLeases = "../leases/testdata/dhcpd.leases"
	leaseTime     = "2021-03-02T10:00:00Z"
	inspectedHost = "../hostmatch/testdata/inspected-host.yaml"
)

// bpa runs the command tree in-process, as `bpa ARGS...`.
func bpa(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// requireExit1 checks a refusal: exit status 1 and a message containing want.
func requireExit1(t *testing.T, err error, want string) {
	t.Helper()
	requireExit(t, err, exitRefused, want)
}

// requireExit2 checks a failure that is no refusal (a bad flag, a missing file): exit
// status 2 and a message containing want.
func requireExit2(t *testing.T, err error, want string) {
	t.Helper()
	requireExit(t, err, exitFailed, want)
}

func requireExit(t *testing.T, err error, code int, want string) {
	t.Helper()
	require.Error(t, err)
	var stderr bytes.Buffer
	assert.Equal(t, code, report(&stderr, err), "exit status of %v", err)
	assert.Contains(t, stderr.String(), want)
}

func hostsJSON(t *testing.T, out string) []bpav1.HostStatus {
	t.Helper()
	var hosts []bpav1.HostStatus
	require.NoError(t, json.Unmarshal([]byte(out), &hosts), out)
	return hosts
}

// TestHostsICNE2E: the shape of ICN's e2e run: a master by a MAC whose NIC records no
// address, its IP in an isc-dhcp file whose leases have long ended.
func TestHostsICNE2E(t *testing.T) {
	args := []string{"hosts", "-o", "json", "-f", hostsTestdata + "lease-provisioning.yaml", "--bmh", inspectedHost}
	out, _, err := bpa(t, append(args, "--leases", expiredLeases, "--now", leaseTime)...)
	require.NoError(t, err)
	assert.JSONEq(t, `[{"name": "edge-m1", "roles": ["master", "worker"], "etcd": true, "mac": "52:54:0a:40:00:01",
		"bareMetalHost": "edge-host-1", "ip": "10.20.0.31"}]`, out)

	// After the leases ended there is no address.
	_, _, err = bpa(t, append(args, "--leases", expiredLeases)...)
	requireExit1(t, err, "no current lease for 1 MAC(s): 52:54:0a:40:00:01 (node edge-m1, BareMetalHost edge-host-1) in "+expiredLeases+" at ")

	// The host's own NICs record no address for that MAC (only eth0 has one).
	_, _, err = bpa(t, args...)
	requireExit1(t, err, "no current lease for 1 MAC(s): 52:54:0a:40:00:01 (node edge-m1, BareMetalHost edge-host-1) in the BareMetalHosts' NICs")
}

// TestHostsMalformedICNHost: a BareMetalHost dump with its status under spec (as ICN's e2e
// host file has it) is refused, naming the misplaced fields.
func TestHostsMalformedICNHost(t *testing.T) {
	_, _, err := bpa(t, "hosts", "-f", examples+"provisioning-by-mac.yaml", "--bmh", "../hostmatch/testdata/status-under-spec.yaml")
	requireExit1(t, err, `status-under-spec.yaml: BareMetalHost edge-host-2: unknown field "spec.status", `)
	assert.Contains(t, err.Error(), `unknown field "spec.userData.spec"`)
}

// TestHostsICNSampleWithMissingLeases: four nodes, leases for two of them (as for ICN's
// four-node sample): the error names both missing MACs, their nodes and hosts.
func TestHostsICNSampleWithMissingLeases(t *testing.T) {
	_, _, err := bpa(t, "hosts", "-f", hostsTestdata+"four-nodes-provisioning.yaml", "--bmh", hostsTestdata+"four-hosts.yaml",
		"--leases", expiredLeases, "--now", leaseTime)
	requireExit1(t, err, "no current lease for 2 MAC(s): 52:54:0a:40:00:04 (node master-1, BareMetalHost edge-1), "+
		"52:54:0a:40:00:05 (node master-2, BareMetalHost edge-2) in "+expiredLeases+" at "+leaseTime)
}

func TestHostsTrickyLeases(t *testing.T) {
	out, _, err := bpa(t, "hosts", "-o", "json", "-f", hostsTestdata+"tricky-provisioning.yaml", "--bmh", hostsTestdata+"tricky-hosts.yaml",
		"--leases", trickyLeases, "--format", "isc", "--now", "2019-08-08T22:30:00Z")
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"name": "master-1", "roles": ["master", "worker"], "mac": "52:54:00:00:00:01", "bareMetalHost": "t-01", "ip": "10.0.0.11", "etcd": true},
		{"name": "worker-1", "roles": ["worker"], "mac": "52:54:00:ab:cd:07", "bareMetalHost": "t-07", "ip": "10.0.0.70"},
		{"name": "worker-2", "roles": ["worker"], "mac": "52:54:00:00:00:06", "bareMetalHost": "t-06", "ip": "10.0.0.60"}]`, out)

	_, _, err = bpa(t, "hosts", "-f", hostsTestdata+"tricky-freed-provisioning.yaml", "--bmh", hostsTestdata+"tricky-hosts.yaml",
		"--leases", trickyLeases, "--now", "2019-08-08T22:30:00Z")
	requireExit1(t, err, "no current lease for 4 MAC(s): 52:54:00:00:00:02 (node freed, BareMetalHost t-02), "+
		"52:54:00:00:00:03 (node expired, BareMetalHost t-03), 52:54:00:00:00:04 (node abandoned, BareMetalHost t-04), "+
		"52:54:00:00:00:08 (node reused, BareMetalHost t-08)")
}

// TestHostsExamples: every example resolves, and the leases file and the NICs agree.
func TestHostsExamples(t *testing.T) {
	for _, name := range []string{"provisioning-by-mac", "provisioning-by-resources", "provisioning-mac-and-resources", "provisioning-kud-plugins"} {
		t.Run(name, func(t *testing.T) {
			args := []string{"hosts", "-o", "json", "-f", examples + name + ".yaml", "--bmh", examples + "bmh/" + name + ".yaml"}
			fromNICs, _, err := bpa(t, args...)
			require.NoError(t, err)
			for _, l := range [][]string{{"--leases", examples + "leases/dhcpd.leases"}, {"--leases", examples + "leases/dnsmasq.leases", "--format", "dnsmasq"}} {
				fromLeases, _, err := bpa(t, append(args, l...)...)
				require.NoError(t, err)
				assert.Equal(t, fromNICs, fromLeases, l)
			}
			for _, h := range hostsJSON(t, fromNICs) {
				assert.Regexp(t, `^10\.213\.1\.1[1-9]$`, h.IP)
			}
		})
	}
}

// TestHostsFirstFitTrap: the by-resources example lists its biggest host first; first-fit
// would give it to the master and leave worker-2 (SR-IOV and QAT) without a host.
func TestHostsFirstFitTrap(t *testing.T) {
	out, _, err := bpa(t, "hosts", "-o", "json", "-f", examples+"provisioning-by-resources.yaml", "--bmh", examples+"bmh/provisioning-by-resources.yaml")
	require.NoError(t, err)
	assert.Equal(t, `[
  {
    "name": "master-1",
    "roles": [
      "master"
    ],
    "mac": "52:54:00:00:00:08",
    "ip": "10.213.1.18",
    "bareMetalHost": "node-08",
    "etcd": true
  },
  {
    "name": "worker-1",
    "roles": [
      "worker"
    ],
    "mac": "52:54:00:00:00:07",
    "ip": "10.213.1.17",
    "bareMetalHost": "node-07"
  },
  {
    "name": "worker-2",
    "roles": [
      "worker"
    ],
    "mac": "52:54:00:00:00:06",
    "ip": "10.213.1.16",
    "bareMetalHost": "node-06"
  }
]
`, out)
}

func TestHostsErrorStateHosts(t *testing.T) {
	out, _, err := bpa(t, "hosts", "-o", "json", "-f", examples+"provisioning-by-resources.yaml", "--bmh", hostsTestdata+"error-hosts.yaml")
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"name": "master-1", "roles": ["master"], "mac": "52:54:00:00:10:07", "bareMetalHost": "small", "ip": "10.0.0.7", "etcd": true},
		{"name": "worker-1", "roles": ["worker"], "mac": "52:54:00:00:10:06", "bareMetalHost": "medium", "ip": "10.0.0.6"},
		{"name": "worker-2", "roles": ["worker"], "mac": "52:54:00:00:10:05", "bareMetalHost": "big-sriov-qat", "ip": "10.0.0.5"}]`, out)

	// With only the unusable hosts and one more, no assignment exists.
	_, _, err = bpa(t, "hosts", "-f", examples+"provisioning-by-mac.yaml", "--bmh", hostsTestdata+"error-hosts.yaml")
	requireExit1(t, err, "Provisioning provisioning-sample: node master: no BareMetalHost has a NIC with MAC 00:c6:14:04:61:b2")
	_, _, err = bpa(t, "hosts", "-f", examples+"provisioning-by-resources.yaml", "--bmh", examples+"bmh/provisioning-mac-and-resources.yaml")
	requireExit1(t, err, "Provisioning provisioning-by-resources: no assignment of BareMetalHosts satisfies every node: node worker-2 "+
		"(cpu ≥ 20, memory ≥ 8Gi, sriov, qat, roles worker): none of the 3 BareMetalHosts qualifies (2 too few CPUs; 1 without the sriov label)")
}

func TestHostsInputErrors(t *testing.T) {
	byMac := []string{"hosts", "-f", examples + "provisioning-by-mac.yaml", "--bmh", examples + "bmh/provisioning-by-mac.yaml"}
	// Exit status 1: the input was read and refused; 2: the verb could not judge it.
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"format without leases": {append(byMac, "--format", "dnsmasq"), exitFailed, "--format applies to a --leases file"},
		"bad now":               {append(byMac, "--leases", trickyLeases, "--now", "yesterday"), exitFailed, `--now "yesterday": want an RFC 3339 time`},
		"bad format":            {append(byMac, "--leases", trickyLeases, "--format", "csv"), exitFailed, `--format: unknown leases format "csv"`},
		"bad output":            {append(byMac, "-o", "wide"), exitFailed, `invalid argument "wide" for "-o, --output" flag: want text, yaml, json`},
		"wrong format":          {append(byMac, "--leases", trickyLeases, "--format", "dnsmasq"), exitRefused, trickyLeases + ": line 1: want"},
		"no CR file":            {[]string{"hosts", "-f", "nope.yaml", "--bmh", "x"}, exitFailed, "open nope.yaml"},
		"no Provisioning":       {[]string{"hosts", "-f", hostsTestdata + "tricky-hosts.yaml", "--bmh", "x"}, exitRefused, hostsTestdata + "tricky-hosts.yaml: no Provisioning found"},
		"two Provisionings":     {[]string{"hosts", "-f", hostsTestdata + "two-provisionings.yaml", "--bmh", "x"}, exitRefused, "holds 2 Provisionings (one, two); give a file with one"},
		"no BMH file":           {[]string{"hosts", "-f", examples + "provisioning-by-mac.yaml", "--bmh", "nope.yaml"}, exitFailed, "open nope.yaml"},
		"BMH file of CRs":       {[]string{"hosts", "-f", examples + "provisioning-by-mac.yaml", "--bmh", examples + "provisioning-by-mac.yaml"}, exitRefused, "no BareMetalHost found"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := bpa(t, tc.args...)
			requireExit(t, err, tc.code, tc.want)
		})
	}
	// Required flags are cobra's errors.
	_, _, err := bpa(t, "hosts", "-f", examples+"provisioning-by-mac.yaml")
	assert.ErrorContains(t, err, `required flag(s) "bmh" not set`)
}

func TestHostsRefusesAnInvalidCR(t *testing.T) {
	_, stderr, err := bpa(t, "hosts", "-f", hostsTestdata+"bad-mac-provisioning.yaml", "--bmh", examples+"bmh/provisioning-by-mac.yaml")
	requireExit1(t, err, "problem(s) in "+hostsTestdata+"bad-mac-provisioning.yaml")
	assert.Contains(t, stderr, "Provisioning/bad-mac: spec.masters[0].master-1.mac-address")
}
