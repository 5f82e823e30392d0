// Package kubeconfig rebuilds the admin kubeconfig fetched from a new cluster's first
// control-plane node into the minimal one BPA uses and publishes.
//
// kubeadm (and so kubespray) writes admin.conf with a server address meant for use on the
// node itself or behind a load balancer, e.g. https://127.0.0.1:6443 or
// https://lb.cluster.local:6443. BPA hands the file to users and to other steps, which reach
// the node by the IP BPA recorded for it, so the server's host is replaced with that IP.
// The scheme and port are kept: they say how the API server listens.
//
// The file comes from a host, and a host may be compromised. client-go obeys a kubeconfig
// fully: `exec` and `auth-provider` run a command in the process that loads it, `tokenFile`,
// `client-key` and their kin read a local file and send it to the server (in a step pod,
// the pod's own ServiceAccount token), `proxy-url` sends everything elsewhere, and `as`
// impersonates. So BPA keeps only what a client needs, all inline: the current context's
// server, CA data, and client certificate and key or token. Anything else of that context
// is refused by name; the file's other contexts, clusters and users are dropped unread.
//
// Kubeconfigs hold credentials. Nothing here logs or returns their content in an error.
package kubeconfig

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// admin is what BPA keeps of an admin kubeconfig: one context, its cluster and its user,
// with only the inline fields.
type admin struct {
	context, clusterName, userName string
	server, tlsServerName          string
	caData, certData, keyData      []byte
	token                          string
}

// Rebuild returns the minimal kubeconfig made from data's current context, with the server
// pointed at ip (scheme, port and path kept). It refuses what it does not keep.
func Rebuild(data []byte, ip string) ([]byte, error) {
	addr := net.ParseIP(ip)
	if addr == nil {
		return nil, fmt.Errorf("kubeconfig: %q is not an IP address", ip)
	}
	a, err := parse(data)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(a.server) // parse checked it
	if port := u.Port(); port != "" {
		u.Host = net.JoinHostPort(addr.String(), port)
	} else if addr.To4() == nil {
		u.Host = "[" + addr.String() + "]"
	} else {
		u.Host = addr.String()
	}
	// The API server certificate kubeadm makes lists the node's IP, so TLS verification
	// keeps working; a tls-server-name, if set, names a SAN it has and is kept.
	a.server = u.String()

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[a.clusterName] = &clientcmdapi.Cluster{Server: a.server, TLSServerName: a.tlsServerName, CertificateAuthorityData: a.caData}
	cfg.AuthInfos[a.userName] = &clientcmdapi.AuthInfo{ClientCertificateData: a.certData, ClientKeyData: a.keyData, Token: a.token}
	cfg.Contexts[a.context] = &clientcmdapi.Context{Cluster: a.clusterName, AuthInfo: a.userName}
	cfg.CurrentContext = a.context
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: writing: %w", err)
	}
	return out, nil
}

// RESTConfig turns a kubeconfig (its current context) into a client configuration, under
// the same rules as Rebuild. The configuration is built field by field, not by clientcmd,
// so nothing in the file but those fields can reach the client.
func RESTConfig(data []byte) (*rest.Config, error) {
	a, err := parse(data)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:        a.server,
		BearerToken: a.token,
		TLSClientConfig: rest.TLSClientConfig{
			ServerName: a.tlsServerName, CAData: a.caData, CertData: a.certData, KeyData: a.keyData,
		},
	}, nil
}

// parse reads the current context and refuses every field of it that BPA does not keep.
func parse(data []byte) (*admin, error) {
	cfg, err := load(data)
	if err != nil {
		return nil, err
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil {
		return nil, fmt.Errorf("kubeconfig: current-context %q names no context", cfg.CurrentContext)
	}
	c, u := cfg.Clusters[kctx.Cluster], cfg.AuthInfos[kctx.AuthInfo]
	if c == nil || u == nil {
		return nil, fmt.Errorf("kubeconfig: context %q names cluster %q and user %q, and the file lacks one of them", cfg.CurrentContext, kctx.Cluster, kctx.AuthInfo)
	}

	var refused []string
	refuse := func(set bool, field string) {
		if set {
			refused = append(refused, field)
		}
	}
	cl, us := fmt.Sprintf("cluster %q: ", kctx.Cluster), fmt.Sprintf("user %q: ", kctx.AuthInfo)
	refuse(c.CertificateAuthority != "", cl+"certificate-authority")
	refuse(c.ProxyURL != "", cl+"proxy-url")
	refuse(c.InsecureSkipTLSVerify, cl+"insecure-skip-tls-verify")
	refuse(u.Exec != nil, us+"exec")
	refuse(u.AuthProvider != nil, us+"auth-provider")
	refuse(u.TokenFile != "", us+"tokenFile")
	refuse(u.ClientCertificate != "", us+"client-certificate")
	refuse(u.ClientKey != "", us+"client-key")
	refuse(u.Impersonate != "", us+"as")
	refuse(u.ImpersonateUID != "", us+"as-uid")
	refuse(len(u.ImpersonateGroups) > 0, us+"as-groups")
	refuse(len(u.ImpersonateUserExtra) > 0, us+"as-user-extra")
	refuse(u.Username != "" || u.Password != "", us+"username/password")
	if len(refused) > 0 {
		return nil, fmt.Errorf("kubeconfig: refusing %s: BPA takes only inline credentials from a node's admin.conf "+
			"(certificate-authority-data, client-certificate-data and client-key-data, or token), "+
			"and never runs a command, reads a file, uses a proxy or impersonates on a host's word", strings.Join(refused, ", "))
	}

	srv, err := url.Parse(c.Server)
	switch {
	case err != nil || srv.Host == "":
		return nil, fmt.Errorf("kubeconfig: %sno usable server URL", cl)
	case srv.Scheme != "https" && srv.Scheme != "http":
		return nil, fmt.Errorf("kubeconfig: %sserver: the scheme must be https or http", cl)
	case srv.User != nil || srv.RawQuery != "" || srv.Fragment != "":
		return nil, fmt.Errorf("kubeconfig: %sserver: want scheme, host, port and path only (no user, query or fragment)", cl)
	case len(c.CertificateAuthorityData) == 0:
		return nil, fmt.Errorf("kubeconfig: %sno certificate-authority-data to verify the API server with", cl)
	case (len(u.ClientCertificateData) == 0) != (len(u.ClientKeyData) == 0):
		return nil, fmt.Errorf("kubeconfig: %sclient-certificate-data and client-key-data go together", us)
	case len(u.ClientCertificateData) == 0 && u.Token == "":
		return nil, fmt.Errorf("kubeconfig: %sno inline credentials (client-certificate-data and client-key-data, or token)", us)
	}
	return &admin{
		context: cfg.CurrentContext, clusterName: kctx.Cluster, userName: kctx.AuthInfo,
		server: c.Server, tlsServerName: c.TLSServerName, caData: c.CertificateAuthorityData,
		certData: u.ClientCertificateData, keyData: u.ClientKeyData, token: u.Token,
	}, nil
}

// load parses a kubeconfig. clientcmd's parse errors quote the offending YAML, which could
// be a credential, so they are replaced with a generic message.
func load(data []byte) (*clientcmdapi.Config, error) {
	if len(data) == 0 {
		return nil, errors.New("kubeconfig: empty")
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, errors.New("kubeconfig: not a valid kubeconfig (YAML or JSON)")
	}
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("kubeconfig: names no cluster")
	}
	return cfg, nil
}
