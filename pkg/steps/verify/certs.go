package verify

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// certFile is a certificate file kubeadm or kubespray (v2.28.0) leaves on a node.
type certFile struct {
	path, component string
}

// Where kubespray puts kubeadm's certificates: kube_cert_dir, /etc/kubernetes/ssl
// (roles/kubespray_defaults/defaults/main/main.yml), which it renders as kubeadm's
// certificatesDir (kubeadm-config.v1beta4.yaml.j2) and links /etc/kubernetes/pki to
// (roles/kubernetes/preinstall/tasks/0050-create_directories.yml). Only ssl is read, so a
// file is not counted twice through the link.
const kubeCertDir = "/etc/kubernetes/ssl"

// etcdCertDir is kubespray's etcd_cert_dir, where roles/etcd/tasks/gen_certs_script.yml
// writes etcd's CA and each host's member-, admin- and node- certificates (etcd_deployment_type
// host, kubespray's default).
const etcdCertDir = "/etc/ssl/etcd/ssl"

// ServedComponent is the component of the chain the API server presents in a TLS handshake.
const ServedComponent = "apiserver-served"

// certFiles are the files verify reads on host name, by component. A node holds only some
// of them (workers: the kubelet's client certificate and etcd's node certificate; etcd's
// own files only with etcd_deployment_type kubeadm): a missing one is not an error. Every
// file is a certificate or a kubeconfig; keys are never read (readCerts filters on the host).
func certFiles(name string) []certFile {
	return []certFile{
		// kubeadm init/join --control-plane (kubeadm's certs phase).
		{kubeCertDir + "/ca.crt", "ca"},
		{kubeCertDir + "/apiserver.crt", "apiserver"},
		{kubeCertDir + "/apiserver-kubelet-client.crt", "apiserver-kubelet-client"},
		{kubeCertDir + "/front-proxy-ca.crt", "front-proxy-ca"},
		{kubeCertDir + "/front-proxy-client.crt", "front-proxy-client"},
		// kubeadm's stacked etcd (etcd_deployment_type kubeadm).
		{kubeCertDir + "/apiserver-etcd-client.crt", "apiserver-etcd-client"},
		{kubeCertDir + "/etcd/ca.crt", "etcd-ca"},
		{kubeCertDir + "/etcd/server.crt", "etcd-server"},
		{kubeCertDir + "/etcd/peer.crt", "etcd-peer"},
		{kubeCertDir + "/etcd/healthcheck-client.crt", "etcd-healthcheck-client"},
		// kubespray's etcd (etcd_deployment_type host).
		{etcdCertDir + "/ca.pem", "etcd-ca"},
		{etcdCertDir + "/member-" + name + ".pem", "etcd-member"},
		{etcdCertDir + "/admin-" + name + ".pem", "etcd-admin"},
		{etcdCertDir + "/node-" + name + ".pem", "etcd-node"},
		// kubeadm's kubeconfig phase: client certificates embedded as client-certificate-data.
		{"/etc/kubernetes/admin.conf", "admin.conf"},
		{"/etc/kubernetes/super-admin.conf", "super-admin.conf"},
		{"/etc/kubernetes/controller-manager.conf", "controller-manager.conf"},
		{"/etc/kubernetes/scheduler.conf", "scheduler.conf"},
		// The kubelet's rotated client certificate (certificate and key in one file), which
		// kubespray points kubelet.conf at (kubelet-fix-client-cert-rotation.yml).
		{"/var/lib/kubelet/pki/kubelet-client-current.pem", "kubelet-client"},
	}
}

const (
	pemBegin = "-----BEGIN CERTIFICATE-----"
	pemEnd   = "-----END CERTIFICATE-----"
	// kubeconfigCert is the key under which a kubeconfig embeds its client certificate.
	kubeconfigCert = "client-certificate-data:"
)

// readArgv is the command that prints, for each file that exists, its path on a line of its
// own, then its CERTIFICATE blocks and its client-certificate-data line, and nothing else:
// a key (kubelet-client-current.pem bundles one; kubeconfigs embed client-key-data) never
// leaves the host. GNU sed's -s restarts line numbers per file and F prints the file's name;
// a missing file is reported on stderr and skipped. LC_ALL=C keeps that report in English.
func readArgv(files []certFile) []string {
	argv := []string{"env", "LC_ALL=C", "sed", "-n", "-s", "-e", "1F",
		"-e", "/^" + pemBegin + "$/,/^" + pemEnd + "$/p",
		"-e", "/^[[:space:]]*" + kubeconfigCert + "/p", "--"}
	for _, f := range files {
		argv = append(argv, f.path)
	}
	return argv
}

