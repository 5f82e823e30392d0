package kubespray

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProfileFor(t *testing.T) {
	p, patch, err := ProfileFor("v2.28.0")
	require.NoError(t, err)
	assert.Equal(t, "v2.28", p.Minor)
	assert.Equal(t, 0, patch)
	p, _, err = ProfileFor("")
	require.NoError(t, err)
	assert.Equal(t, "v2.28", p.Minor, "no version is kubespray's default release")
	for _, bad := range []string{"v2.26.0", "v2.28.2", "2.28.0", "v2.28", "latest", "v2.28.0-rc1"} {
		_, _, err := ProfileFor(bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "want one of v2.27.0, v2.27.1, v2.28.0, v2.28.1", bad)
	}
}

// The versions are kubelet_checksums' keys at each tag (roles/kubespray-defaults/defaults/main/
// checksums.yml in v2.27, roles/kubespray_defaults/vars/main/checksums.yml in v2.28), not
// older than kube_version_min_required.
func TestKubeVersionVar(t *testing.T) {
	for _, tc := range []struct{ kubespray, kube, want, err string }{
		{"v2.28.0", "1.32.5", "1.32.5", ""},
		{"v2.28.0", "v1.30.0", "1.30.0", ""}, // v2.28 normalised versions: no leading v
		{"", "1.31.2", "1.31.2", ""},
		{"v2.27.0", "1.31.4", "v1.31.4", ""}, // v2.27 still writes v1.31.4
		{"v2.27.1", "1.29.0", "v1.29.0", ""},
		{"v2.28.0", "1.32.6", "", "Kubernetes 1.32.6 is not one kubespray v2.28.0 has kubelet checksums for: it installs 1.32.0–1.32.5, 1.31.0–1.31.9, 1.30.0–1.30.13 (kubespray v2.28.1 installs it)"},
		{"v2.28.1", "1.32.8", "1.32.8", ""},
		{"v2.28.1", "1.31.12", "1.31.12", ""},
		// Between v2.28.0's oldest and newest, but it has no checksums for it.
		{"v2.28.0", "1.31.12", "", "Kubernetes 1.31.12 is not one kubespray v2.28.0 has kubelet checksums for"},
		{"v2.28.0", "1.29.15", "", "Kubernetes 1.29.15 is older than kubespray v2.28.0's kube_version_min_required 1.30.0"},
		{"v2.27.0", "1.31.5", "", "(kubespray v2.27.1, v2.28.0, v2.28.1 installs it)"},
		{"v2.28.1", "1.33.0", "", "(no supported release installs it)"},
		{"v2.26.0", "1.30.0", "", `kubespray "v2.26.0" is not supported`},
		{"v2.28.0", "1.32", "", "not a Kubernetes version"},
	} {
		got, err := KubeVersionVar(tc.kubespray, tc.kube)
		if tc.err != "" {
			require.Error(t, err, "%s %s", tc.kubespray, tc.kube)
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, tc.want, got)
	}
}

// Each release's set: kube_version's default is its newest, and the message compacts runs.
func TestKubeVersions(t *testing.T) {
	for tag, want := range map[string]struct{ min, newest, desc string }{
		"v2.27.0": {"1.29.0", "1.31.4", "1.31.0–1.31.4, 1.30.0–1.30.8, 1.29.0–1.29.12"},
		"v2.27.1": {"1.29.0", "1.31.9", "1.31.0–1.31.9, 1.30.0–1.30.13, 1.29.0–1.29.15"},
		"v2.28.0": {"1.30.0", "1.32.5", "1.32.0–1.32.5, 1.31.0–1.31.9, 1.30.0–1.30.13"},
		"v2.28.1": {"1.30.0", "1.32.8", "1.32.0–1.32.8, 1.31.0–1.31.12, 1.30.0–1.30.14"},
	} {
		p, patch, err := ProfileFor(tag)
		require.NoError(t, err)
		assert.Equal(t, want.min, p.MinRequired(patch).String(), tag)
		assert.Equal(t, want.newest, p.DefaultKube(patch).String(), tag)
		assert.Equal(t, want.desc, p.DescribeKube(patch), tag)
	}
	assert.Equal(t, [][2]KubeVersion{{{30, 0}, {30, 1}}, {{30, 3}, {30, 3}}, {{31, 0}, {31, 0}}},
		kubeRuns([]KubeVersion{{30, 0}, {30, 1}, {30, 3}, {31, 0}}), "a gap starts a run, and so does a minor")
	assert.Equal(t, "1.31.0, 1.30.3, 1.30.0–1.30.1", describeRuns(kubeRuns([]KubeVersion{{30, 0}, {30, 1}, {30, 3}, {31, 0}})))
}

