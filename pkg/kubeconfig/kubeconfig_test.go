package kubeconfig

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

const adminConf = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: Q0FEQVRB
    server: %s
  name: cluster.local
contexts:
- context:
    cluster: cluster.local
    user: kubernetes-admin
  name: kubernetes-admin@cluster.local
current-context: kubernetes-admin@cluster.local
users:
- name: kubernetes-admin
  user:
    client-certificate-data: Q0VSVA==
    client-key-data: U0VDUkVUS0VZ
`

func conf(server string) []byte { return []byte(strings.Replace(adminConf, "%s", server, 1)) }

func TestRewriteServer(t *testing.T) {
	for _, tc := range []struct{ server, ip, want string }{
		{"https://127.0.0.1:6443", "10.10.110.21", "https://10.10.110.21:6443"},
		{"https://lb-apiserver.kubernetes.local:8383", "10.10.110.21", "https://10.10.110.21:8383"},
		{"https://[::1]:6443", "10.0.0.1", "https://10.0.0.1:6443"},
		{"https://127.0.0.1:6443", "fd00::5", "https://[fd00::5]:6443"},
		{"https://localhost", "10.0.0.1", "https://10.0.0.1"},
		{"https://localhost", "fd00::5", "https://[fd00::5]"},
		{"https://127.0.0.1:6443/prefix", "10.0.0.1", "https://10.0.0.1:6443/prefix"},
		{"http://127.0.0.1:8080", "10.0.0.1", "http://10.0.0.1:8080"},
	} {
		out, err := RewriteServer(conf(tc.server), tc.ip)
		if err != nil {
			t.Errorf("%s → %s: %v", tc.server, tc.ip, err)
			continue
		}
		cfg, err := clientcmd.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Clusters["cluster.local"].Server; got != tc.want {
			t.Errorf("%s → %s: got %s, want %s", tc.server, tc.ip, got, tc.want)
		}
		// Everything else survives: credentials, CA, context.
		if cfg.CurrentContext != "kubernetes-admin@cluster.local" ||
			string(cfg.AuthInfos["kubernetes-admin"].ClientKeyData) != "SECRETKEY" ||
			string(cfg.Clusters["cluster.local"].CertificateAuthorityData) != "CADATA" {
			t.Errorf("rewrite lost content: %+v", cfg)
		}
		rc, err := RESTConfig(out)
		if err != nil || rc.Host != tc.want {
			t.Errorf("RESTConfig host = %v, %v; want %s", rc, err, tc.want)
		}
	}
}

func TestRewriteServerRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		data []byte
		ip   string
	}{
		"not an IP":    {conf("https://127.0.0.1:6443"), "node-1; rm -rf /"},
		"empty":        {nil, "10.0.0.1"},
		"no cluster":   {[]byte("apiVersion: v1\nkind: Config\n"), "10.0.0.1"},
		"no server":    {conf(""), "10.0.0.1"},
		"invalid YAML": {[]byte("client-key-data: U0VDUkVUS0VZ\n  : [unclosed"), "10.0.0.1"},
	} {
		_, err := RewriteServer(tc.data, tc.ip)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "U0VDUkVUS0VZ") || strings.Contains(err.Error(), "SECRETKEY") {
			t.Errorf("%s: error shows credentials: %v", name, err)
		}
	}
}

func TestServers(t *testing.T) {
	got, err := Servers(conf("https://127.0.0.1:6443"))
	if err != nil || got["cluster.local"] != "https://127.0.0.1:6443" || len(got) != 1 {
		t.Errorf("Servers = %v, %v", got, err)
	}
}
