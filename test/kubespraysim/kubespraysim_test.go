package kubespraysim

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
)

// simRun runs the SIMULATED kubespray on an inventory rendered by BPA for hosts and a vars
// file of vars, with the real ansible-inventory reading the inventory. The hosts' addresses
// are unreachable: a run that passes every check fails at its first SSH login instead.
func simRun(t *testing.T, env map[string]string, hosts []bpav1.HostStatus, vars map[string]any, args ...string) error {
	t.Helper()
	dir := writeInputs(t, hosts, vars)
	t.Setenv(EnvFactsDir, env[EnvFactsDir])
	t.Setenv(EnvImage, env[EnvImage])
	t.Setenv(EnvRecordDir, env[EnvRecordDir])
	argv := append([]string{"-i", filepath.Join(dir, "hosts.ini"), "--private-key", "/nonexistent/key", "-u", "root", "-b",
		"-e", "@" + filepath.Join(dir, "vars.yaml"), "-e", `{"ansible_port":1}`}, args...)
	return run(context.Background(), argv, &bytes.Buffer{})
}

// writeInputs writes hosts.ini (BPA's render of hosts, or an even etcd for none) and
// vars.yaml to a new directory.
func writeInputs(t *testing.T, hosts []bpav1.HostStatus, vars map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	ini := []byte(evenINI) // BPA never renders an even etcd: written by hand
	if hosts != nil {
		var err error
		ini, _, err = bpainventory.Render(hosts, bpainventory.Options{})
		require.NoError(t, err)
	}
	varsYAML, err := bpainventory.MarshalVars(vars)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hosts.ini"), ini, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "vars.yaml"), varsYAML, 0o644))
	return dir
}

func h(name string, ip string, etcd bool, roles ...string) bpav1.HostStatus {
	return bpav1.HostStatus{Name: name, IP: ip, Roles: roles, Etcd: etcd}
}

const evenINI = `[all]
m1 ansible_host=192.0.2.1 ip=192.0.2.1
m2 ansible_host=192.0.2.2 ip=192.0.2.2
[kube_control_plane]
m1
m2
[etcd]
m1
m2
[kube_node]
m1
[k8s_cluster:children]
kube_control_plane
kube_node
`

var cluster = []bpav1.HostStatus{h("m1", "192.0.2.1", true, "master"), h("m2", "192.0.2.2", false, "master"), h("w1", "192.0.2.3", false, "worker"), h("w2", "192.0.2.4", false, "worker")}