func TestArgv(t *testing.T) {
	p, _, err := ProfileFor("v2.28.0")
	require.NoError(t, err)
	f := Files{Program: "ansible-playbook", Inventory: "/i/hosts.ini", PrivateKey: "/k", User: "root", VarsFile: "/i/vars.yaml", Overrides: []string{`{"ansible_port":22}`}}
	for _, tc := range []struct {
		op   Operation
		want []string
	}{
		{CreateCluster("new cluster"), []string{"-e", "@/i/vars.yaml", "-e", `{"ansible_port":22}`, "cluster.yml"}},
		{GatherFacts(""), []string{"-e", "@/i/vars.yaml", "-e", `{"ansible_port":22}`, "playbooks/facts.yml"}},
		{ScaleNodes([]string{"w3", "w4"}, ""), []string{"--limit", "w3,w4", "-e", "@/i/vars.yaml", "-e", `{"ansible_port":22}`, "scale.yml"}},
		{RemoveNodes([]string{"w2"}, false, ""), []string{"-e", "@/i/vars.yaml", "-e", `{"node":"w2","skip_confirmation":true}`, "-e", `{"ansible_port":22}`, "remove-node.yml"}},
		{RemoveNodes([]string{"w2", "w3"}, true, ""), []string{"-e", "@/i/vars.yaml", "-e", `{"allow_ungraceful_removal":true,"node":"w2,w3","reset_nodes":false,"skip_confirmation":true}`, "-e", `{"ansible_port":22}`, "remove-node.yml"}},
		{UpgradeCluster(""), []string{"-e", "@/i/vars.yaml", "-e", `{"ansible_port":22}`, "upgrade-cluster.yml"}},
		{ResetCluster(""), []string{"-e", "@/i/vars.yaml", "-e", `{"reset_confirmation":"yes"}`, "-e", `{"ansible_port":22}`, "reset.yml"}},
	} {
		got, err := p.Argv(tc.op, f)
		require.NoError(t, err, tc.op.Playbook)
		assert.Equal(t, append([]string{"ansible-playbook", "-i", "/i/hosts.ini", "--private-key", "/k", "-u", "root", "-b"}, tc.want...), got)
	}
}

// Each playbook gets exactly the -e variables it needs (remove-node.yml: node and
// skip_confirmation, or v2.27 removes every host and the pause prompts; reset.yml:
// reset_confirmation=yes), and nothing a vars file should carry.
func TestOperationValidate(t *testing.T) {
	p, _, _ := ProfileFor("v2.28.0")
	for name, tc := range map[string]struct {
		op   Operation
		want string
	}{
		"unknown playbook":       {Operation{Playbook: "site"}, `unknown playbook "site"`},
		"remove without node":    {Operation{Playbook: Remove, Vars: map[string]any{"skip_confirmation": true}}, "-e node is required"},
		"remove unconfirmed":     {Operation{Playbook: Remove, Vars: map[string]any{"node": "w1"}}, "-e skip_confirmation is required"},
		"remove confirm string":  {Operation{Playbook: Remove, Vars: map[string]any{"node": "w1", "skip_confirmation": "true"}}, "-e skip_confirmation: invalid value"},
		"remove bad node":        {Operation{Playbook: Remove, Vars: map[string]any{"node": "w1,all:!x", "skip_confirmation": true}}, "-e node: invalid value"},
		"reset unconfirmed":      {Operation{Playbook: Reset}, "-e reset_confirmation is required"},
		"reset no":               {Operation{Playbook: Reset, Vars: map[string]any{"reset_confirmation": "no"}}, "invalid value"},
		"cluster with other var": {Operation{Playbook: Cluster, Vars: map[string]any{"kube_version": "1.32.5"}}, "-e kube_version: not a variable of this playbook"},
		"limit pattern":          {Operation{Playbook: Scale, Limit: []string{"all:!w1"}}, `limit "all:!w1"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := p.Validate(tc.op)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestOperationJSONRoundTrip(t *testing.T) {
	op := RemoveNodes([]string{"w1"}, true, "worker w1 left the spec")
	b, err := json.Marshal(op)
	require.NoError(t, err)
	var back Operation
	require.NoError(t, json.Unmarshal(b, &back))
	p, _, _ := ProfileFor("")
	require.NoError(t, p.Validate(back), "a decoded operation is still valid: %s", b)
}

func TestEtcdMembers(t *testing.T) {
	got, err := EtcdMembers([]string{"c", "a", "d", "b"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"c", "a", "d"}, got, "the largest odd subset, in CR order")
	got, err = EtcdMembers([]string{"c", "a"}, map[string]bool{"c": false})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, got)
	_, err = EtcdMembers([]string{"c", "a", "b"}, map[string]bool{"b": false})
	assert.ErrorContains(t, err, "2 masters run etcd")
	_, err = EtcdMembers(nil, nil)
	assert.Error(t, err)
}

func TestProfileForImage(t *testing.T) {
	for image, minor := range map[string]string{
		"quay.io/kubespray/kubespray:v2.28.0":                 "v2.28",
		"registry.local:5000/kubespray:v2.27.1@sha256:abcdef": "v2.27",
	} {
		p, _, err := ProfileForImage(image)
		require.NoError(t, err, image)
		assert.Equal(t, minor, p.Minor, image)
	}
	for _, image := range []string{"registry.local:5000/kubespray", "quay.io/kubespray/kubespray:latest"} {
		_, _, err := ProfileForImage(image)
		assert.ErrorContains(t, err, "v2.28.0", image)
	}
}
