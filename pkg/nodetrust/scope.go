package nodetrust

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Why BPA requires name-constrained CAs rather than scoping where the CA is trusted: the CA
// goes into each node's OS trust store because kubespray v2.28's downloads cannot be given
// a CA of their own. roles/download/tasks/download_file.yml, "Download_file | Download item",
// calls get_url with validate_certs and no ca_path, so get_url (Python's ssl, OpenSSL)
// trusts the system store and nothing else; its environment is proxy_env only. containerd's
// hosts.toml (`ca`, per registry) and apt (Acquire::https::<host>::CAInfo) could be scoped,
// but once the CA is in the system store every program on the node trusts it for every name
// it vouches for. X.509 name constraints limit those names where the CA is trusted, for
// every verifier on the node: OpenSSL (curl, Python, Ansible's get_url), GnuTLS (apt, wget)
// and Go (containerd) all honour them in a trust anchor (TestPolicyCAOnRealNode).

// CheckScope checks that certs, a bundle every node adds to its OS trust store, can vouch for
// nothing but names the admin chose, server's host among them. Every certificate becomes a
// trust anchor, so each must carry name constraints that:
//   - permit DNS subtrees, none of them empty or a single label (a top-level domain) other
//     than the server's own host name: without a permitted DNS subtree a CA may vouch for
//     every name;
//   - permit IP ranges (none of them /0), or exclude all of 0.0.0.0/0 and ::/0;
//   - cover server's host, a DNS name or an IP address, which no excluded subtree names.
//
// Other name forms (email, URI) do not identify a TLS server and are not looked at.
func CheckScope(certs []*x509.Certificate, server string) error {
	host, err := serverHost(server)
	if err != nil {
		return err
	}
	var errs []error
	for i, c := range certs {
		if err := checkConstraints(c, host); err != nil {
			errs = append(errs, fmt.Errorf("certificate %d (%s): %w", i+1, describe(c), err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; every certificate of the bundle goes into each node's OS trust store, where every program trusts it for every name it vouches for, so each must be a CA with X.509 name constraints that permit only the artifact server's names (e.g. permitted DNS:%s and excluded IP:0.0.0.0/0 and ::/0; see docs/security.md)",
			errors.Join(errs...), host)
	}
	return nil
}

// ParseFor is Parse, then CheckScope for server.
func ParseFor(data []byte, server string) ([]*x509.Certificate, error) {
	certs, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return certs, CheckScope(certs, server)
}

// serverHost is the host of server, an artifact server's https://host[:port] URL, lower case.
func serverHost(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("artifact server %q: not https://host[:port]", server)
	}
	return strings.ToLower(u.Hostname()), nil
}

func checkConstraints(c *x509.Certificate, host string) error {
	if !hasNameConstraints(c) {
		return errors.New("no X.509 name constraints: it may vouch for any name")
	}
	var problems []string
	if len(c.PermittedDNSDomains) == 0 {
		problems = append(problems, "permit no DNS subtree, so every DNS name")
	}
	for _, d := range c.PermittedDNSDomains {
		if base := strings.TrimPrefix(d, "."); !strings.Contains(base, ".") && !strings.EqualFold(d, host) {
			problems = append(problems, fmt.Sprintf("permit the DNS subtree %q, a whole top-level domain or every name", d))
		}
	}
	for _, r := range c.PermittedIPRanges {
		if ones, _ := r.Mask.Size(); ones == 0 {
			problems = append(problems, "permit the IP range "+r.String()+", every address")
		}
	}
	if len(c.PermittedIPRanges) == 0 && !(excludesAll(c.ExcludedIPRanges, 32) && excludesAll(c.ExcludedIPRanges, 128)) {
		problems = append(problems, "neither permit IP ranges nor exclude 0.0.0.0/0 and ::/0, so every IP address")
	}
	if !covers(c, host) {
		problems = append(problems, fmt.Sprintf("do not permit the artifact server's host %s", host))
	}
	if len(problems) > 0 {
		return errors.New("its name constraints " + strings.Join(problems, "; "))
	}
	return nil
}

// hasNameConstraints says whether c carries the extension at all (id-ce-nameConstraints,
// 2.5.29.30): Go leaves every list empty both without it and with an empty one.
func hasNameConstraints(c *x509.Certificate) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal([]int{2, 5, 29, 30}) {
			return true
		}
	}
	return false
}

// excludesAll says whether ranges hold the /0 of the family whose addresses have bits bits.
func excludesAll(ranges []*net.IPNet, bits int) bool {
	for _, r := range ranges {
		if ones, b := r.Mask.Size(); ones == 0 && b == bits {
			return true
		}
	}
	return false
}

// covers says whether c's constraints let it vouch for host, as RFC 5280 reads them (and Go,
// OpenSSL and GnuTLS do): a DNS subtree "example.org" is that name and every name under it,
// ".example.org" only the names under it.
func covers(c *x509.Certificate, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return inRanges(c.PermittedIPRanges, ip) && !inRanges(c.ExcludedIPRanges, ip)
	}
	return inDomains(c.PermittedDNSDomains, host) && !inDomains(c.ExcludedDNSDomains, host)
}

func inRanges(ranges []*net.IPNet, ip net.IP) bool {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	for _, r := range ranges {
		if len(r.IP) == len(ip) && r.Contains(ip) {
			return true
		}
	}
	return false
}

func inDomains(domains []string, host string) bool {
	for _, d := range domains {
		d = strings.ToLower(d)
		if strings.HasPrefix(d, ".") {
			if strings.HasSuffix(host, d) {
				return true
			}
		} else if host == d || strings.HasSuffix(host, "."+d) {
			return true
		}
	}
	return false
}

// describe names c in messages by its subject, as the admin who made it knows it.
func describe(c *x509.Certificate) string {
	if s := c.Subject.String(); s != "" {
		return s
	}
	return "serial " + c.SerialNumber.String()
}
