// Package nodetrusttest makes artifact-server CAs for tests: name-constrained ones, as a
// BPAPolicy's caBundle must be (nodetrust.CheckScope), and the unconstrained kind BPA
// refuses, with server certificates of any name they sign.
package nodetrusttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// CA is a certificate authority of a test.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, as a BPAPolicy's caBundle holds it.
	PEM []byte
}

// NoDNS is the one DNS name an IP-only CA permits: under .invalid (RFC 6761), which names
// nothing, since a CA that permits no DNS subtree at all may vouch for every name.
const NoDNS = "bpa-artifacts.invalid"

// NewCA makes a CA whose name constraints permit the DNS subtrees dns and the IP addresses
// ips (each alone: /32 or /128) and nothing else: with no ips every IP address is excluded,
// with no dns only NoDNS is permitted.
func NewCA(t testing.TB, dns []string, ips ...net.IP) *CA {
	t.Helper()
	tmpl := caTemplate("BPA test artifact server CA")
	tmpl.PermittedDNSDomainsCritical = true
	tmpl.PermittedDNSDomains = dns
	if len(dns) == 0 {
		tmpl.PermittedDNSDomains = []string{NoDNS}
	}
	for _, ip := range ips {
		bits := 8 * len(ip)
		if v4 := ip.To4(); v4 != nil {
			ip, bits = v4, 32
		}
		tmpl.PermittedIPRanges = append(tmpl.PermittedIPRanges, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
	}
	if len(ips) == 0 {
		tmpl.ExcludedIPRanges = []*net.IPNet{{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}}
	}
	return selfSigned(t, tmpl)
}

// Unconstrained makes a CA without name constraints: trusted for every name by every program
// that trusts it, what BPA refuses.
func Unconstrained(t testing.TB) *CA {
	t.Helper()
	return selfSigned(t, caTemplate("BPA test unconstrained CA"))
}

// WithTemplate makes a CA from tmpl, as a test shapes it (see CATemplate).
func WithTemplate(t testing.TB, tmpl *x509.Certificate) *CA {
	t.Helper()
	return selfSigned(t, tmpl)
}

// CATemplate is the template of a CA without name constraints, for WithTemplate.
func CATemplate() *x509.Certificate { return caTemplate("BPA test CA") }

func caTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
}

func selfSigned(t testing.TB, tmpl *x509.Certificate) *CA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &CA{Cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Issue signs a server certificate for names (DNS names or IP literals) as subject
// alternative names; with none, a certificate whose only name is the common name cn.
func (ca *CA) Issue(t testing.TB, cn string, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// StartTLS starts ts serving a certificate ca issues for its listener's address (127.0.0.1 unless
// a test moved it), the address its URL names. ts.Client() trusts that certificate.
func (ca *CA) StartTLS(t testing.TB, ts *httptest.Server) {
	t.Helper()
	host, _, err := net.SplitHostPort(ts.Listener.Addr().String())
	if err != nil {
		t.Fatalf("%v", err)
	}
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "", host)}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
}

// NewTLSServer is httptest.NewTLSServer with a certificate from a CA that permits only
// 127.0.0.1, the server's address; it returns the server and that CA (PEM), as a BPAPolicy
// entry for the server's URL holds it.
func NewTLSServer(t testing.TB, h http.Handler) (*httptest.Server, []byte) {
	return NewTLSServerAt(t, h, net.IPv4(127, 0, 0, 1))
}

// NewTLSServerAt is NewTLSServer listening on ip (a test node's address, which its pods
// reach), with a CA that permits only ip.
func NewTLSServerAt(t testing.TB, h http.Handler, ip net.IP) (*httptest.Server, []byte) {
	t.Helper()
	ca := NewCA(t, nil, ip)
	ts := httptest.NewUnstartedServer(h)
	if !ip.IsLoopback() {
		l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			t.Fatalf("listening on %s: %v", ip, err)
		}
		ts.Listener.Close()
		ts.Listener = l
	}
	ca.StartTLS(t, ts)
	return ts, ca.PEM
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}
