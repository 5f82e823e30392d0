package rig

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// serviceCIDR is the rig's Service range; the `kubernetes` Service takes its first address.
const serviceCIDR = "10.0.0.0/24"

// KubernetesServiceIP is the ClusterIP of the `kubernetes` Service, which pods reach the
// apiserver through.
var KubernetesServiceIP = net.IPv4(10, 0, 0, 1)

// NodeOptions ready the main apiserver for a real node (test/framework/node).
type NodeOptions struct {
	// Name is the Node's name: the kubelet authenticates as system:node:<Name>.
	Name string
	// Address is the node's address on its bridge, which must exist when Start runs. The
	// main apiserver serves there instead of on 127.0.0.1 (URL names it): pods reach it
	// through the `kubernetes` Service, and kube-proxy cannot send them to a loopback
	// address (an EndpointSlice may not hold one).
	Address net.IP
	// Hosts is the subnet of the simulated hosts that front the application apiserver (a
	// cluster's kubeconfig names its first control-plane host): the application
	// apiserver's certificate holds each of its addresses, and its URL is on Address.
	Hosts *net.IPNet
}

// user is a static token identity of an apiserver; component names its kubeconfig file.
type user struct {
	component, name, groups, token string
}

// nodeUsers are the identities of a real node's components, which the bootstrap RBAC
// policy (system:node-proxier, system:kube-scheduler, ...) and the Node authorizer know.
func nodeUsers(nodeName string) []user {
	return []user{
		{component: "kubelet", name: "system:node:" + nodeName, groups: "system:nodes"},
		{component: "kube-proxy", name: "system:kube-proxy"},
		{component: "kube-scheduler", name: "system:kube-scheduler"},
		{component: "kube-controller-manager", name: "system:kube-controller-manager"},
	}
}

func writeTokens(path string, users []user) error {
	var b strings.Builder
	for _, u := range users {
		if u.token == "" {
			continue
		}
		fmt.Fprintf(&b, "%s,%s,%s", u.token, u.name, u.name)
		if u.groups != "" {
			fmt.Fprintf(&b, ",%q", u.groups)
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// mainAPIServer is the spec of the rig's own apiserver: on loopback, or for a real node on
// the node's address, with the Node authorizer, NodeRestriction, the ServiceAccount
// admission plugin (pods get projected tokens) and the `kubernetes` Service's endpoints.
func (r *Rig) mainAPIServer() apiServerSpec {
	spec := apiServerSpec{name: "kube-apiserver", etcdPrefix: "/registry", bind: "127.0.0.1", certIPs: []net.IP{net.IPv4(127, 0, 0, 1)}}
	n := r.opts.Node
	if n == nil {
		return spec
	}
	spec.bind, spec.host = n.Address.String(), n.Address.String()
	spec.certIPs = append(spec.certIPs, n.Address, KubernetesServiceIP)
	spec.users = nodeUsers(n.Name)
	for i := range spec.users {
		spec.users[i].token = randomToken()
	}
	spec.args = []string{"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"}
	return spec
}

// ComponentKubeconfig is the kubeconfig file of a real node's component ("kubelet",
// "kube-proxy", "kube-scheduler", "kube-controller-manager"), written when Options.Node is set.
func (r *Rig) ComponentKubeconfig(component string) string {
	return filepath.Join(r.Dir, "kube-apiserver", component+".kubeconfig")
}

// ServiceAddress is where the rig's pods and simulated hosts reach a server of the test's
// own: the node's address (Options.Node), or 127.0.0.1 without a node.
func (r *Rig) ServiceAddress() net.IP {
	if r.opts.Node != nil {
		return r.opts.Node.Address
	}
	return net.IPv4(127, 0, 0, 1)
}

// CAFile is the PEM file of the rig's CA, which verifies the apiservers and signed the
// certificate the apiservers present to kubelets.
func (r *Rig) CAFile() string { return r.file(caFile) }

// ServiceAccountKeyFile is the key the main apiserver signs service account tokens with.
func (r *Rig) ServiceAccountKeyFile() string {
	return filepath.Join(r.Dir, "kube-apiserver", "sa.key")
}

// WriteKubeletCert writes a kubelet's serving certificate for nodeName at ip, which the
// apiservers verify, to certFile and keyFile.
func (r *Rig) WriteKubeletCert(certFile, keyFile, nodeName string, ip net.IP) error {
	der, key, err := r.ca.issue("system:node:"+nodeName, x509.ExtKeyUsageServerAuth, []net.IP{ip}, apiServerNames...)
	if err != nil {
		return err
	}
	return writeCertAndKey(certFile, keyFile, der, key)
}