// readCerts runs readArgv for host name over c and returns its output. A missing file is
// not an error; sed failing for another reason (sudo refused, a file unreadable) is.
func readCerts(ctx context.Context, c *sshexec.Client, name string) (string, error) {
	stdout, stderr, code, err := c.Run(ctx, readArgv(certFiles(name)))
	if err != nil {
		return "", err
	}
	if bad := unexpectedStderr(stderr); code != 0 && bad != "" {
		return "", &sshexec.ExitError{Command: "sed", Code: code, Stderr: bad}
	}
	return string(stdout), nil
}

// unexpectedStderr is what sed said besides "No such file or directory", bounded; "" when
// nothing else.
func unexpectedStderr(stderr []byte) string {
	var other []string
	for line := range strings.Lines(string(stderr)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasSuffix(line, ": No such file or directory") {
			other = append(other, line)
		}
	}
	return sshexec.Tail([]byte(strings.Join(other, "; ")), 512)
}

// ParseCerts reads readArgv's output for node: per component, the certificate that expires
// first. A file whose blocks do not parse as certificates is an error naming its path.
func ParseCerts(node string, files []certFile, out []byte) ([]bpav1.CertificateStatus, error) {
	component := map[string]string{}
	for _, f := range files {
		component[f.path] = f.component
	}
	var (
		certs   []bpav1.CertificateStatus
		current string
		block   []string
	)
	add := func(path string, der []byte) error {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("%s on %s: not a certificate: %w", path, node, err)
		}
		certs = keepEarliest(certs, bpav1.CertificateStatus{Node: node, Component: component[path],
			NotAfter: metav1.NewTime(c.NotAfter.UTC()), Subject: subject(c)})
		return nil
	}
	for line := range strings.Lines(string(out)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case component[line] != "" && block == nil:
			current = line
		case current == "":
			return nil, fmt.Errorf("certificates on %s: output before any file name", node)
		case line == pemBegin:
			block = []string{line}
		case line == pemEnd && block != nil:
			p, _ := pem.Decode([]byte(strings.Join(append(block, line), "\n")))
			block = nil
			if p == nil {
				return nil, fmt.Errorf("%s on %s: a CERTIFICATE block that is not PEM", current, node)
			}
			if err := add(current, p.Bytes); err != nil {
				return nil, err
			}
		case block != nil:
			block = append(block, line)
		default: // client-certificate-data: base64 of PEM
			_, data, _ := strings.Cut(line, kubeconfigCert)
			raw, err := base64.StdEncoding.DecodeString(strings.Trim(strings.TrimSpace(data), `"'`))
			if err != nil {
				return nil, fmt.Errorf("%s on %s: client-certificate-data is not base64", current, node)
			}
			for p, rest := pem.Decode(raw); p != nil; p, rest = pem.Decode(rest) {
				if p.Type != "CERTIFICATE" {
					continue // never a key: only certificates are looked at
				}
				if err := add(current, p.Bytes); err != nil {
					return nil, err
				}
			}
		}
	}
	if block != nil {
		return nil, fmt.Errorf("%s on %s: a CERTIFICATE block without its end", current, node)
	}
	return certs, nil
}

// subject is the certificate's common name, bounded as the status field is.
func subject(c *x509.Certificate) string {
	s := c.Subject.CommonName
	if len(s) > 128 {
		s = s[:125] + "..."
	}
	return s
}

// keepEarliest adds c to certs unless an entry of the same node and component expires no
// later, which it otherwise replaces.
func keepEarliest(certs []bpav1.CertificateStatus, c bpav1.CertificateStatus) []bpav1.CertificateStatus {
	for i, o := range certs {
		if o.Node == c.Node && o.Component == c.Component {
			if c.NotAfter.Before(&o.NotAfter) {
				certs[i] = c
			}
			return certs
		}
	}
	return append(certs, c)
}

// Aggregate bounds what the hosts yielded to bpav1.MaxCertificates: every master's entries
// (at most 15 masters, each with its control-plane and etcd files), and for the other
// nodes, one entry per component, the earliest, naming the node that has it (a thousand
// workers would otherwise be a thousand kubelet entries: the earliest is the one to act
// on). Sorted by notAfter, then node and component.
func Aggregate(hosts []bpav1.HostStatus, perHost [][]bpav1.CertificateStatus, served []bpav1.CertificateStatus) []bpav1.CertificateStatus {
	var out, workers []bpav1.CertificateStatus
	for i, h := range hosts {
		if slices.Contains(h.Roles, "master") {
			out = append(out, perHost[i]...)
			continue
		}
		for _, c := range perHost[i] {
			workers = keepEarliestOfComponent(workers, c)
		}
	}
	out = append(append(out, workers...), served...)
	slices.SortFunc(out, func(a, b bpav1.CertificateStatus) int {
		return cmp.Or(a.NotAfter.Compare(b.NotAfter.Time), cmp.Compare(a.Node, b.Node), cmp.Compare(a.Component, b.Component))
	})
	if len(out) > bpav1.MaxCertificates {
		out = out[:bpav1.MaxCertificates] // the earliest are the ones that matter
	}
	return out
}