// TestRefusesWhatKubesprayRefuses: each refusal carries kubespray's task name and message
// (pkg/kubespray's tables cite where each comes from), and comes before any host is touched.
func TestRefusesWhatKubesprayRefuses(t *testing.T) {
	facts := t.TempDir()
	env := map[string]string{EnvFactsDir: facts}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		hosts []bpav1.HostStatus
		vars  map[string]any
		args  []string
		want  string
	}{
		{"even etcd", env, nil, nil, []string{"cluster.yml"}, "TASK [validate_inventory : Stop if even number of etcd hosts]"},
		{"string boolean", env, cluster, map[string]any{"helm_enabled": "true"}, []string{"cluster.yml"},
			"Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")] fatal: FAILED! => Assertion failed (helm_enabled | type_debug == 'bool')"},
		{"v prefix under v2.28", env, cluster, map[string]any{"kube_version": "v1.32.5"}, []string{"cluster.yml"},
			"Stop if some versions have a 'v' left at the start] fatal: FAILED! => All version string used in kubespray have been normalized to not use a leading 'v'."},
		{"no v under v2.27", map[string]string{EnvFactsDir: facts, EnvImage: "quay.io/kubespray/kubespray:v2.27.0"}, cluster, map[string]any{"kube_version": "1.31.4"}, []string{"cluster.yml"},
			"'dict object' has no attribute '1.31.4'"},
		{"version too new", env, cluster, map[string]any{"kube_version": "1.33.0"}, []string{"cluster.yml"}, "has checksums for 1.30.0 to 1.32.5 only"},
		{"pod subnet in the services", env, cluster, map[string]any{"kube_pods_subnet": "10.233.0.0/20"}, []string{"cluster.yml"},
			"kube_pods_subnet cannot be the same network segment as kube_service_addresses"},
		{"--limit without facts", env, cluster, nil, []string{"--limit", "w2", "scale.yml"},
			"Stop if any host not in '--limit' does not have a fact cache] fatal: FAILED! => Kubespray does not support '--limit' without a populated facts cache for the excluded hosts."},
		{"remove-node without node", env, cluster, nil, []string{"-e", `{"skip_confirmation":true}`, "remove-node.yml"}, "No nodes specified for removal."},
		{"remove-node unconfirmed", env, cluster, nil, []string{"-e", "node=w2", "remove-node.yml"}, "Delete nodes confirmation failed"},
		{"remove the first control plane", env, cluster, nil, []string{"-e", `{"node":"m1","skip_confirmation":true}`, "remove-node.yml"},
			"Currently cannot remove first control plane node or first etcd node"},
		{"reset unconfirmed", env, cluster, nil, []string{"reset.yml"}, "Reset confirmation failed"},
		{"unknown playbook", env, cluster, nil, []string{"site.yml"}, "ERROR! the playbook: site.yml could not be found"},
		{"unknown release", map[string]string{EnvImage: "quay.io/kubespray/kubespray:v2.26.0"}, cluster, nil, []string{"cluster.yml"}, `kubespray "v2.26.0" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := simRun(t, tc.env, tc.hosts, tc.vars, tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "UNREACHABLE", "refused before touching a host")
		})
	}
}

// What passes the checks goes on to log in to the hosts (here unreachable): facts.yml
// without a limit, then scale.yml --limit in the same facts cache, as kubespray documents.
func TestFactsThenScale(t *testing.T) {
	env := map[string]string{EnvFactsDir: t.TempDir()}
	err := simRun(t, env, cluster, nil, "--limit", "w2", "scale.yml")
	require.ErrorContains(t, err, "does not have a fact cache")

	// Facts are cached per host as the SSH login succeeds; here it cannot, so cache them as
	// facts.yml would have, then scale passes the check and goes on to log in.
	for _, host := range []string{"m1", "m2", "w1"} {
		require.NoError(t, os.WriteFile(filepath.Join(env[EnvFactsDir], host), []byte(`{"ansible_default_ipv4": {"address": "192.0.2.9"}}`), 0o644))
	}
	err = simRun(t, env, cluster, map[string]any{"helm_enabled": true, "kube_version": "1.32.5"}, "--limit", "w2", "scale.yml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UNREACHABLE", "past every check")
	err = simRun(t, env, cluster, nil, "-e", `{"node":"w2","skip_confirmation":true}`, "remove-node.yml")
	assert.ErrorContains(t, err, "UNREACHABLE")
}

// Every run is recorded, refused or not, in the layout of `bpa plan -o`.
func TestRecords(t *testing.T) {
	rec := t.TempDir()
	env := map[string]string{EnvFactsDir: t.TempDir(), EnvRecordDir: rec}
	_ = simRun(t, env, cluster, nil, "playbooks/facts.yml")
	_ = simRun(t, env, cluster, nil, "--limit", "w2", "scale.yml")
	for _, f := range []string{"01-facts/argv.json", "01-facts/hosts.ini", "01-facts/vars.yaml", "02-scale/argv.json"} {
		assert.FileExists(t, filepath.Join(rec, f))
	}
	argv, err := os.ReadFile(filepath.Join(rec, "02-scale/argv.json"))
	require.NoError(t, err)
	assert.Contains(t, string(argv), `"--limit",`+"\n"+`  "w2",`)
}
