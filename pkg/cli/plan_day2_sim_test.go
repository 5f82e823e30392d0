package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// The hosts of examples/provisioning-by-mac.yaml as a run applied them (examples/bmh).
var (
	appliedMaster  = bpav1.HostStatus{Name: "master", Roles: []string{"master"}, Etcd: true, MAC: "00:c6:14:04:61:b2", IP: "10.213.1.11", BareMetalHost: "node-01"}
	appliedWorker1 = bpav1.HostStatus{Name: "worker-1", Roles: []string{"worker"}, MAC: "00:c2:12:03:62:b1", IP: "10.213.1.12", BareMetalHost: "node-02"}
	appliedWorker2 = bpav1.HostStatus{Name: "worker-2", Roles: []string{"worker"}, MAC: "00:c2:12:03:62:b2", IP: "10.213.1.13", BareMetalHost: "node-03"}
)

const day2BMH = "../../examples/bmh/provisioning-by-mac.yaml"

// byMac is examples/provisioning-by-mac.yaml with the given workers and spec lines.
func byMac(t *testing.T, workers []bpav1.HostStatus, extra string) (string, *bpav1.Provisioning) {
	t.Helper()
	cr := "apiVersion: bpa.akraino.org/v1alpha1\nkind: Provisioning\nmetadata:\n  name: provisioning-sample\n  labels: {cluster: cluster-abc}\n" +
		"spec:\n  masters:\n    - master: {mac-address: \"00:c6:14:04:61:b2\"}\n  workers:\n"
	for _, w := range workers {
		cr += "    - " + w.Name + ": {mac-address: \"" + w.MAC + "\"}\n"
	}
	file := filepath.Join(t.TempDir(), "cr.yaml")
	require.NoError(t, os.WriteFile(file, []byte(cr+extra), 0o644))
	return file, readCR(t, file)
}

// appliedFile writes what the cluster is as a document of the given shape.
func appliedFile(t *testing.T, shape string, p *bpav1.Provisioning, kube string, hosts ...bpav1.HostStatus) string {
	t.Helper()
	settings, err := translator.SettingsDigest(&p.Spec)
	require.NoError(t, err)
	built := p.DeepCopy()
	built.Status = bpav1.ProvisioningStatus{}
	c, err := translator.PlanChange(built) // the values the cluster was built with
	require.NoError(t, err)
	applied := &bpav1.AppliedState{Hosts: hosts, KubesprayVersion: kubespray.DefaultVersion, KubernetesVersion: kube, Settings: settings, Immutable: c.Immutable}
	var doc any = applied
	switch shape {
	case "status":
		doc = map[string]any{"status": bpav1.ProvisioningStatus{Applied: applied}}
	case "provisioning":
		q := p.DeepCopy()
		q.Status.Applied, q.Status.Phase = applied, bpav1.PhaseSucceeded
		doc = q
	case "applied-in-status":
		doc = bpav1.ProvisioningStatus{Applied: applied}
	}
	data, err := json.Marshal(doc)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "applied.json")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	return file
}

// appliedFileAt is appliedFile's "applied" document of a cluster kubespray release built.
func appliedFileAt(t *testing.T, p *bpav1.Provisioning, release, kube string, hosts ...bpav1.HostStatus) string {
	t.Helper()
	file := appliedFile(t, "applied", p, kube, hosts...)
	var a bpav1.AppliedState
	readJSON(t, file, &a)
	a.KubesprayVersion = release
	data, err := json.Marshal(a)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, data, 0o644))
	return file
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, v))
}

