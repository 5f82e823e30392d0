package nodetrust_test

import (
	"crypto/x509"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
)

// CheckScope takes a bundle only if each certificate's name constraints permit the server's
// host and nothing the admin did not choose, and says what is wrong with each one that does
// not, numbered as in the bundle.
func TestCheckScope(t *testing.T) {
	loopback := net.IPv4(127, 0, 0, 1)
	shaped := func(shape func(*x509.Certificate)) *nodetrusttest.CA {
		tmpl := nodetrusttest.CATemplate()
		shape(tmpl)
		return nodetrusttest.WithTemplate(t, tmpl)
	}
	allIPs := []*net.IPNet{{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	for name, tc := range map[string]struct {
		ca     *nodetrusttest.CA
		server string
		want   string // "" for accepted
	}{
		"DNS name, IPs excluded":        {nodetrusttest.NewCA(t, []string{"artifacts.site.example"}), "https://artifacts.site.example:8443", ""},
		"a subtree holding the host":    {nodetrusttest.NewCA(t, []string{".bpa-system.svc.cluster.local"}), "https://bpa-artifacts.bpa-system.svc.cluster.local", ""},
		"host in another case":          {nodetrusttest.NewCA(t, []string{"artifacts.site.example"}), "https://Artifacts.Site.Example", ""},
		"an address, with NoDNS":        {nodetrusttest.NewCA(t, nil, loopback), "https://127.0.0.1:8443", ""},
		"a one-label host, exactly":     {nodetrusttest.NewCA(t, []string{"artifacts"}), "https://artifacts:8443", ""},
		"no name constraints":           {nodetrusttest.Unconstrained(t), "https://artifacts.site.example", "no X.509 name constraints: it may vouch for any name"},
		"host outside the DNS subtrees": {nodetrusttest.NewCA(t, []string{"other.site.example"}), "https://artifacts.site.example", "do not permit the artifact server's host artifacts.site.example"},
		"a subtree only below the host": {nodetrusttest.NewCA(t, []string{".artifacts.site.example"}), "https://artifacts.site.example", "do not permit the artifact server's host"},
		"a suffix that is not a parent": {nodetrusttest.NewCA(t, []string{"site.example"}), "https://artifacts.othersite.example", "do not permit the artifact server's host"},
		"an address not permitted":      {nodetrusttest.NewCA(t, nil, net.IPv4(10, 0, 0, 1)), "https://127.0.0.1", "do not permit the artifact server's host 127.0.0.1"},
		"an address when IPs excluded":  {nodetrusttest.NewCA(t, []string{"artifacts.site.example"}), "https://127.0.0.1", "do not permit the artifact server's host 127.0.0.1"},
		"IP addresses unconstrained": {shaped(func(c *x509.Certificate) { c.PermittedDNSDomains = []string{"artifacts.site.example"} }),
			"https://artifacts.site.example", "neither permit IP ranges nor exclude 0.0.0.0/0 and ::/0, so every IP address"},
		"only IPv4 excluded": {shaped(func(c *x509.Certificate) {
			c.PermittedDNSDomains, c.ExcludedIPRanges = []string{"artifacts.site.example"}, allIPs[:1]
		}), "https://artifacts.site.example", "neither permit IP ranges nor exclude"},
		"DNS names unconstrained": {shaped(func(c *x509.Certificate) {
			c.PermittedIPRanges = []*net.IPNet{{IP: loopback.To4(), Mask: net.CIDRMask(32, 32)}}
		}), "https://127.0.0.1", "permit no DNS subtree, so every DNS name"},
		"only excluded DNS names": {shaped(func(c *x509.Certificate) { c.ExcludedDNSDomains, c.ExcludedIPRanges = []string{"example.org"}, allIPs }),
			"https://artifacts.site.example", "permit no DNS subtree, so every DNS name"},
		"a top-level domain": {nodetrusttest.NewCA(t, []string{"example"}), "https://artifacts.example",
			`permit the DNS subtree "example", a whole top-level domain or every name`},
		"a subtree of a top-level domain": {nodetrusttest.NewCA(t, []string{".svc"}), "https://artifacts.svc", `permit the DNS subtree ".svc", a whole top-level domain`},
		"every address": {shaped(func(c *x509.Certificate) {
			c.PermittedDNSDomains, c.PermittedIPRanges = []string{"artifacts.site.example"}, allIPs[:1]
		}), "https://127.0.0.1", "permit the IP range 0.0.0.0/0, every address"},
		"the host excluded": {shaped(func(c *x509.Certificate) {
			c.PermittedDNSDomains, c.ExcludedDNSDomains, c.ExcludedIPRanges = []string{"site.example"}, []string{"artifacts.site.example"}, allIPs
		}), "https://artifacts.site.example", "do not permit the artifact server's host"},
	} {
		t.Run(name, func(t *testing.T) {
			err := nodetrust.CheckScope([]*x509.Certificate{tc.ca.Cert}, tc.server)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "certificate 1 ("+tc.ca.Cert.Subject.String()+"): ")
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "each must be a CA with X.509 name constraints that permit only the artifact server's names")
		})
	}

	// A bundle is as wide as its widest certificate: each is a trust anchor of its own.
	good := nodetrusttest.NewCA(t, []string{"artifacts.site.example"})
	bundle := append(append([]byte{}, good.PEM...), nodetrusttest.Unconstrained(t).PEM...)
	_, err := nodetrust.ParseFor(bundle, "https://artifacts.site.example")
	assert.ErrorContains(t, err, "certificate 2 (CN=BPA test unconstrained CA): no X.509 name constraints")
	assert.NotContains(t, err.Error(), "certificate 1")
	certs, err := nodetrust.ParseFor(good.PEM, "https://artifacts.site.example")
	require.NoError(t, err)
	assert.Len(t, certs, 1)
	_, err = nodetrust.ParseFor(good.PEM, "artifacts.site.example")
	assert.ErrorContains(t, err, "not https://host[:port]")
}
