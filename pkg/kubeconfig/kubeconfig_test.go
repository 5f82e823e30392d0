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

func TestRebuild(t *testing.T) {
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
		out, err := Rebuild(conf(tc.server), tc.ip)
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

func TestRebuildRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		data []byte
		ip   string
	}{
		"not an IP":      {conf("https://127.0.0.1:6443"), "node-1; rm -rf /"},
		"empty":          {nil, "10.0.0.1"},
		"no cluster":     {[]byte("apiVersion: v1\nkind: Config\n"), "10.0.0.1"},
		"no server":      {conf(""), "10.0.0.1"},
		"invalid YAML":   {[]byte("client-key-data: U0VDUkVUS0VZ\n  : [unclosed"), "10.0.0.1"},
		"ftp server":     {conf("ftp://127.0.0.1:6443"), "10.0.0.1"},
		"user in URL":    {conf("https://admin:U0VDUkVUS0VZ@127.0.0.1:6443"), "10.0.0.1"},
		"query":          {conf("https://127.0.0.1:6443/?x=y"), "10.0.0.1"},
		"no context":     {[]byte(strings.Replace(string(conf("https://127.0.0.1:6443")), "current-context: kubernetes-admin@cluster.local", "current-context: other", 1)), "10.0.0.1"},
		"no CA":          {[]byte(strings.Replace(string(conf("https://127.0.0.1:6443")), "certificate-authority-data", "x-ca", 1)), "10.0.0.1"},
		"key, no cert":   {[]byte(strings.Replace(string(conf("https://127.0.0.1:6443")), "client-certificate-data", "x-cert", 1)), "10.0.0.1"},
		"no credentials": {[]byte(strings.NewReplacer("client-certificate-data", "x-cert", "client-key-data", "x-key").Replace(string(conf("https://127.0.0.1:6443")))), "10.0.0.1"},
	} {
		_, err := Rebuild(tc.data, tc.ip)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "U0VDUkVUS0VZ") || strings.Contains(err.Error(), "SECRETKEY") {
			t.Errorf("%s: error shows credentials: %v", name, err)
		}
	}
}

// TestRebuildRefusesHostileFields: each field of the current context that would make a
// client run a command, read a local file, go through a proxy, skip TLS verification or
// impersonate is refused, and the error names it.
func TestRebuildRefusesHostileFields(t *testing.T) {
	for field, yaml := range map[string]string{
		"exec":                     "    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}\n",
		"auth-provider":            "    auth-provider: {name: oidc, config: {idp-issuer-url: https://evil}}\n",
		"tokenFile":                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
		"client-certificate":       "    client-certificate: /etc/bpa/ssh/ssh-privatekey\n",
		"client-key":               "    client-key: /etc/bpa/ssh/ssh-privatekey\n",
		"as":                       "    as: system:admin\n",
		"as-uid":                   "    as-uid: \"0\"\n",
		"as-groups":                "    as-groups: [system:masters]\n",
		"as-user-extra":            "    as-user-extra: {scopes: [all]}\n",
		"username/password":        "    username: admin\n    password: U0VDUkVUS0VZ\n",
		"certificate-authority":    "CLUSTER    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt\n",
		"proxy-url":                "CLUSTER    proxy-url: http://attacker.example:3128\n",
		"insecure-skip-tls-verify": "CLUSTER    insecure-skip-tls-verify: true\n",
	} {
		t.Run(field, func(t *testing.T) {
			data := string(conf("https://127.0.0.1:6443"))
			if extra, ok := strings.CutPrefix(yaml, "CLUSTER"); ok {
				data = strings.Replace(data, "    server:", extra+"    server:", 1)
			} else {
				data += yaml
			}
			cfg, err := clientcmd.Load([]byte(data))
			if err != nil || cfg.Clusters["cluster.local"] == nil || cfg.AuthInfos["kubernetes-admin"] == nil {
				t.Fatalf("the test's kubeconfig does not load: %v", err)
			}
			for what, f := range map[string]func([]byte) error{
				"Rebuild":    func(d []byte) error { _, err := Rebuild(d, "10.0.0.1"); return err },
				"RESTConfig": func(d []byte) error { _, err := RESTConfig(d); return err },
			} {
				err := f([]byte(data))
				if err == nil || !strings.Contains(err.Error(), ": "+field+": BPA takes only inline credentials") {
					t.Errorf("%s: got %v, want a refusal naming %s", what, err, field)
				}
				if err != nil && strings.Contains(err.Error(), "U0VDUkVUS0VZ") {
					t.Errorf("%s: error shows credentials: %v", what, err)
				}
			}
		})
	}
}

// TestRebuildKeepsOnlyTheCurrentContext: the other contexts, clusters and users of the file,
// hostile or not, and everything else it carries (preferences, extensions, namespace) are
// not in the result.
func TestRebuildKeepsOnlyTheCurrentContext(t *testing.T) {
	data := string(conf("https://127.0.0.1:6443")) + `- name: other
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}
preferences: {colors: true}
`
	data = strings.Replace(data, "    user: kubernetes-admin\n", "    user: kubernetes-admin\n    namespace: kube-system\n", 1)
	out, err := Rebuild([]byte(data), "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.AuthInfos) != 1 || len(cfg.Clusters) != 1 || len(cfg.Contexts) != 1 || cfg.Contexts[cfg.CurrentContext].Namespace != "" || cfg.Preferences.Colors {
		t.Errorf("rebuilt kubeconfig keeps more than the current context:\n%s", out)
	}
	if strings.Contains(string(out), "exec") || strings.Contains(string(out), "/bin/sh") {
		t.Errorf("rebuilt kubeconfig carries the exec entry:\n%s", out)
	}
}

func TestRESTConfigToken(t *testing.T) {
	data := strings.NewReplacer("    client-certificate-data: Q0VSVA==\n", "", "    client-key-data: U0VDUkVUS0VZ\n", "    token: abc.def\n").Replace(string(conf("https://127.0.0.1:6443")))
	rc, err := RESTConfig([]byte(data))
	if err != nil || rc.BearerToken != "abc.def" || string(rc.CAData) != "CADATA" || rc.Host != "https://127.0.0.1:6443" || rc.ExecProvider != nil || rc.BearerTokenFile != "" {
		t.Errorf("RESTConfig = %+v, %v", rc, err)
	}
}
