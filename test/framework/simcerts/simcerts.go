// Package simcerts mints the certificate files kubeadm and kubespray leave on a node, at
// their paths, for the stand-in kubespray's agent and for tests: a control-plane node gets
// kubeadm's CAs and leaf certificates under /etc/kubernetes/ssl (kubespray's kube_cert_dir),
// every node the kubelet's client certificate, bundled with its key as the kubelet writes
// it. The CAs last ten years, as kubeadm's do; the leaves last the validity asked (kubeadm:
// a year), so a test can mint ones that expire soon.
package simcerts

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
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

// Files are the files of node, by path: kubeadm's control-plane certificates when
// controlPlane, and the kubelet's client certificate, the leaves valid from now for validity.
func Files(node string, controlPlane bool, validity time.Duration, now time.Time) (map[string][]byte, error) {
	out := map[string][]byte{}
	ca, caKey, err := mint("kubernetes", now, caValidity, nil, nil, true)
	if err != nil {
		return nil, err
	}
	if controlPlane {
		front, frontKey, err := mint("front-proxy-ca", now, caValidity, nil, nil, true)
		if err != nil {
			return nil, err
		}
		out["/etc/kubernetes/ssl/ca.crt"] = certPEM(ca)
		out["/etc/kubernetes/ssl/front-proxy-ca.crt"] = certPEM(front)
		for _, l := range []struct {
			file, cn string
			parent   *x509.Certificate
			key      crypto.Signer
		}{
			{"apiserver.crt", "kube-apiserver", ca, caKey},
			{"apiserver-kubelet-client.crt", "kube-apiserver-kubelet-client", ca, caKey},
			{"front-proxy-client.crt", "front-proxy-client", front, frontKey},
		} {
			c, _, err := mint(l.cn, now, validity, l.parent, l.key, false)
			if err != nil {
				return nil, err
			}
			out["/etc/kubernetes/ssl/"+l.file] = certPEM(c)
		}
	}
	c, key, err := mint("system:node:"+node, now, validity, ca, caKey, false)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		return nil, err
	}
	out[KubeletClient] = append(certPEM(c), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...)
	return out, nil
}

// mint makes a certificate for cn valid from now for validity, signed by parent (self-signed
// when parent is nil), and its key.
func mint(cn string, now time.Time, validity time.Duration, parent *x509.Certificate, parentKey crypto.Signer, isCA bool) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity),
		KeyUsage: x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: isCA,
	}
	if isCA {
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