// keepEarliestOfComponent keeps one entry per component, whatever its node: the earliest.
func keepEarliestOfComponent(certs []bpav1.CertificateStatus, c bpav1.CertificateStatus) []bpav1.CertificateStatus {
	for i, o := range certs {
		if o.Component == c.Component {
			if c.NotAfter.Before(&o.NotAfter) || (c.NotAfter.Equal(&o.NotAfter) && c.Node < o.Node) {
				certs[i] = c
			}
			return certs
		}
	}
	return append(certs, c)
}

// servedChain asks the API server at rc for its certificate chain in a TLS handshake,
// trusting the kubeconfig's CA as the client does, and returns the chain's earliest
// notAfter as master's apiserver-served entry.
func servedChain(ctx context.Context, rc *rest.Config, master string) ([]bpav1.CertificateStatus, error) {
	tc, err := rest.TLSConfigFor(rc)
	if err != nil || tc == nil {
		return nil, fmt.Errorf("TLS settings of the kubeconfig: %v", err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		return nil, err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "443")
	}
	tc = tc.Clone()
	tc.Certificates, tc.GetClientCertificate = nil, nil // nothing to prove: only the server's chain is read
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: tc}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", host, err)
	}
	defer conn.Close()
	chain := conn.(*tls.Conn).ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s presented no certificate", host)
	}
	earliest := chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(earliest) {
			earliest = c.NotAfter
		}
	}
	return []bpav1.CertificateStatus{{Node: master, Component: ServedComponent, NotAfter: metav1.NewTime(earliest.UTC()), Subject: subject(chain[0])}}, nil
}

// checkCertificates reads every kept host's certificates in parallel (sshexec.OnEach) and
// the served chain, logs what it found and what it could not read, and writes the
// certificates output for the controller. It never fails the step: the cluster is healthy;
// a host whose files cannot be read is named in the output's problems.
func (o *options) checkCertificates(ctx context.Context, hosts []bpav1.HostStatus, cfg sshexec.Config, rc *rest.Config, master string) error {
	start := time.Now()
	kept := bpav1.KeptHosts(hosts)
	targets := make([]sshexec.Target, len(kept))
	for i, h := range kept {
		targets[i] = sshexec.Target{Name: h.Name, Addr: h.IP}
	}
	outs, errs := sshexec.OnEachTarget(ctx, targets, cfg, func(ctx context.Context, c *sshexec.Client, t sshexec.Target) (string, error) {
		return readCerts(ctx, c, t.Name)
	})
	perHost := make([][]bpav1.CertificateStatus, len(kept))
	for i, h := range kept {
		if errs[i] == nil {
			perHost[i], errs[i] = ParseCerts(h.Name, certFiles(h.Name), []byte(outs[i]))
		}
	}
	var problems []string
	unreachable, failed := sshexec.Failures(targets, errs)
	problems = append(append(problems, unreachable...), failed...)
	served, err := servedChain(ctx, rc, master)
	if err != nil {
		problems = append(problems, "served chain of "+master+": "+err.Error())
	}
	report := stepio.Certificates{CheckedAt: metav1.NewTime(start.UTC().Truncate(time.Second)),
		Certificates: Aggregate(kept, perHost, served), Problems: bound(problems)}
	o.logCertificates(report, len(kept), time.Since(start))
	return o.writeCertificates(report)
}

// bound keeps the problems short enough for a condition message.
func bound(problems []string) []string {
	if len(problems) > maxReported {
		return append(problems[:maxReported:maxReported], fmt.Sprintf("... and %d more", len(problems)-maxReported))
	}
	return problems
}

func (o *options) logCertificates(r stepio.Certificates, hosts int, took time.Duration) {
	for _, p := range r.Problems {
		o.logf("certificates not read: %s", p)
	}
	if len(r.Certificates) > 0 {
		c := r.Certificates[0]
		o.logf("certificates: %d entries from %d hosts in %v; earliest %s on %s expires %s", len(r.Certificates), hosts,
			took.Round(time.Millisecond), c.Component, c.Node, c.NotAfter.Format(time.RFC3339))
	}
}

func (o *options) writeCertificates(r stepio.Certificates) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return stepio.WriteOutput(o.certificatesFile, data)
}
