package kubespraysim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

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

// refusal is a run of the stand-in on BPA's render of hosts with vars, as a release.
type refusal struct {
	name    string
	release string
	hosts   []bpav1.HostStatus // nil: an even etcd
	vars    map[string]any
	args    []string // before the playbook, which is last
	want    string   // in the output of a refused run; "" when the checks pass
}

func (r refusal) run(t *testing.T, tmp string) error {
	dir := writeInputs(t, r.hosts, r.vars)
	argv := append([]string{"-i", filepath.Join(dir, "hosts.ini"), "--private-key", "/nonexistent/key", "-u", "root", "-b",
		"-e", "@" + filepath.Join(dir, "vars.yaml")}, r.args...)
	return Check(argv, "quay.io/kubespray/kubespray:"+r.release, tmp)
}

// refusals are inputs real kubespray refuses, and a few it accepts. Every refusal is an
// Ansible task of the tree that names the kubespray task it stands for.
var refusals = []refusal{
	{"even etcd", "v2.28.0", nil, nil, []string{"cluster.yml"}, "TASK [validate_inventory : Stop if even number of etcd hosts]"},
	{"even etcd v2.27", "v2.27.1", nil, nil, []string{"cluster.yml"}, "TASK [kubernetes/preinstall : Stop if even number of etcd hosts]"},
	// v2.27's assert has no etcd_deployment_type condition: kubeadm's etcd is refused too.
	{"even etcd v2.27, kubeadm etcd", "v2.27.1", nil, map[string]any{"etcd_deployment_type": "kubeadm"}, []string{"cluster.yml"},
		"TASK [kubernetes/preinstall : Stop if even number of etcd hosts]"},
	{"even etcd v2.28, kubeadm etcd", "v2.28.0", nil, map[string]any{"etcd_deployment_type": "kubeadm"}, []string{"cluster.yml"},
		"TASK [validate_inventory : Stop if even number of etcd hosts]"},
	{"string boolean", "v2.28.0", cluster, map[string]any{"helm_enabled": "true"}, []string{"cluster.yml"},
		"Stop if known booleans are set as strings (Use JSON format on CLI: -e \"{'key': true }\")"},
	{"v prefix under v2.28", "v2.28.0", cluster, map[string]any{"kube_version": "v1.32.5"}, []string{"cluster.yml"},
		"Stop if some versions have a 'v' left at the start"},
	{"no v under v2.27", "v2.27.0", cluster, map[string]any{"kube_version": "1.31.4"}, []string{"cluster.yml"},
		"TASK [kubernetes/preinstall : Stop if unsupported version of Kubernetes]"},
	{"too old", "v2.28.0", cluster, map[string]any{"kube_version": "1.29.9"}, []string{"cluster.yml"},
		"The current release of Kubespray only support newer version of Kubernetes than 1.30.0"},
	{"no checksum: 1.31.12 on v2.28.0", "v2.28.0", cluster, map[string]any{"kube_version": "1.31.12"}, []string{"cluster.yml"},
		"'dict object' has no attribute '1.31.12'"},
	{"1.31.12 on v2.28.1", "v2.28.1", cluster, map[string]any{"kube_version": "1.31.12"}, []string{"cluster.yml"}, ""},
	{"too new", "v2.28.0", cluster, map[string]any{"kube_version": "1.33.0"}, []string{"cluster.yml"}, "'dict object' has no attribute '1.33.0'"},
	{"pod subnet in the services", "v2.28.0", cluster, map[string]any{"kube_pods_subnet": "10.233.0.0/20"}, []string{"cluster.yml"},
		"kube_pods_subnet cannot be the same network segment as kube_service_addresses"},
	{"nftables on v2.27", "v2.27.1", cluster, map[string]any{"kube_proxy_mode": "nftables"}, []string{"cluster.yml"},
		"kube_proxy_mode can only be 'iptables' or 'ipvs'"},
	{"nftables on v2.28", "v2.28.0", cluster, map[string]any{"kube_proxy_mode": "nftables"}, []string{"cluster.yml"}, ""},
	{"userspace on v2.28", "v2.28.0", cluster, map[string]any{"kube_proxy_mode": "userspace"}, []string{"cluster.yml"},
		"TASK [validate_inventory : Stop if unsupported options selected]"},
	{"etcd_kubeadm_enabled", "v2.28.0", cluster, map[string]any{"etcd_kubeadm_enabled": true}, []string{"cluster.yml"},
		"TASK [validate_inventory : Stop if etcd_kubeadm_enabled is defined]"},
	{"etcd_kubeadm_enabled v2.27", "v2.27.1", cluster, map[string]any{"etcd_kubeadm_enabled": true}, []string{"cluster.yml"},
		"is defined and `etcd_deployment_type` is not `kubeadm` or `host`]"},
	{"download_localhost alone", "v2.28.0", cluster, map[string]any{"download_localhost": true}, []string{"cluster.yml"},
		"download_localhost requires enable download_run_once"},
	{"download_localhost with download_run_once", "v2.28.0", cluster, map[string]any{"download_localhost": true, "download_run_once": true}, []string{"cluster.yml"}, ""},
	{"--limit without facts", "v2.28.0", cluster, nil, []string{"--limit", "w2", "scale.yml"},
		"Kubespray does not support '--limit' without a populated facts cache for the excluded hosts."},
	{"remove-node without node", "v2.28.0", cluster, nil, []string{"-e", `{"skip_confirmation":true}`, "remove-node.yml"}, "No nodes specified for removal."},
	{"remove-node unconfirmed", "v2.28.0", cluster, nil, []string{"-e", "node=w2", "remove-node.yml"}, "Delete nodes confirmation failed"},
	{"remove-node confirmed", "v2.28.0", cluster, nil, []string{"-e", `{"node":"w2","skip_confirmation":true}`, "remove-node.yml"}, ""},
	{"reset unconfirmed", "v2.28.0", cluster, nil, []string{"reset.yml"}, "Reset confirmation failed"},
	{"reset confirmed", "v2.28.0", cluster, nil, []string{"-e", `{"reset_confirmation":true}`, "reset.yml"}, ""},
	{"unknown playbook", "v2.28.0", cluster, nil, []string{"site.yml"}, "the playbook: site.yml could not be found"},
	{"a good cluster", "v2.27.0", cluster, map[string]any{"kube_version": "v1.31.4"}, []string{"cluster.yml"}, ""},
}

