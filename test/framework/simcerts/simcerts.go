// Package simcerts mints the certificate files kubeadm and kubespray leave on a node, at
// their paths, for the stand-in kubespray's agent and for tests: a control-plane node gets
// kubeadm's CAs and leaf certificates, each with its key, under /etc/kubernetes/ssl
// (kubespray's kube_cert_dir), every node the kubelet's client certificate, bundled with its
// key as the kubelet writes it. The CAs last ten years, as kubeadm's do; the leaves last the
// validity asked (kubeadm: a year), so a test can mint ones that expire soon. Renew re-signs
// the leaves as `kubeadm certs renew all` does.
package simcerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// EnvValidity names the environment variable the stand-in kubespray reads the leaves'
// validity from (a Go duration); DefaultValidity applies when it is empty.
const EnvValidity = "BPA_SIM_CERT_VALIDITY"

// DefaultValidity is kubeadm's for its leaf certificates.
const DefaultValidity = 365 * 24 * time.Hour

// caValidity is kubeadm's for its CAs.
const caValidity = 10 * 365 * 24 * time.Hour

// KubeletClient is where the kubelet keeps its rotated client certificate and key.
const KubeletClient = "/var/lib/kubelet/pki/kubelet-client-current.pem"

// CertDir is kubespray's kube_cert_dir, kubeadm's certificatesDir.
const CertDir = "/etc/kubernetes/ssl"

// leaf is one of kubeadm's leaf certificates under CertDir (name.crt, name.key), signed by
// the CA ca (ca.crt, ca.key).
type leaf struct {
	name, cn, ca string
	usage        x509.ExtKeyUsage
}

// leaves are the leaf certificates of kubeadm's certs phase that `kubeadm certs renew all`
// renews under CertDir (etcd's are kubespray's, not kubeadm's: etcd_deployment_type host).
var leaves = []leaf{
	{"apiserver", "kube-apiserver", "ca", x509.ExtKeyUsageServerAuth},
	{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "ca", x509.ExtKeyUsageClientAuth},
	{"front-proxy-client", "front-proxy-client", "front-proxy-ca", x509.ExtKeyUsageClientAuth},
}

// apiserverSANs are what the API server's certificate holds of kubespray's apiserver_sans
// (roles/kubernetes/control-plane/tasks/kubeadm-setup.yml: 127.0.0.1 and localhost among
// them) besides the node's name, which the served certificate must hold to verify on the
// node's own 127.0.0.1.
func apiserverSANs(node string) ([]string, []net.IP) {
	return []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost", node}, []net.IP{net.IPv4(127, 0, 0, 1)}
}

