// Package kubeconfig reads and adjusts the admin kubeconfig fetched from a new cluster's
// first control-plane node.
//
// kubeadm (and so kubespray) writes admin.conf with a server address meant for use on the
// node itself or behind a load balancer, e.g. https://127.0.0.1:6443 or
// https://lb.cluster.local:6443. BPA hands the file to users and to other steps, which reach
// the node by the IP BPA recorded for it, so the server's host is replaced with that IP.
// The scheme and port are kept: they say how the API server listens.
//
// Kubeconfigs hold credentials. Nothing here logs or returns their content in an error.
package kubeconfig

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RewriteServer points the kubeconfig's cluster at ip, keeping scheme, port and path. Every
// cluster entry is rewritten: admin.conf names one cluster, the node's own, and a second
// entry still pointing at 127.0.0.1 would only be a trap.
func RewriteServer(data []byte, ip string) ([]byte, error) {
	addr := net.ParseIP(ip)
	if addr == nil {
		return nil, fmt.Errorf("kubeconfig: %q is not an IP address", ip)
	}
	cfg, err := load(data)
	if err != nil {
		return nil, err
	}
	for _, name := range sortedClusterNames(cfg) {
		c := cfg.Clusters[name]
		u, err := url.Parse(c.Server)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("kubeconfig: cluster %q has no usable server URL %q", name, c.Server)
		}
		if port := u.Port(); port != "" {
			u.Host = net.JoinHostPort(addr.String(), port)
		} else if addr.To4() == nil {
			u.Host = "[" + addr.String() + "]"
		} else {
			u.Host = addr.String()
		}
		// The API server certificate kubeadm makes lists the node's IP, so TLS verification
		// keeps working; a tls-server-name, if set, names a SAN it has and is kept.
		c.Server = u.String()
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: writing: %w", err)
	}
	return out, nil
}

// Servers lists the kubeconfig's server URLs by cluster name. Server URLs are not secret, so
// steps may log them.
func Servers(data []byte) (map[string]string, error) {
	cfg, err := load(data)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, c := range cfg.Clusters {
		out[name] = c.Server
	}
	return out, nil
}

// RESTConfig turns the kubeconfig (its current context) into a client configuration.
func RESTConfig(data []byte) (*rest.Config, error) {
	if _, err := load(data); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// load parses and sanity-checks a kubeconfig. clientcmd's parse errors quote the offending
// YAML, which could be a credential, so they are replaced with a generic message.
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

func sortedClusterNames(cfg *clientcmdapi.Config) []string {
	names := make([]string, 0, len(cfg.Clusters))
	for n := range cfg.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
