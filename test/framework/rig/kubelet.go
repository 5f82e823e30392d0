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
	der, key, err := r.ca.issue(KubeletClientCN, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return err
	}
	return writeCertAndKey(r.file(kubeletClientCert), r.file(kubeletClientKey), der, key)
}

// KubeletTLSConfig is the server side of a kubelet API on 127.0.0.1 (test/kubelet serves
// containerLogs with it): a serving certificate the apiservers verify, and only clients with
// a certificate of the rig's CA (the apiservers') are let in, as a kubelet with
// --client-ca-file does.
func (r *Rig) KubeletTLSConfig() (*tls.Config, error) {
	der, key, err := r.ca.issue("simulated-kubelet", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(r.ca.cert)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}