// TestRefusesWhatKubesprayRefuses: the real ansible-playbook on the tree refuses each input
// real kubespray refuses, in the task that stands for kubespray's, before any host is touched
// (check-only runs log in nowhere), and passes the rest. And BPA's own model of kubespray
// (pkg/kubespray, which `bpa plan`, lint and the controller use), written apart from the
// playbooks, agrees on every input: each refuses exactly what the other refuses. The model is
// pkg/kubespray's CheckPlaybook, kubespray's own refusals; BPA refuses some inputs before
// kubespray would see them (inventory.CheckExtraVar: download_localhost, say), which is
// tested in pkg/validation.
func TestRefusesWhatKubesprayRefuses(t *testing.T) {
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.run(t, t.TempDir())
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.want)
			}
			if tc.name == "unknown playbook" || strings.Contains(tc.name, "--limit") {
				return // run-kubespray never builds the first; pkg/kubespray's facts rule takes a cache, not hosts
			}
			assert.Equal(t, err != nil, bpaRefuses(t, tc), "the stand-in and pkg/kubespray disagree")
		})
	}
}

// bpaRefuses says whether pkg/kubespray refuses tc's run.
func bpaRefuses(t *testing.T, tc refusal) bool {
	p, patch, err := kubespray.ProfileFor(tc.release)
	require.NoError(t, err)
	inv := kubespray.Inventory{"kube_control_plane": {"m1", "m2"}, "etcd": {"m1", "m2"}, "kube_node": {"m1"}, "k8s_cluster": {"m1", "m2"}}
	if tc.hosts != nil {
		inv = kubespray.Inventory{}
		for _, h := range tc.hosts {
			for _, r := range h.Roles {
				g := map[string]string{"master": "kube_control_plane", "worker": "kube_node"}[r]
				inv[g] = append(inv[g], h.Name)
			}
			if h.Etcd {
				inv["etcd"] = append(inv["etcd"], h.Name)
			}
			inv["k8s_cluster"] = append(inv["k8s_cluster"], h.Name)
		}
	}
	op := kubespray.Operation{Playbook: kubespray.Playbook(strings.TrimSuffix(tc.args[len(tc.args)-1], ".yml")), Vars: opVars(tc.args)}
	vars := map[string]any{}
	for k, v := range tc.vars {
		vars[k] = v
	}
	return len(p.CheckPlaybook(op, inv, vars, patch, func(string) bool { return true })) > 0
}

// opVars reads the -e JSON object or key=value of args, as the operation's variables.
func opVars(args []string) map[string]any {
	vars := map[string]any{}
	for i, a := range args {
		if i == 0 || args[i-1] != "-e" {
			continue
		}
		if strings.HasPrefix(a, "{") {
			if err := json.Unmarshal([]byte(a), &vars); err != nil {
				panic(err)
			}
			continue
		}
		k, v, _ := strings.Cut(a, "=")
		vars[k] = v
	}
	return vars
}