// A worker added to a running cluster: facts.yml on every host, then scale.yml limited to
// it, in one step (one container), whatever shape --applied has; the SIMULATED kubespray
// accepts both in one facts cache.
func TestPlanAddWorker(t *testing.T) {
	cr, p := byMac(t, []bpav1.HostStatus{appliedWorker1, appliedWorker2}, "")
	for _, shape := range []string{"applied", "status", "provisioning", "applied-in-status"} {
		t.Run(shape, func(t *testing.T) {
			dir := t.TempDir()
			_, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, shape, p, "1.32.5", appliedMaster, appliedWorker1), "--output-dir", dir)
			require.NoError(t, err)
			assert.Equal(t, []string{"01-facts", "02-scale"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:"+kubespray.DefaultVersion))
			var argv []string
			readJSON(t, filepath.Join(dir, "02-scale", "argv.json"), &argv)
			assert.Equal(t, []string{"ansible-playbook", "-i", "/bpa/in/hosts.ini", "--private-key", "/tmp/bpa/ssh/ssh-privatekey", "-u", "root", "-b",
				"--limit", "worker-2", "-e", "@/bpa/in/extra-vars.yaml"}, argv[:12])
			assert.Equal(t, "scale.yml", argv[len(argv)-1])
			readJSON(t, filepath.Join(dir, "01-facts", "argv.json"), &argv)
			assert.NotContains(t, argv, "--limit")
			assert.Equal(t, "playbooks/facts.yml", argv[len(argv)-1])
			var change translator.ChangePlan
			readJSON(t, filepath.Join(dir, "plan.json"), &change)
			require.Len(t, change.Steps, 2)
			assert.Equal(t, translator.StepBackupEtcd, change.Steps[0].Name, "a verified etcd snapshot first")
			assert.Equal(t, translator.StepScaleWorkers, change.Steps[1].Name)
			assert.Equal(t, []string{"worker-2"}, change.Steps[1].Nodes)
		})
	}

	out, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", appliedMaster, appliedWorker1))
	require.NoError(t, err)
	for _, want := range []string{
		"## Step 1/2 backup-etcd: take a verified etcd snapshot before changing the cluster",
		"## Step 2/2 scale-workers: add worker worker-2\n## nodes: worker-2\n",
		"\n# 1. facts: gather every host's facts for scale.yml's --limit\n'ansible-playbook' '-i' '/bpa/in/hosts.ini'",
		"\n# 2. scale: add worker worker-2\n'ansible-playbook' '-i' '/bpa/in/hosts.ini' '--private-key' '/tmp/bpa/ssh/ssh-privatekey' '-u' 'root' '-b' '--limit' 'worker-2' ",
		"worker-2 ansible_host=10.213.1.13 ip=10.213.1.13\n",
	} {
		assert.Contains(t, out, want)
	}
}

// A worker removed: remove-node.yml with kubespray's drain defaults, the node still in the
// inventory, at the address it was applied with. Removed and added at once: the removal
// first, and the additions on the inventory without the removed node.
func TestPlanRemoveWorker(t *testing.T) {
	cr, p := byMac(t, []bpav1.HostStatus{appliedWorker1}, "")
	dir := t.TempDir()
	_, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", appliedMaster, appliedWorker1, appliedWorker2), "--output-dir", dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"01-remove-node"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:"+kubespray.DefaultVersion))
	var argv []string
	readJSON(t, filepath.Join(dir, "01-remove-node", "argv.json"), &argv)
	assert.Equal(t, []string{"-e", `{"drain_grace_period":300,"drain_retries":3,"drain_timeout":"360s","node":"worker-2","skip_confirmation":true}`}, argv[10:12])
	assert.Equal(t, "remove-node.yml", argv[len(argv)-1])
	ini, err := os.ReadFile(filepath.Join(dir, "01-remove-node", "hosts.ini"))
	require.NoError(t, err)
	assert.Contains(t, string(ini), "worker-2 ansible_host=10.213.1.13")

	// spec.nodeRemoval's drain settings, and worker-1 leaves while worker-2 joins.
	cr, p = byMac(t, []bpav1.HostStatus{appliedWorker2}, "  nodeRemoval: {drainGracePeriodSeconds: 30, drainTimeoutSeconds: 60, drainRetries: 1, allowUngraceful: true}\n")
	dir = t.TempDir()
	_, err = plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", appliedMaster, appliedWorker1), "--output-dir", dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"01-remove-node", "02-facts", "03-scale"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:"+kubespray.DefaultVersion))
	readJSON(t, filepath.Join(dir, "01-remove-node", "argv.json"), &argv)
	assert.Equal(t, `{"drain_grace_period":30,"drain_retries":1,"drain_timeout":"60s","node":"worker-1","skip_confirmation":true}`, argv[11])
	assert.Equal(t, "/bpa/in/hosts.ini", argv[2])
	for op, path := range map[string]string{"02-facts": "/tmp/bpa/run/01-hosts.ini", "03-scale": "/tmp/bpa/run/02-hosts.ini"} {
		readJSON(t, filepath.Join(dir, op, "argv.json"), &argv)
		assert.Equal(t, path, argv[2], "run-kubespray's inventory without worker-1, numbered in its step")
		ini, err := os.ReadFile(filepath.Join(dir, op, "hosts.ini"))
		require.NoError(t, err)
		assert.NotContains(t, string(ini), "worker-1")
		assert.Contains(t, string(ini), "worker-2 ansible_host=10.213.1.13")
	}
	out, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", appliedMaster, appliedWorker1))
	require.NoError(t, err)
	assert.Contains(t, out, "## Step 2/3 remove-workers: worker-1 leave the cluster\n## nodes: worker-1\n## a node that cannot be reached over SSH at run time is removed first, without draining or resetting it")
	assert.Contains(t, out, "# hosts.ini (-i /tmp/bpa/run/02-hosts.ini, without worker-1)\n")
}

