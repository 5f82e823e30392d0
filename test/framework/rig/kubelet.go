package rig

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
)

// Files in Dir for the apiservers' connections to kubelets.
const (
	caFile            = "ca.crt"
	kubeletClientCert = "kubelet-client.crt"
	kubeletClientKey  = "kubelet-client.key"
)

// KubeletClientCN is the identity the rig's apiservers present to a kubelet.
const KubeletClientCN = "kube-apiserver-kubelet-client"

func (r *Rig) file(name string) string { return filepath.Join(r.Dir, name) }

// writeKubeletClientFiles writes the CA that verifies kubelets' serving certificates and the
// client certificate the apiservers present to them (for pods/log, exec, port-forward).
func (r *Rig) writeKubeletClientFiles() error {
	if err := os.WriteFile(r.file(caFile), r.ca.pem, 0o644); err != nil {
		return err
	}
	der, key, err := r.ca.issue(KubeletClientCN, x509.ExtKeyUsageClientAuth, nil, apiServerNames...)
	if err != nil {
		return err
	}
	return writeCertAndKey(r.file(kubeletClientCert), r.file(kubeletClientKey), der, key)
}

// ServingTLSConfig is the server side of a TLS service on 127.0.0.1 that the rig's
// apiservers call (an admission webhook of a test's): a certificate for cn that CAData
// verifies.
func (r *Rig) ServingTLSConfig(cn string) (*tls.Config, error) {
	der, key, err := r.ca.issue(cn, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, apiServerNames...)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}, nil
}
