package inventory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ev builds kubespray settings whose extraVars are the JSON object obj, as the apiserver
// hands them over.
func ev(t testing.TB, obj string) *bpav1.KubesprayConfig {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(obj), &m))
	vars := map[string]apiextensionsv1.JSON{}
	for k, v := range m {
		vars[k] = apiextensionsv1.JSON{Raw: v}
	}
	return &bpav1.KubesprayConfig{ExtraVars: vars}
}

const header = "# Written by BPA render-inventory. Every string is !unsafe: Ansible never templates it.\n"

func TestExtraVars(t *testing.T) {
	for name, tc := range map[string]struct {
		spec bpav1.ProvisioningSpec
		want string
	}{
		"nothing": {bpav1.ProvisioningSpec{}, "{}\n"},
		// ICN e2e_bpa_remote_compute_cr_sample.yaml
		"ICN remote compute": {bpav1.ProvisioningSpec{KUDPlugins: []bpav1.DebianPackageName{"bpa"}, PodSubnet: "10.244.64.0/18"},
			"\"kube_pods_subnet\": !unsafe \"10.244.64.0/18\"\n\"kud_plugins\":\n  - !unsafe \"bpa\"\n"},
		"extra vars sorted": {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"kube_version": "v1.32.5", "container_manager": "containerd", "ansible_python_interpreter": "/usr/bin/python3"}`)},
			"\"ansible_python_interpreter\": !unsafe \"/usr/bin/python3\"\n\"container_manager\": !unsafe \"containerd\"\n\"kube_version\": !unsafe \"v1.32.5\"\n"},
		// kubernetes.version in the release's format: v2.28 without a v, v2.27 with one
		"kube_version v2.28": {bpav1.ProvisioningSpec{Kubernetes: &bpav1.KubernetesConfig{Version: "v1.32.5"}}, "\"kube_version\": !unsafe \"1.32.5\"\n"},
		"kube_version v2.27": {bpav1.ProvisioningSpec{Kubespray: &bpav1.KubesprayConfig{Version: "v2.27.0"}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.31.4"}},
			"\"kube_version\": !unsafe \"v1.31.4\"\n"},
		"IPv6 pod subnet": {bpav1.ProvisioningSpec{PodSubnet: "fd00:10:244::/56"}, "\"kube_pods_subnet\": !unsafe \"fd00:10:244::/56\"\n"},
		"typed": {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"helm_enabled": true, "deploy_netchecker": false, "etcd_deployment_type": "host",
			"kube_network_node_prefix": 24, "ratio": 0.5, "node_labels": {"node-role.kubernetes.io/ingress": "", "true": "yes"},
			"containerd_registries_mirrors": [{"prefix": "docker.io", "mirrors": [{"host": "https://mirror:5000", "capabilities": ["pull", "resolve"], "skip_verify": false}]}]}`)},
			`"containerd_registries_mirrors":
  - "mirrors":
      - "capabilities":
          - !unsafe "pull"
          - !unsafe "resolve"
        "host": !unsafe "https://mirror:5000"
        "skip_verify": !!bool false
    "prefix": !unsafe "docker.io"
"deploy_netchecker": !!bool false
"etcd_deployment_type": !unsafe "host"
"helm_enabled": !!bool true
"kube_network_node_prefix": !!int 24
"node_labels":
  "node-role.kubernetes.io/ingress": !unsafe ""
  "true": !unsafe "yes"
"ratio": !!float 0.5
`},
		// A string that only looks like a template to someone else stays a plain string,
		// newlines and quotes included.
		"escapes": {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"motd": "a \"b\"\nc: {d}"}`)}, "\"motd\": !unsafe \"a \\\"b\\\"\\nc: {d}\"\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ExtraVars(&tc.spec)
			require.NoError(t, err)
			assert.Equal(t, header+tc.want, string(got))
			assert.NoError(t, CheckExtraVars(got), "what render-inventory writes, run-kubespray accepts")
		})
	}
}

func TestExtraVarsErrors(t *testing.T) {
	deep := `"x"`
	for range bpav1.MaxExtraVarDepth + 1 {
		deep = "[" + deep + "]"
	}
	for name, tc := range map[string]struct {
		spec bpav1.ProvisioningSpec
		want string
	}{
		"kube_version twice": {bpav1.ProvisioningSpec{Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}, Kubespray: ev(t, `{"kube_version": "1.32.5"}`)},
			"kubespray.extraVars.kube_version: kubernetes.version already sets it"},
		"kube_version out of range": {bpav1.ProvisioningSpec{Kubernetes: &bpav1.KubernetesConfig{Version: "1.33.0"}},
			"kubernetes.version: Kubernetes 1.33.0 is not one kubespray v2.28.0 has kubelet checksums for: it installs 1.32.0–1.32.5, 1.31.0–1.31.9, 1.30.0–1.30.13"},
		"subnet twice":   {bpav1.ProvisioningSpec{PodSubnet: "10.0.0.0/16", Kubespray: ev(t, `{"kube_pods_subnet": "10.1.0.0/16"}`)}, "kubespray.extraVars.kube_pods_subnet: PodSubnet already sets it"},
		"plugins twice":  {bpav1.ProvisioningSpec{KUDPlugins: []bpav1.DebianPackageName{"emco"}, Kubespray: ev(t, `{"kud_plugins": "x"}`)}, "kubespray.extraVars.kud_plugins: KUDPlugins already sets it"},
		"host bits":      {bpav1.ProvisioningSpec{PodSubnet: "10.0.0.1/16"}, `PodSubnet "10.0.0.1/16": want a CIDR network address`},
		"not a CIDR":     {bpav1.ProvisioningSpec{PodSubnet: "10.0.0.0"}, "want a CIDR network address"},
		"jinja":          {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": "{{ lookup('pipe', 'id') }}"}`)}, `extra vars.x: Invalid value: must not contain "{{"`},
		"jinja stmt":     {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": "{% if %}"}`)}, `must not contain "{%"`},
		"jinja2 header":  {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": "#jinja2:variable_start_string:'[['\n[[ 1 ]]"}`)}, `extra vars.x: Invalid value: must not contain "#jinja2:"`},
		"header inside":  {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": "a #jinja2:b"}`)}, `must not contain "#jinja2:"`},
		"nested jinja":   {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": [{"a": ["ok", "{# c #}"]}]}`)}, `extra vars.x[0][a][1]: Invalid value: must not contain "{#"`},
		"nested key":     {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": {"{{ k }}": 1}}`)}, "extra vars.x: Invalid value: map keys must be letters, digits and _ . : / -"},
		"key with space": {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": {"a": {"b c": 1}}}`)}, "extra vars.x[a]: Invalid value: map keys must be"},
		"too deep":       {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": `+deep+`}`)}, "extra vars.x[0][0][0][0][0][0]: Invalid value: lists and maps may nest at most 6 deep"},
		"too many":       {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": [`+strings.Repeat("1,", 100)+`1]}`)}, "extra vars.x: Too many: 101: must have at most 100 items"},
		"too long":       {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": "`+strings.Repeat("é", 4097)+`"}`)}, "extra vars.x: Too long: may not be more than 4096"},
		"null":           {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"x": [null]}`)}, "extra vars.x[0]: Invalid value: must be a string, number, boolean, list or map"},
		"bad key":        {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"a-b": "1"}`)}, "extra vars: Invalid value: keys must be Ansible variable names"},
		"ssh args":       {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"ansible_ssh_common_args": "-o StrictHostKeyChecking=no"}`)}, "extra vars.ansible_ssh_common_args: Forbidden: BPA sets Ansible's connection variables"},
		"host key check": {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"ansible_host_key_checking": false}`)}, "ansible_host_key_checking"},
		"user":           {bpav1.ProvisioningSpec{Kubespray: ev(t, `{"ANSIBLE_USER": "x"}`)}, "ANSIBLE_USER"},
		"bad plugin":     {bpav1.ProvisioningSpec{KUDPlugins: []bpav1.DebianPackageName{"-rf"}}, `kud_plugins: "-rf" is not a KUD plugin name`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ExtraVars(&tc.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// Exactly at the limits is fine.
	ok := `{"x": "` + strings.Repeat("é", 4096) + `", "l": [` + strings.Repeat("1,", 99) + `1], "d": ` + deep[1:len(deep)-1] + `}`
	_, err := ExtraVars(&bpav1.ProvisioningSpec{Kubespray: ev(t, ok)})
	assert.NoError(t, err)
}

// TestCheckExtraVars: run-kubespray accepts exactly what MarshalVars writes. Everything else
// is refused, above all a string Ansible would template (one without !unsafe).
func TestCheckExtraVars(t *testing.T) {
	for in, want := range map[string]string{
		`"a": !unsafe "b"` + "\n" + `"kud_plugins": [!unsafe "emco"]`:                                                    "",
		`"ansible_python_interpreter": !unsafe "/usr/bin/python3"`:                                                       "",
		`"b": !!bool true` + "\n" + `"n": !!int -3` + "\n" + `"f": !!float 1.5e-3` + "\n" + `"m": {"k": [!!bool false]}`: "",
		`{}`:          "",
		``:            "not YAML",
		`[]`:          "want a YAML mapping of variables",
		`!unsafe "a"`: "want a YAML mapping of variables",
		`"a": !unsafe "b"` + "\n---\n" + `"c": !unsafe "d"`: "want one YAML document",
		// The attack: a plain string, which Ansible would template.
		`"a": "{{ lookup('pipe', 'id') }}"`:            "line 1: a value without an explicit tag (strings must be tagged !unsafe)",
		`"a": [plain]`:                                 "a value without an explicit tag",
		`"a": {"b": 'single'}`:                         "a value without an explicit tag",
		`"a": !!str "x"`:                               "a template BPA did not write",
		`"a": !!bool yes`:                              "want a !unsafe string, or a !!bool",
		`"a": !!int 0x1F`:                              "want a !unsafe string",
		`"a": !!float .inf`:                            "want a !unsafe string",
		`"a": !!python/object:os.system "id"`:          "want a !unsafe string",
		`"a": !!seq [!!bool true]`:                     "a tagged list",
		`"a": !!map {"b": !!bool true}`:                "a tagged map",
		`"a": &x !unsafe "b"` + "\n" + `"c": *x`:       "anchors and aliases are not allowed",
		`"a": !unsafe "b"` + "\n" + `"a": !unsafe "c"`: "line 2: a key is repeated",
		`a: !unsafe "b"`:                               "want a double-quoted key",
		`"m": {true: !unsafe "b"}`:                     "want a double-quoted key",
		// Tagged, but still refused: the same rules as at admission.
		`"a": !unsafe "{{ lookup('pipe', 'id') }}"`:                                    `extra vars.a: Invalid value: must not contain "{{"`,
		`"a": [{"b": !unsafe "#jinja2:x:'y'\n"}]`:                                      `extra vars.a[0][b]: Invalid value: must not contain "#jinja2:"`,
		`"a": {"b c": !!int 1}`:                                                        "map keys must be letters",
		`"ansible_ssh_args": !unsafe "-o X"`:                                           "ansible_ssh_args: Forbidden: BPA sets",
		`"a-b": !unsafe "x"`:                                                           "keys must be Ansible variable names",
		`"kud_plugins": [!unsafe "ok", !unsafe "not ok"]`:                              `"not ok" is not a KUD plugin name`,
		`"kud_plugins": !unsafe "emco"`:                                                "kud_plugins: want a list of KUD plugin names",
		`"a": [[[[[[[!!int 1]]]]]]]`:                                                   "lists and maps may nest at most 6 deep",
		`"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[!!int 1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`: "lists and maps nest too deep",
	} {
		err := CheckExtraVars([]byte(in))
		if want == "" {
			assert.NoError(t, err, in)
		} else {
			assert.ErrorContains(t, err, want, in)
		}
	}
}