// An upgrade of one minor runs upgrade-cluster.yml; a skipped minor is refused, naming the
// field and the rule, and nothing is written.
func TestPlanUpgrade(t *testing.T) {
	workers := []bpav1.HostStatus{appliedWorker1, appliedWorker2}
	cr, p := byMac(t, workers, "  kubernetes: {version: 1.32.5}\n")
	dir := t.TempDir()
	_, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.31.9", appliedMaster, appliedWorker1, appliedWorker2), "--output-dir", dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"01-upgrade-cluster"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:"+kubespray.DefaultVersion))
	var op kubespray.Operation
	readJSON(t, filepath.Join(dir, "01-upgrade-cluster", "operation.json"), &op)
	assert.Equal(t, kubespray.Upgrade, op.Playbook)
	assert.Contains(t, op.Reason, "1.31.9")
	vars, err := os.ReadFile(filepath.Join(dir, "01-upgrade-cluster", "vars.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(vars), `"kube_version": !unsafe "1.32.5"`)
	// roles/upgrade/pre-upgrade drains each node: with spec.nodeRemoval's settings.
	assert.Equal(t, map[string]any{"drain_grace_period": 300.0, "drain_timeout": "360s", "drain_retries": 3.0}, op.Vars)
	cr2, p2 := byMac(t, workers, "  kubernetes: {version: 1.32.5}\n  nodeRemoval: {drainGracePeriodSeconds: 30, drainTimeoutSeconds: 90, drainRetries: 2}\n")
	out, err := plan(t, "-f", cr2, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p2, "1.31.9", appliedMaster, appliedWorker1, appliedWorker2))
	require.NoError(t, err)
	assert.Contains(t, out, "# drains each node: grace period 30s, timeout 90s, 2 retries (spec.nodeRemoval)\n")
	assert.Contains(t, out, `'-e' '{"drain_grace_period":30,"drain_retries":2,"drain_timeout":"90s"}' '-e'`)

	// A cluster that kubespray v2.25 built: pkg/kubespray records no v2.26 to pass through.
	dir = t.TempDir()
	_, err = plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFileAt(t, p, "v2.25.0", "1.30.4", appliedMaster, appliedWorker1, appliedWorker2), "--output-dir", dir)
	var exit *cli.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.Code)
	assert.Contains(t, err.Error(), "the change is refused and nothing would run: spec.kubespray.version: no kubespray v2.26 release in pkg/kubespray")
	assert.Contains(t, err.Error(), "(rule "+bpav1.ReasonSkippedMinor+")")
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries)
}

