package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func TestExtraVars(t *testing.T) {
	for name, tc := range map[string]struct {
		spec bpav1.ProvisioningSpec
		want string
	}{
		"nothing": {bpav1.ProvisioningSpec{}, "{}\n"},
		// ICN e2e_bpa_remote_compute_cr_sample.yaml
		"ICN remote compute": {bpav1.ProvisioningSpec{KUDPlugins: []bpav1.DebianPackageName{"bpa"}, PodSubnet: "10.244.64.0/18"},
			"{\n  \"kube_pods_subnet\": \"10.244.64.0/18\",\n  \"kud_plugins\": [\n    \"bpa\"\n  ]\n}\n"},
		"extra vars sorted": {bpav1.ProvisioningSpec{Kubespray: &bpav1.KubesprayConfig{ExtraVars: map[string]bpav1.ExtraVarValue{
			"kube_version": "v1.32.5", "container_manager": "containerd", "ansible_python_interpreter": "/usr/bin/python3"}}},
			"{\n  \"ansible_python_interpreter\": \"/usr/bin/python3\",\n  \"container_manager\": \"containerd\",\n  \"kube_version\": \"v1.32.5\"\n}\n"},
		"IPv6 pod subnet": {bpav1.ProvisioningSpec{PodSubnet: "fd00:10:244::/56"}, "{\n  \"kube_pods_subnet\": \"fd00:10:244::/56\"\n}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ExtraVars(&tc.spec)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			assert.NoError(t, CheckExtraVars(got), "what render-inventory writes, run-kubespray accepts")
		})
	}
}

func TestExtraVarsErrors(t *testing.T) {
	ev := func(kv ...string) *bpav1.KubesprayConfig {
		m := map[string]bpav1.ExtraVarValue{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = bpav1.ExtraVarValue(kv[i+1])
		}
		return &bpav1.KubesprayConfig{ExtraVars: m}
	}
	for name, tc := range map[string]struct {
		spec bpav1.ProvisioningSpec
		want string
	}{
		"subnet twice":   {bpav1.ProvisioningSpec{PodSubnet: "10.0.0.0/16", Kubespray: ev("kube_pods_subnet", "10.1.0.0/16")}, "kubespray.extraVars.kube_pods_subnet: PodSubnet already sets it"},
		"plugins twice":  {bpav1.ProvisioningSpec{KUDPlugins: []bpav1.DebianPackageName{"emco"}, Kubespray: ev("kud_plugins", "x")}, "kubespray.extraVars.kud_plugins: KUDPlugins already sets it"},
		"host bits":      {bpav1.ProvisioningSpec{PodSubnet: "10.0.0.1/16"}, `PodSubnet "10.0.0.1/16": want a CIDR network address`},
		"not a CIDR":     {bpav1.ProvisioningSpec{PodSubnet: "10.0.0.0"}, "want a CIDR network address"},
		"jinja":          {bpav1.ProvisioningSpec{Kubespray: ev("x", "{{ lookup('pipe', 'id') }}")}, `extra vars: x: the value contains "{{"`},
		"jinja stmt":     {bpav1.ProvisioningSpec{Kubespray: ev("x", "{% if %}")}, `contains "{%"`},
		"bad key":        {bpav1.ProvisioningSpec{Kubespray: ev("a-b", "1")}, `extra vars: "a-b" is not an Ansible variable name`},
		"ssh args":       {bpav1.ProvisioningSpec{Kubespray: ev("ansible_ssh_common_args", "-o StrictHostKeyChecking=no")}, "extra vars: ansible_ssh_common_args: BPA sets Ansible's connection variables"},
		"host key check": {bpav1.ProvisioningSpec{Kubespray: ev("ansible_host_key_checking", "false")}, "ansible_host_key_checking"},
		"user":           {bpav1.ProvisioningSpec{Kubespray: ev("ANSIBLE_USER", "x")}, "ANSIBLE_USER"},
		"bad plugin":     {bpav1.ProvisioningSpec{KUDPlugins: []bpav1.DebianPackageName{"-rf"}}, `kud_plugins: "-rf" is not a KUD plugin name`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ExtraVars(&tc.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestCheckExtraVars(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": "b", "kud_plugins": ["emco"]}`: "",
		`[]`:                                  "not a JSON object",
		`null`:                                "not a JSON object",
		`{"a": "b"} {"c": "d"}`:               "trailing data",
		`{"a": {"nested": "x"}}`:              "a: want a string or a list of strings",
		`{"a": 1}`:                            "a: want a string or a list of strings",
		`{"a": ["x", 2]}`:                     "a[1]: want a string",
		`{"a": ["{{ x }}"]}`:                  `a: the value contains "{{"`,
		`{"ansible_ssh_args": "-o X"}`:        "ansible_ssh_args: BPA sets",
		`{"kud_plugins": ["ok", "not ok"]}`:   `"not ok" is not a KUD plugin name`,
		`{"ansible_python_interpreter": "/usr/bin/python3"}`: "",
	} {
		err := CheckExtraVars([]byte(in))
		if want == "" {
			assert.NoError(t, err, in)
		} else {
			assert.ErrorContains(t, err, want, in)
		}
	}
}
