package rig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// certAuthority signs the serving certificates of the rig's apiservers, so
// clients verify TLS for real instead of skipping verification.
type certAuthority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(cn string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(rigCertValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issueServing writes a serving certificate and key for the given IPs (and
// "localhost") to certFile and keyFile.
func (ca *certAuthority) issueServing(certFile, keyFile string, ips []net.IP) error {
	der, key, err := ca.issue("kube-apiserver", x509.ExtKeyUsageServerAuth, ips, apiServerNames...)
	if err != nil {
		return err
	}
	return writeCertAndKey(certFile, keyFile, der, key)
}

// apiServerNames are the DNS names of an apiserver's serving certificate.
var apiServerNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}

// issue signs a certificate for one use (serving, or client authentication)
// that is valid for ips and dns.
func (ca *certAuthority) issue(cn string, usage x509.ExtKeyUsage, ips []net.IP, dns ...string) ([]byte, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(rigCertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	return der, key, err
}

func writeCertAndKey(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
}

// writeServiceAccountKeys writes the key pair the apiserver signs and checks
// service account tokens with.
func writeServiceAccountKeys(keyFile, pubFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", keyDER); err != nil {
		return err
	}
	return writePEM(pubFile, "PUBLIC KEY", pubDER)
}

// simulatedNodeIPs returns 127.0.0.1 plus 127.0.1.1..127.0.1.254, the
// loopback addresses tests use as "node IPs" of a simulated cluster.
func simulatedNodeIPs() []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1)}
	for i := 1; i <= 254; i++ {
		ips = append(ips, net.IPv4(127, 0, 1, byte(i)))
	}
	return ips
}

// addresses are the host addresses of an IPv4 subnet (neither its network nor its
// broadcast address).
func addresses(subnet *net.IPNet) []net.IP {
	ones, bits := subnet.Mask.Size()
	base := binary.BigEndian.Uint32(subnet.IP.To4())
	var ips []net.IP
	for i := uint32(1); i < 1<<(bits-ones)-1; i++ {
		ip := make(net.IP, net.IPv4len)
		binary.BigEndian.PutUint32(ip, base+i)
		ips = append(ips, ip)
	}
	return ips
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func randomToken() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// rigCertValidity is how long the rig's CAs and certificates last: the application
// apiserver's is the chain verify reads as apiserver-served, and a site's clusters must not
// show CertificatesExpiring for the rig's own certificates (30 days by default).
const rigCertValidity = 2 * 365 * 24 * time.Hour