// A jump of three Kubernetes minors and a kubespray minor is a chain of three
// upgrade-cluster.yml runs, one step each, each in its release's image with its Kubernetes
// version (-e kube_version in v2.27's format before the last, the vars file's at the last),
// in every output format; the stand-in kubespray, acting as each hop's release, accepts each.
func TestPlanChain(t *testing.T) {
	workers := []bpav1.HostStatus{appliedWorker1, appliedWorker2}
	cr, p := byMac(t, workers, "  kubespray: {version: v2.28.1}\n  kubernetes: {version: 1.32.8}\n")
	applied := appliedFileAt(t, p, "v2.27.0", "1.29.5", appliedMaster, appliedWorker1, appliedWorker2)
	dir := t.TempDir()
	_, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", applied, "--output-dir", dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"01-upgrade-cluster", "02-upgrade-cluster", "03-upgrade-cluster"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:v2.28.1"))
	var change translator.ChangePlan
	readJSON(t, filepath.Join(dir, "plan.json"), &change)
	var got [][3]string
	for _, s := range change.Steps {
		got = append(got, [3]string{s.Name, s.Release, s.Kubernetes})
	}
	assert.Equal(t, [][3]string{{"backup-etcd", "", ""}, {"preflight", "", ""}, {"upgrade", "v2.27.1", "1.30.13"}, {"backup-etcd-2", "", ""},
		{"upgrade-2", "v2.27.1", "1.31.9"}, {"backup-etcd-3", "", ""}, {"upgrade-3", "v2.28.1", "1.32.8"}}, got,
		"a snapshot and the preflight checks, then one step per hop, each after a snapshot")
	for d, want := range map[string]any{"01-upgrade-cluster": "v1.30.13", "02-upgrade-cluster": "v1.31.9", "03-upgrade-cluster": nil} {
		var op kubespray.Operation
		readJSON(t, filepath.Join(dir, d, "operation.json"), &op)
		assert.Equal(t, want, op.Vars["kube_version"], d)
		assert.Equal(t, 300.0, op.Vars["drain_grace_period"], "%s drains as an upgrade", d)
	}

	out, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", applied)
	require.NoError(t, err)
	for _, want := range []string{
		"# Plan: 7 step(s), to kubespray v2.28.1 and Kubernetes 1.32.8\n",
		"## Step 1/7 backup-etcd: ",
		"## Step 2/7 preflight: ",
		"## Step 4/7 backup-etcd-2: ",
		"## Step 3/7 upgrade: upgrade kubespray v2.27.0 → v2.28.1 and Kubernetes 1.29.5 → 1.32.8, hop 1 of 3: kubespray v2.27.0 → v2.27.1 and Kubernetes 1.29.5 → 1.30.13\n" +
			"## runs in quay.io/kubespray/kubespray:v2.27.1: kubespray v2.27.1 takes the cluster to Kubernetes 1.30.13;",
		"## Step 5/7 upgrade-2: upgrade kubespray v2.27.0 → v2.28.1 and Kubernetes 1.29.5 → 1.32.8, hop 2 of 3: Kubernetes 1.30.13 → 1.31.9 with kubespray v2.27.1\n",
		"## Step 7/7 upgrade-3: upgrade kubespray v2.27.0 → v2.28.1 and Kubernetes 1.29.5 → 1.32.8, hop 3 of 3: kubespray v2.27.1 → v2.28.1 and Kubernetes 1.31.9 → 1.32.8\n" +
			"## runs in quay.io/kubespray/kubespray:v2.28.1:",
		`'{"drain_grace_period":300,"drain_retries":3,"drain_timeout":"360s","kube_version":"v1.31.9"}'`,
	} {
		assert.Contains(t, out, want)
	}
	out, err = plan(t, "-f", cr, "--bmh", day2BMH, "--applied", applied, "-o", "json")
	require.NoError(t, err)
	var doc struct {
		Steps []struct {
			Name, Image, Release string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Len(t, doc.Steps, 7)
	assert.Equal(t, "quay.io/kubespray/kubespray:v2.27.1", doc.Steps[4].Image)
	assert.Equal(t, "quay.io/kubespray/kubespray:v2.28.1", doc.Steps[6].Image)

	// bpa lint --applied plans as plan and the controller do: the chain passes, a jump no
	// recorded release bridges is refused with the same rule and message.
	// A day-2 run takes an etcd snapshot first: without a backup server in the site
	// policy it is refused, naming the field; with one it passes.
	out, err = lint("-f", cr, "--applied", applied)
	require.Error(t, err)
	assert.Contains(t, out, "spec.etcdBackup.beforeDay2: ")
	assert.Contains(t, out, "("+bpav1.ReasonNoBackupServer+")")
	withBackups := backupPolicy(t)
	out, err = lint("-f", cr, "--applied", applied, "--policy", withBackups)
	require.NoError(t, err, out)
	out, err = lint("-f", cr, "--policy", withBackups, "--applied", appliedFileAt(t, p, "v2.25.0", "1.30.4", appliedMaster, appliedWorker1, appliedWorker2))
	require.Error(t, err)
	assert.Contains(t, out, "spec.kubespray.version: no kubespray v2.26 release in pkg/kubespray")
	assert.Contains(t, out, "("+bpav1.ReasonSkippedMinor+")")
}

// One master to three: cluster.yml then upgrade-cluster.yml limited to etcd and the control
// plane, both with etcd_retries=10 since two etcd members join in one run
// (docs/operations/nodes.md), and the stand-in kubespray accepts both.
func TestPlanAddEtcdMasters(t *testing.T) {
	cr := "apiVersion: bpa.akraino.org/v1alpha1\nkind: Provisioning\nmetadata:\n  name: provisioning-sample\n  labels: {cluster: cluster-abc}\n" +
		"spec:\n  masters:\n    - master: {mac-address: \"00:c6:14:04:61:b2\"}\n    - master-2: {mac-address: \"" + appliedWorker1.MAC + "\"}\n" +
		"    - master-3: {mac-address: \"" + appliedWorker2.MAC + "\"}\n"
	file := filepath.Join(t.TempDir(), "cr.yaml")
	require.NoError(t, os.WriteFile(file, []byte(cr), 0o644))
	p := readCR(t, file)
	master := appliedMaster
	master.Roles = []string{"master", "worker"} // alone, the master runs workloads
	dir := t.TempDir()
	out, err := plan(t, "-f", file, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", master), "--output-dir", dir)
	require.NoError(t, err, out)
	assert.Equal(t, []string{"01-cluster", "02-upgrade-cluster"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:"+kubespray.DefaultVersion))
	for _, op := range []string{"01-cluster", "02-upgrade-cluster"} {
		var argv []string
		readJSON(t, filepath.Join(dir, op, "argv.json"), &argv)
		assert.Equal(t, []string{"--limit", "etcd,kube_control_plane"}, argv[8:10], op)
		assert.Contains(t, argv[13], `"etcd_retries":10`, op)
	}
	out, err = plan(t, "-f", file, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", master))
	require.NoError(t, err)
	assert.Contains(t, out, `'-e' '{"etcd_retries":10,"ignore_assert_errors":"yes"}' '-e'`)
}

// Two etcd masters leave: remove-node.yml for each, in tasks of their own, the second on
// an inventory without the first (two etcd members: ignore_assert_errors, or v2.28's
// boilerplate.yml refuses), then one cluster.yml on the rest; the stand-in accepts each.
func TestPlanRemoveEtcdMasters(t *testing.T) {
	file, p := byMac(t, nil, "")
	master := appliedMaster
	master.Roles = []string{"master", "worker"}
	m2 := bpav1.HostStatus{Name: "master-2", Roles: []string{"master"}, Etcd: true, MAC: appliedWorker1.MAC, IP: appliedWorker1.IP, BareMetalHost: appliedWorker1.BareMetalHost}
	m3 := bpav1.HostStatus{Name: "master-3", Roles: []string{"master"}, Etcd: true, MAC: appliedWorker2.MAC, IP: appliedWorker2.IP, BareMetalHost: appliedWorker2.BareMetalHost}
	for _, release := range []string{"v2.27.1", kubespray.DefaultVersion} {
		t.Run(release, func(t *testing.T) {
			cr, p := file, p
			if release != kubespray.DefaultVersion {
				cr, p = byMac(t, nil, "  kubespray: {version: "+release+"}\n  kubernetes: {version: 1.31.9}\n")
			}
			kube := map[bool]string{true: "1.32.5", false: "1.31.9"}[release == kubespray.DefaultVersion]
			applied := appliedFile(t, "applied", p, kube, master, m2, m3)
			if release != kubespray.DefaultVersion {
				var a bpav1.AppliedState
				readJSON(t, applied, &a)
				a.KubesprayVersion = release
				data, _ := json.Marshal(a)
				require.NoError(t, os.WriteFile(applied, data, 0o644))
			}
			dir := t.TempDir()
			out, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", applied, "--output-dir", dir)
			require.NoError(t, err, out)
			assert.Equal(t, []string{"01-remove-node", "02-remove-node", "03-cluster"}, CheckPlanDir(t, dir, "quay.io/kubespray/kubespray:"+release))
			var change translator.ChangePlan
			readJSON(t, filepath.Join(dir, "plan.json"), &change)
			require.Len(t, change.Steps, 4)
			assert.Equal(t, translator.StepBackupEtcd, change.Steps[0].Name)
			assert.Equal(t, []string{"master-2"}, change.Steps[1].Nodes)
			assert.Equal(t, []string{"master-3"}, change.Steps[2].Nodes)
			var argv []string
			readJSON(t, filepath.Join(dir, "02-remove-node", "argv.json"), &argv)
			assert.Contains(t, argv[11], `"ignore_assert_errors":"yes"`)
			assert.Contains(t, argv[11], `"node":"master-3"`)
			ini, err := os.ReadFile(filepath.Join(dir, "02-remove-node", "hosts.ini"))
			require.NoError(t, err)
			assert.NotContains(t, string(ini), "master-2")
		})
	}
	out, err := plan(t, "-f", file, "--bmh", day2BMH, "--applied", appliedFile(t, "applied", p, "1.32.5", master, m2, m3))
	require.NoError(t, err)
	assert.Contains(t, out, "## Step 2/4 remove-control-plane: master-2 leave the cluster\n")
	assert.Contains(t, out, "## Step 3/4 remove-control-plane-2: master-3 leave the cluster\n")
	assert.Contains(t, out, "## Step 4/4 reconfigure-etcd: etcd member master-2, master-3 left")
}

// A PodSubnet change on a built cluster is refused, naming the field and the rule, and
// nothing is written: calico's pool keeps its CIDR.
func TestPlanImmutableSetting(t *testing.T) {
	workers := []bpav1.HostStatus{appliedWorker1}
	_, built := byMac(t, workers, "  PodSubnet: 10.244.0.0/16\n")
	cr, _ := byMac(t, workers, "  PodSubnet: 10.245.0.0/16\n")
	dir := t.TempDir()
	_, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "status", built, "1.32.5", appliedMaster, appliedWorker1), "--output-dir", dir)
	var exit *cli.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Contains(t, err.Error(), "the change is refused and nothing would run: spec.PodSubnet: kube_pods_subnet is 10.244.0.0/16 in the running cluster and would become 10.245.0.0/16")
	assert.Contains(t, err.Error(), "Check if inventory match current cluster configuration")
	assert.Contains(t, err.Error(), "(rule "+bpav1.ReasonImmutableSetting+")")
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries)
	_, err = plan(t, "-f", cr, "--bmh", day2BMH, "--applied", appliedFile(t, "status", built, "1.32.5", appliedMaster, appliedWorker1))
	require.Error(t, err, "printing refuses it too")
}

// bpa lint --applied refuses the same change as plan and the controller, naming the field
// and the reason; without --applied (no live cluster to compare with) the CR is fine.
func TestLintAppliedImmutableSetting(t *testing.T) {
	workers := []bpav1.HostStatus{appliedWorker1}
	_, built := byMac(t, workers, "  PodSubnet: 10.244.0.0/16\n")
	cr, _ := byMac(t, workers, "  PodSubnet: 10.245.0.0/16\n")
	applied := appliedFile(t, "status", built, "1.32.5", appliedMaster, appliedWorker1)
	out, err := lint("-f", cr)
	require.NoError(t, err, out)
	out, err = lint("-f", cr, "--applied", applied)
	require.Error(t, err)
	assert.Contains(t, out, "Provisioning/"+readCR(t, cr).Name+": spec.PodSubnet: kube_pods_subnet is 10.244.0.0/16 in the running cluster and would become 10.245.0.0/16")
	assert.Contains(t, out, "("+bpav1.ReasonImmutableSetting+")")
	out, err = lint("-f", cr, "-f", cr, "--applied", applied)
	require.Error(t, err)
	assert.Contains(t, out, "describes one cluster, but 2 Provisionings were linted")
	_, err = lint("--applied", applied)
	require.ErrorContains(t, err, "--applied needs the Provisioning to lint with it (-f)")
}

// lint runs `bpa lint args...`, its output and errors in one string.
// backupPolicy writes a site policy naming an etcd backup server (with its name-constrained
// CA), for `bpa lint --policy`.
func backupPolicy(t *testing.T) string {
	const server = "https://backups.site:8443"
	pol := bpav1.BPAPolicy{TypeMeta: metav1.TypeMeta{APIVersion: bpav1.GroupVersion.String(), Kind: "BPAPolicy"}, ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName},
		Spec: bpav1.BPAPolicySpec{EtcdBackupServer: server, ArtifactServers: []bpav1.ArtifactServer{{URL: server, CABundle: string(nodetrusttest.NewCA(t, []string{"backups.site"}).PEM)}}}}
	data, err := yaml.Marshal(pol)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "policy.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	return file
}

func lint(args ...string) (string, error) {
	root := cli.NewRootCommand()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"lint"}, args...))
	err := root.Execute()
	return out.String(), err
}

