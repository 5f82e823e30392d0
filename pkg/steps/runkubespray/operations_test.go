package runkubespray

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// The inventory render-inventory writes for a cluster whose w1 leaves and w3 joins.
const clusterINI = `[all]
m1 ansible_host=127.0.1.62 ip=127.0.1.62
w1 ansible_host=127.0.1.60 ip=127.0.1.60
w2 ansible_host=127.0.1.61 ip=127.0.1.61
w3 ansible_host=127.0.1.63 ip=127.0.1.63

[kube_control_plane]
m1

[etcd]
m1

[kube_node]
w1
w2
w3

[k8s_cluster:children]
kube_control_plane
kube_node
`

// recorded is one ansible-playbook run the fake recorded: its arguments and the inventory it got.
type recorded struct {
	args      []string
	inventory string
}

// opsFixture is fixture with every playbook in the checkout, the inventory above, and a
// fake ansible-playbook that records each run in a directory of its own and, like
// kubespray's ansible.cfg, caches facts under the container's /tmp ($TMPDIR): facts.yml
// fills the cache, scale.yml fails without it. A run of fail.yml's playbook fails.
func opsFixture(t *testing.T, ops []kubespray.Operation, failPlaybook string) (kubespray.RunOptions, func() []recorded) {
	t.Helper()
	o, _ := fixture(t, "0")
	dir := filepath.Dir(filepath.Dir(o.Inventory))
	for _, pb := range []string{"scale.yml", "remove-node.yml", "upgrade-cluster.yml", "playbooks/facts.yml"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, pb)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, pb), []byte("- hosts: all\n"), 0o644))
	}
	runs := filepath.Join(dir, "runs")
	require.NoError(t, os.Mkdir(runs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bin/ansible-playbook"), []byte(`#!/bin/sh
d=`+runs+`/$(ls `+runs+` | wc -l)
mkdir "$d"
for a in "$@"; do printf '%s\n' "$a"; done > "$d/args"
prev=
for a in "$@"; do [ "$prev" = -i ] && cp "$a" "$d/hosts.ini"; prev=$a; done
case "$a" in
`+failPlaybook+`) echo "fatal: [m1]: FAILED! injected"; exit 2 ;;
playbooks/facts.yml) touch "${TMPDIR:-/tmp}/facts-cache" ;;
scale.yml) [ -f "${TMPDIR:-/tmp}/facts-cache" ] || { echo "fatal: [m1]: FAILED! no facts cache"; exit 3; } ;;
esac
`), 0o755))
	t.Setenv("TMPDIR", t.TempDir())
	require.NoError(t, os.WriteFile(o.Inventory, []byte(clusterINI), 0o644))
	data, err := json.Marshal(ops)
	require.NoError(t, err)
	o.Operations = filepath.Join(dir, "in", "operations.json")
	require.NoError(t, os.WriteFile(o.Operations, data, 0o644))
	return o, func() []recorded {
		var out []recorded
		for i := 0; ; i++ {
			args, err := os.ReadFile(filepath.Join(runs, strconv.Itoa(i), "args"))
			if os.IsNotExist(err) {
				return out
			}
			require.NoError(t, err)
			ini, err := os.ReadFile(filepath.Join(runs, strconv.Itoa(i), "hosts.ini"))
			require.NoError(t, err)
			out = append(out, recorded{strings.Split(strings.TrimSpace(string(args)), "\n"), string(ini)})
		}
	}
}

func (r recorded) playbook() string { return r.args[len(r.args)-1] }

func (r recorded) flag(name string) string {
	for i, a := range r.args[:len(r.args)-1] {
		if a == name {
			return r.args[i+1]
		}
	}
	return ""
}

// The operations of a scale-up after a removal run in order, in one container: scale.yml
// finds the facts facts.yml cached in /tmp. Both run on the inventory without the removed
// node, written under the container's /tmp.
func TestRunOperationsInOrder(t *testing.T) {
	facts := kubespray.GatherFacts("gather facts")
	facts.Without = []string{"w1"}
	scale := kubespray.ScaleNodes([]string{"w3"}, "add worker w3")
	scale.Without = []string{"w1"}
	o, runs := opsFixture(t, []kubespray.Operation{facts, scale}, "none")
	require.NoError(t, Run(context.Background(), o))
	got := runs()
	require.Len(t, got, 2)
	assert.Equal(t, "playbooks/facts.yml", got[0].playbook())
	assert.Equal(t, "", got[0].flag("--limit"))
	assert.Equal(t, "scale.yml", got[1].playbook())
	assert.Equal(t, "w3", got[1].flag("--limit"))
	for i, r := range got {
		assert.Equal(t, kubespray.InventoryWithout(os.Getenv("TMPDIR"), i), r.flag("-i"))
		want := strings.Replace(strings.Replace(clusterINI, "w1 ansible_host=127.0.1.60 ip=127.0.1.60\n", "", 1), "\nw1\n", "\n", 1)
		assert.Equal(t, want, r.inventory)
		assert.NotContains(t, r.inventory, "w1")
	}

	// Alone, scale.yml finds no facts: the cache is the container's, not carried over.
	o, _ = opsFixture(t, []kubespray.Operation{scale}, "none")
	err := Run(context.Background(), o)
	assert.ErrorContains(t, err, "operation 1/1 (scale.yml: add worker w3): ansible-playbook scale.yml failed (exit status 3): fatal: [m1]: FAILED! no facts cache")
}

// The first failure stops the step, and the message names the operation.
func TestRunStopsAtTheFirstFailure(t *testing.T) {
	ops := []kubespray.Operation{kubespray.GatherFacts("gather facts"), kubespray.ScaleNodes([]string{"w3"}, "add worker w3"), kubespray.UpgradeCluster("upgrade")}
	o, runs := opsFixture(t, ops, "scale.yml")
	require.NoError(t, os.Remove(filepath.Join(filepath.Dir(filepath.Dir(o.Inventory)), "scale.yml")))
	err := Run(context.Background(), o)
	assert.ErrorContains(t, err, "playbook: stat scale.yml", "every playbook is checked before anything runs")
	assert.Empty(t, runs())

	o, runs = opsFixture(t, ops, "playbooks/facts.yml")
	err = Run(context.Background(), o)
	assert.ErrorContains(t, err, "operation 1/3 (playbooks/facts.yml: gather facts): ansible-playbook playbooks/facts.yml failed (exit status 2): fatal: [m1]: FAILED! injected")
	assert.Len(t, runs(), 1)
}

// The operations file crossed an Argo parameter: each is checked before anything runs.
func TestRunRefusesBadOperations(t *testing.T) {
	for name, tc := range map[string]struct{ ops, want string }{
		"not a list":     {`{"playbook":"cluster"}`, "want a JSON list of kubespray operations"},
		"empty":          {`[]`, "want 1 to 16 operations, got 0"},
		"unknown field":  {`[{"playbook":"cluster","program":"sh"}]`, `unknown field "program"`},
		"unknown book":   {`[{"playbook":"cluster"},{"playbook":"site"}]`, `operation 2: operation: unknown playbook "site"`},
		"vars of file":   {`[{"playbook":"cluster","vars":{"ansible_ssh_common_args":"-o ProxyCommand=x"}}]`, "not a variable of this playbook"},
		"without option": {`[{"playbook":"facts","without":["-i"]}]`, `without "-i": want host names`},
		"limit pattern":  {`[{"playbook":"scale","limit":["all:!m1"]}]`, `limit "all:!m1"`},
	} {
		t.Run(name, func(t *testing.T) {
			o, runs := opsFixture(t, nil, "none")
			require.NoError(t, os.WriteFile(o.Operations, []byte(tc.ops), 0o644))
			assert.ErrorContains(t, Run(context.Background(), o), tc.want)
			assert.Empty(t, runs())
		})
	}
}

// A removal probes the nodes it drains over real SSH. A node that does not answer stops the
// step before anything runs, unless --allow-ungraceful: then it is removed first, without
// draining or resetting it, and the reachable node after it, on the inventory without it.
func TestRunRemovesUnreachableNodes(t *testing.T) {
	sites := simhost.NewCluster(t)
	w1 := sites.Start("w1", "127.0.1.60") // w2 at 127.0.1.61 has no sshd: the port is closed
	remove := kubespray.RemoveNodes([]string{"w1", "w2"}, false, "remove w1, w2")
	for k, v := range map[string]any{"drain_grace_period": 30, "drain_timeout": "60s", "drain_retries": 1} {
		remove.Vars[k] = v
	}
	setup := func(allow bool) (kubespray.RunOptions, func() []recorded) {
		o, runs := opsFixture(t, []kubespray.Operation{remove}, "none")
		o.SSHKey, o.KnownHosts, o.SSHPort, o.AllowUngraceful = sites.ClientKeyPath(), sites.KnownHostsPath(), w1.Port, allow
		return o, runs
	}

	o, runs := setup(false)
	err := Run(context.Background(), o)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "NodeUnreachable: cannot reach node w2 over SSH"), err.Error())
	assert.Contains(t, err.Error(), "set spec.nodeRemoval.allowUngraceful")
	assert.Contains(t, err.Error(), "connection refused")
	assert.Empty(t, runs(), "nothing runs")

	o, runs = setup(true)
	require.NoError(t, Run(context.Background(), o))
	got := runs()
	require.Len(t, got, 2)
	assert.Equal(t, "remove-node.yml", got[0].playbook())
	assert.Equal(t, `{"allow_ungraceful_removal":true,"drain_grace_period":30,"drain_retries":1,"drain_timeout":"60s","node":"w2","reset_nodes":false,"skip_confirmation":true}`, got[0].args[10])
	assert.Equal(t, o.Inventory, got[0].flag("-i"), "kubespray removes a node that is still in the inventory")
	assert.Equal(t, clusterINI, got[0].inventory)
	assert.Equal(t, "remove-node.yml", got[1].playbook())
	assert.Equal(t, `{"drain_grace_period":30,"drain_retries":1,"drain_timeout":"60s","node":"w1","skip_confirmation":true}`, got[1].args[10])
	assert.NotContains(t, got[1].inventory, "w2")
	assert.Contains(t, got[1].inventory, "w1 ansible_host=127.0.1.60")

	// Every node reachable: the planned operation, as it is.
	remove.Vars["node"] = "w1"
	o, runs = setup(false)
	require.NoError(t, Run(context.Background(), o))
	got = runs()
	require.Len(t, got, 1)
	assert.Equal(t, `{"drain_grace_period":30,"drain_retries":1,"drain_timeout":"60s","node":"w1","skip_confirmation":true}`, got[0].args[10])

	// A host that answers but whose key is not the known one is not dead: refused, even with
	// allowUngraceful, before anything runs.
	o, runs = setup(true)
	o.KnownHosts = filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(o.KnownHosts, []byte("127.0.1.60 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"), 0o644))
	err = Run(context.Background(), o)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "node w1 (127.0.1.60")
	assert.Contains(t, err.Error(), "answers but cannot be logged in to")
	assert.False(t, strings.HasPrefix(err.Error(), "NodeUnreachable"), err.Error())
	assert.Empty(t, runs(), "nothing runs")

	remove.Vars["node"] = "w9"
	o, _ = setup(true)
	assert.ErrorContains(t, Run(context.Background(), o), "operation remove-node: node w9 is not in the inventory")
}
