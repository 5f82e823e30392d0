package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeasesICN: an isc-dhcp file as ICN's e2e run left it (header, byte-order entry, one
// block per lease), read while its leases ran and after they ended.
func TestLeasesICN(t *testing.T) {
	out, _, err := bpa(t, "leases", "-o", "json", "-f", expiredLeases, "--now", leaseTime)
	require.NoError(t, err)
	assert.Equal(t, `[
  {
    "mac": "52:54:0a:40:00:01",
    "ip": "10.20.0.31",
    "hostname": "edge-m1",
    "expires": "2021-03-02T10:15:00Z"
  },
  {
    "mac": "52:54:0a:40:00:02",
    "ip": "10.20.0.32",
    "hostname": "edge-w1",
    "expires": "2021-03-02T10:15:00Z"
  },
  {
    "mac": "52:54:0a:40:00:03",
    "ip": "10.20.0.33",
    "hostname": "edge-w2",
    "expires": "2021-03-02T10:15:00Z"
  }
]
`, out)

	// The leases ended in 2021: today there are none, and that is not an error.
	out, _, err = bpa(t, "leases", "-o", "json", "-f", expiredLeases)
	require.NoError(t, err)
	assert.Equal(t, "[]\n", out)
}

// TestLeasesTricky: superseded, freed, expired, abandoned, reused and `ends never` leases,
// IPv6 blocks, tabs and upper-case MACs, as the verb prints them.
func TestLeasesTricky(t *testing.T) {
	out, _, err := bpa(t, "leases", "-o", "json", "-f", trickyLeases, "--format", "ISC", "--now", "2019-08-08T22:30:00+00:00")
	require.NoError(t, err)
	assert.JSONEq(t, `[
		{"mac": "52:54:00:00:00:01", "ip": "10.0.0.11", "hostname": "superseded", "expires": null},
		{"mac": "52:54:00:00:00:06", "ip": "10.0.0.60", "hostname": "forever", "expires": null},
		{"mac": "52:54:00:00:00:09", "ip": "10.0.0.80", "hostname": "", "expires": null},
		{"mac": "52:54:00:00:00:0a", "ip": "10.0.0.100", "hostname": "", "expires": "2030-01-01T00:00:00Z"},
		{"mac": "52:54:00:00:00:0c", "ip": "10.0.0.120", "hostname": "", "expires": null},
		{"mac": "52:54:00:ab:cd:07", "ip": "10.0.0.70", "hostname": "tab\"bed", "expires": "2019-08-09T22:00:00Z"}]`, out)

	out, _, err = bpa(t, "leases", "-o", "json", "-f", "../leases/testdata/tricky.dnsmasq", "--format", "dnsmasq", "--now", "2019-08-08T23:00:00Z")
	require.NoError(t, err)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	var macs []string
	for _, l := range got {
		macs = append(macs, l["mac"].(string))
	}
	assert.Equal(t, []string{"08:00:27:00:ab:c0", "52:54:00:00:00:06", "52:54:00:00:00:0f", "52:54:00:ab:cd:07"}, macs, "sorted, lower case, IPv6 and duid lines skipped")
}

func TestLeasesErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"missing file": {[]string{"leases", "-f", "nope.leases"}, exitFailed, "open nope.leases"},
		"bad now":      {[]string{"leases", "-f", trickyLeases, "--now", "2019-08-08"}, exitFailed, `--now "2019-08-08": want an RFC 3339 time`},
		"bad format":   {[]string{"leases", "-f", trickyLeases, "--format", "json"}, exitFailed, `--format: unknown leases format "json": want isc or dnsmasq`},
		"not ISC":      {[]string{"leases", "-f", "../leases/testdata/tricky.dnsmasq"}, exitRefused, "tricky.dnsmasq: line 9: file ends inside the statement begun at line 1 (no ';'): is this a dhcpd.leases file?"},
		"not dnsmasq":  {[]string{"leases", "-f", trickyLeases, "--format", "dnsmasq"}, exitRefused, "tricky.leases: line 1: want `<expiry> <mac> <ip> <hostname> <client-id>`"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := bpa(t, tc.args...)
			requireExit(t, err, tc.code, tc.want)
		})
	}
}