// --applied is read strictly: a misspelt field is an error, never a first creation.
func TestPlanAppliedErrors(t *testing.T) {
	cr, _ := byMac(t, []bpav1.HostStatus{appliedWorker1}, "")
	for doc, want := range map[string]string{
		`{"hosts":[{"name":"master","role":["master"]}]}`: `read as a Provisioning's status.applied: json: unknown field "role"`,
		`{"status":{"aplied":{}}}`:                        `read as a Provisioning status: json: unknown field "aplied"`, //nolint:misspell // the misspelt field is the input under test
		`{"applied":{"hosts":[]}}`:                        "no applied hosts (status.applied.hosts)",
		`[1]`:                                             "want a YAML or JSON object",
	} {
		file := filepath.Join(t.TempDir(), "applied.yaml")
		require.NoError(t, os.WriteFile(file, []byte(doc), 0o644))
		_, err := plan(t, "-f", cr, "--bmh", day2BMH, "--applied", file)
		require.Error(t, err, doc)
		assert.Contains(t, err.Error(), "--applied "+file+": ", doc)
		assert.Contains(t, err.Error(), want, doc)
	}
}

// `bpa plan --live` reads the CR, its status.applied and its BareMetalHosts from a real
// apiserver with the caller's kubeconfig, and plans what the files give.
func TestPlanLive(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallBareMetalHostCRD(ctx, r.RESTConfig))
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	cr, p := byMac(t, []bpav1.HostStatus{appliedWorker1, appliedWorker2}, "")
	applied := appliedFile(t, "applied", p, "1.32.5", appliedMaster, appliedWorker1)
	bmhs, err := hostmatch.ReadBareMetalHostsFile(day2BMH)
	require.NoError(t, err)
	p.Namespace = r.Namespace
	readJSON(t, applied, &p.Status.Applied)
	status := p.Status
	require.NoError(t, c.Create(ctx, p))
	p.Status = status
	require.NoError(t, c.Status().Update(ctx, p))
	for _, h := range bmhs {
		h.Namespace = r.Namespace
		status := h.Status
		require.NoError(t, c.Create(ctx, &h))
		h.Status = status
		require.NoError(t, c.Status().Update(ctx, &h))
	}

	want, got := t.TempDir(), t.TempDir()
	_, err = plan(t, "-f", cr, "--bmh", day2BMH, "--applied", applied, "--output-dir", want)
	require.NoError(t, err)
	_, err = plan(t, "--live", p.Name, "-n", r.Namespace, "--kubeconfig", r.Kubeconfig, "--output-dir", got)
	require.NoError(t, err)
	assert.Equal(t, []string{"01-facts", "02-scale"}, CheckPlanDir(t, got, "quay.io/kubespray/kubespray:"+kubespray.DefaultVersion))
	for _, f := range []string{"plan.json", "01-facts/argv.json", "01-facts/hosts.ini", "02-scale/argv.json", "02-scale/hosts.ini", "02-scale/vars.yaml"} {
		w, err := os.ReadFile(filepath.Join(want, f))
		require.NoError(t, err)
		g, err := os.ReadFile(filepath.Join(got, f))
		require.NoError(t, err)
		assert.Equal(t, string(w), string(g), f)
	}

	_, err = plan(t, "--live", "nope", "-n", r.Namespace, "--kubeconfig", r.Kubeconfig)
	assert.ErrorContains(t, err, "Provisioning "+r.Namespace+"/nope: ")
	_, err = plan(t, "--live", p.Name, "-f", cr, "--kubeconfig", r.Kubeconfig)
	assert.ErrorContains(t, err, "--live reads the CR and its status from the cluster: give neither -f nor --applied")
	_, err = plan(t, "-f", cr)
	assert.ErrorContains(t, err, "give -f CR.yaml and --bmh HOSTS.yaml, or --live NAME")
}