// Files are the files of node, by path: kubeadm's control-plane certificates and keys when
// controlPlane, and the kubelet's client certificate, the leaves valid from now for validity.
func Files(node string, controlPlane bool, validity time.Duration, now time.Time) (map[string][]byte, error) {
	out := map[string][]byte{}
	ca, caKey, err := mint(template{cn: "kubernetes", isCA: true}, now, caValidity, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	if controlPlane {
		front, frontKey, err := mint(template{cn: "front-proxy-ca", isCA: true}, now, caValidity, nil, nil, nil)
		if err != nil {
			return nil, err
		}
		cas := map[string]issuer{"ca": {ca, caKey}, "front-proxy-ca": {front, frontKey}}
		for name, c := range cas {
			if err := put(out, filepath.Join(CertDir, name), c.cert, c.key); err != nil {
				return nil, err
			}
		}
		for _, l := range leaves {
			c, key, err := mint(l.template(node), now, validity, cas[l.ca].cert, cas[l.ca].key, nil)
			if err != nil {
				return nil, err
			}
			if err := put(out, filepath.Join(CertDir, l.name), c, key); err != nil {
				return nil, err
			}
		}
	}
	c, key, err := mint(template{cn: "system:node:" + node, usage: x509.ExtKeyUsageClientAuth}, now, validity, ca, caKey, nil)
	if err != nil {
		return nil, err
	}
	keyPEM, err := privatePEM(key)
	if err != nil {
		return nil, err
	}
	out[KubeletClient] = append(certPEM(c), keyPEM...)
	return out, nil
}

func (l leaf) template(node string) template {
	t := template{cn: l.cn, usage: l.usage}
	if l.name == "apiserver" {
		t.dns, t.ips = apiserverSANs(node)
	}
	return t
}

type issuer struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// put adds base.crt and base.key to out.
func put(out map[string][]byte, base string, c *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := privatePEM(key)
	if err != nil {
		return err
	}
	out[base+".crt"], out[base+".key"] = certPEM(c), keyPEM
	return nil
}

// Renewed is one certificate Renew re-signed.
type Renewed struct {
	File               string
	NotAfterBefore, To time.Time
}

// Renew does to dir (a control-plane node's CertDir, as the node sees it) what `kubeadm certs
// renew all` does to kubeadm's leaves there: each is signed again by its CA, for validity from
// now, with its own key, subject and names kept; the CAs are not touched. Like kubeadm, it
// fails on a missing folder, CA or key, before it writes anything.
func Renew(dir string, validity time.Duration, now time.Time) ([]Renewed, error) {
	type next struct {
		file string
		data []byte
		r    Renewed
	}
	var todo []next
	for _, l := range leaves {
		ca, err := readIssuer(filepath.Join(dir, l.ca))
		if err != nil {
			return nil, err
		}
		old, err := readIssuer(filepath.Join(dir, l.name))
		if err != nil {
			return nil, err
		}
		t := template{cn: old.cert.Subject.CommonName, dns: old.cert.DNSNames, ips: old.cert.IPAddresses, usage: l.usage}
		c, _, err := mint(t, now, validity, ca.cert, ca.key, old.key)
		if err != nil {
			return nil, err
		}
		file := filepath.Join(dir, l.name+".crt")
		todo = append(todo, next{file, certPEM(c), Renewed{File: file, NotAfterBefore: old.cert.NotAfter, To: c.NotAfter}})
	}
	var done []Renewed
	for _, n := range todo {
		if err := os.WriteFile(n.file, n.data, 0o600); err != nil {
			return done, err
		}
		done = append(done, n.r)
	}
	return done, nil
}

// readIssuer reads base.crt and base.key.
func readIssuer(base string) (issuer, error) {
	certData, err := os.ReadFile(base + ".crt")
	if err != nil {
		return issuer{}, err
	}
	keyData, err := os.ReadFile(base + ".key")
	if err != nil {
		return issuer{}, err
	}
	cb, _ := pem.Decode(certData)
	kb, _ := pem.Decode(keyData)
	if cb == nil || kb == nil {
		return issuer{}, fmt.Errorf("%s.crt or %s.key holds no PEM block", base, base)
	}
	c, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return issuer{}, fmt.Errorf("%s.crt: %w", base, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return issuer{}, fmt.Errorf("%s.key: %w", base, err)
	}
	return issuer{c, key}, nil
}

// template is what a certificate says besides its validity.
type template struct {
	cn    string
	dns   []string
	ips   []net.IP
	usage x509.ExtKeyUsage // 0: none named
	isCA  bool
}

// mint makes a certificate from t valid from now for validity, signed by parent (self-signed
// when parent is nil), for key (a new one when nil), and returns it with its key.
func mint(t template, now time.Time, validity time.Duration, parent *x509.Certificate, parentKey, key crypto.Signer) (*x509.Certificate, crypto.Signer, error) {
	if key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		key = k
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: t.cn}, DNSNames: t.dns, IPAddresses: t.ips,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: t.isCA,
	}
	if t.usage != 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{t.usage}
	}
	if t.isCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return c, key, err
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func privatePEM(key crypto.Signer) ([]byte, error) {
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("simcerts: not an ECDSA key")
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// Expiry is one of kubeadm's leaves under a CertDir, as `kubeadm certs check-expiration`
// lists it.
type Expiry struct {
	Name, CA string
	NotAfter time.Time
}

// Check reads kubeadm's leaves under dir, as `kubeadm certs check-expiration` does; a
// missing one is an error.
func Check(dir string) ([]Expiry, error) {
	var out []Expiry
	for _, l := range leaves {
		c, err := readIssuer(filepath.Join(dir, l.name))
		if err != nil {
			return nil, err
		}
		out = append(out, Expiry{Name: l.name, CA: l.ca, NotAfter: c.cert.NotAfter})
	}
	return out, nil
}
