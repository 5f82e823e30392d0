package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
)

// ---- scenarios j and o: day 2 on one cluster, one change after another ----
//
// Two sites each build a cluster "d2" and change it, one change after another: j its
// workers (a worker, a pool, a dead worker, a failed scale, a removal that removed
// nothing), o its control plane (masters joining, an upgrade, etcd members leaving). Both
// end by deleting it with Reset. Node names carry the prefix d2 (assertNodes).

const d2Base = 230

type day2 struct {
	*env
	p     *bpav1.Provisioning
	hosts map[string]metal3v1.BareMetalHost // by node-ish name: d2m1.., d2w1.., edge-a..
	app   kubernetes.Interface
	// kubelet is the version the cluster's kubelets run: 1.30.4, until an upgrade.
	kubelet string
}

// newDay2 is a day-2 scenario's state on e, with a client of the application apiserver.
func (e *env) newDay2(t *testing.T) *day2 {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.App.Kubeconfig)
	require.NoError(t, err)
	return &day2{env: e, hosts: map[string]metal3v1.BareMetalHost{}, app: kubernetes.NewForConfigOrDie(cfg), kubelet: "v1.30.4"}
}

// dayTwoHost is a BareMetalHost of a day-2 scenario: the n-th simulated machine (its MAC and
// address from n), 8 CPUs and 16 GiB, OK. It returns the host and its MAC.
func (e *env) dayTwoHost(name string, n int) (metal3v1.BareMetalHost, string) {
	h := e.NewHost(name, n)
	return h, h.Spec.BootMACAddress
}

func (e *env) scenarioDay2Workers(t *testing.T) {
	d := e.startDay2(t, true)
	t.Run("add a worker", d.addWorker)
	t.Run("drift found and gone, reading only", d.detectDrift)
	t.Run("scale a pool 2 to 4 and back to 3", d.scalePool)
	t.Run("remove a dead worker", d.removeDeadWorker)
	t.Run("fail mid-scale, argo retry", d.failMidScale)
	t.Run("a removal that removed nothing fails, and a rerun removes", d.removalThatRemovedNothing)
	t.Run("delete with Reset", d.deleteWithReset)
}

func (e *env) scenarioDay2ControlPlane(t *testing.T) {
	d := e.startDay2(t, false)
	t.Run("add masters", d.addMasters)
	t.Run("restore three etcd members", d.restoreMembers)
	t.Run("renew certificates, one master at a time", d.renewCertificates)
	t.Run("upgrade one minor", d.upgrade)
	t.Run("remove two etcd masters", d.removeTwoMasters)
	t.Run("delete with Reset", d.deleteWithReset)
}

// startDay2 provisions cluster d2 (one master and a named worker, with a pool of two when
// pool), on hosts for every change the scenarios make, and waits for it.
func (e *env) startDay2(t *testing.T, pool bool) *day2 {
	d := e.newDay2(t)
	var bmhs []metal3v1.BareMetalHost
	for i, name := range []string{"d2m1", "d2m2", "d2m3", "d2w1", "d2w2", "pool-a", "pool-b", "pool-c", "pool-d", "pool-e", "pool-f"} {
		n := d2Base + i
		h, _ := d.dayTwoHost("d2-"+name, n)
		if strings.HasPrefix(name, "pool-") {
			h.Labels = map[string]string{"pool": "edge"}
		}
		d.hosts[name] = h
		bmhs = append(bmhs, h)
	}
	e.AddHosts(e.ctx, bmhs)
	mac := func(n string) *bpav1.NodeRequirements {
		return &bpav1.NodeRequirements{MACAddress: d.hosts[n].Spec.BootMACAddress}
	}
	d.p = &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "d2", Labels: map[string]string{"cluster": "d2"}},
		Spec: bpav1.ProvisioningSpec{
			Masters:    []bpav1.NodeEntry{{"d2m1": mac("d2m1")}},
			Workers:    []bpav1.NodeEntry{{"d2w1": mac("d2w1")}},
			Kubernetes: &bpav1.KubernetesConfig{Version: "1.30.4"},
			Kubespray:  &bpav1.KubesprayConfig{Version: "v2.28.0"},
		},
	}
	want := []string{"d2m1", "d2w1"}
	if pool {
		d.p.Spec.WorkerPools = []bpav1.WorkerPool{{Name: "d2edge", Replicas: 2, HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "edge"}}, CPU: ptrInt32(4)}}
		want = append([]string{"d2edge-1", "d2edge-2"}, want...)
	}
	e.create(t, d.p)
	got := e.waitPhase(t, d.p.Name, bpav1.PhaseSucceeded)
	require.NotNil(t, got.Status.Applied)
	assert.Equal(t, want, appliedNames(got))
	assert.Equal(t, "1.30.4", got.Status.Applied.KubernetesVersion)
	d.assertNodes(t, got, d.kubelet)
	return d
}

// edit changes the spec (with a fresh copy), shows `bpa plan` for it, and returns the plan.
// A status write in between (a controller's) makes it try again on a fresh copy.
func (d *day2) edit(t *testing.T, change func(p *bpav1.Provisioning)) (*bpav1.Provisioning, string) {
	t.Helper()
	var p *bpav1.Provisioning
	plan := ""
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p = &bpav1.Provisioning{}
		if err := d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, p); err != nil {
			return err
		}
		change(p)
		if plan == "" {
			plan = d.plan(t, p)
		}
		return d.Client.Update(d.ctx, p)
	}))
	return p, plan
}

// plan runs `bpa plan` on the edited CR against its applied state, as an operator would
// before applying the change.
func (d *day2) plan(t *testing.T, p *bpav1.Provisioning) string {
	t.Helper()
	dir := t.TempDir()
	cr := p.DeepCopy()
	cr.APIVersion, cr.Kind, cr.ManagedFields = bpav1.GroupVersion.String(), "Provisioning", nil
	data, err := yaml.Marshal(cr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cr.yaml"), data, 0o644))
	status, err := yaml.Marshal(map[string]any{"status": p.Status})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "status.yaml"), status, 0o644))
	d.writeBareMetalHosts(t, filepath.Join(dir, "bmh.json"))
	out, err := exec.CommandContext(d.ctx, d.BPA, "plan", "-f", filepath.Join(dir, "cr.yaml"), "--applied", filepath.Join(dir, "status.yaml"), "--bmh", filepath.Join(dir, "bmh.json")).CombinedOutput()
	if err != nil {
		return "REFUSED " + string(out)
	}
	return string(out)
}

func appliedNames(p *bpav1.Provisioning) []string {
	var out []string
	for _, h := range p.Status.Applied.Hosts {
		out = append(out, h.Name)
	}
	sort.Strings(out)
	return out
}

// waitGeneration waits until the run of the CR's current generation ends as want.
func (d *day2) waitGeneration(t *testing.T, gen int64, want bpav1.RunPhase) *bpav1.Provisioning {
	t.Helper()
	p := &bpav1.Provisioning{}
	d.waitFor(t, p, d.p.Name, func() bool {
		if p.Status.ObservedGeneration != gen {
			return false
		}
		if want == bpav1.PhaseSucceeded && (p.Status.Phase == bpav1.PhaseFailed || p.Status.Phase == bpav1.PhaseError) {
			t.Fatalf("generation %d %s: %s", gen, p.Status.Phase, p.Status.Message)
		}
		return p.Status.Phase == want
	}, fmt.Sprintf("generation %d %s", gen, want))
	return p
}

// assertNodes checks the application cluster has exactly the applied nodes of this cluster,
// at version.
func (d *day2) assertNodes(t *testing.T, p *bpav1.Provisioning, version string) {
	t.Helper()
	nodes, err := d.app.CoreV1().Nodes().List(d.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range nodes.Items {
		if strings.HasPrefix(n.Name, "d2") {
			names = append(names, n.Name)
			if version != "" {
				assert.Equal(t, version, n.Status.NodeInfo.KubeletVersion, "kubelet version of %s", n.Name)
			}
		}
	}
	sort.Strings(names)
	assert.Equal(t, appliedNames(p), names, "the application cluster's nodes are the applied ones")
	cm := &corev1.ConfigMap{}
	require.NoError(t, d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: "d2-configmap"}, cm))
	var inMap []string
	for k := range cm.Data {
		if _, n, ok := strings.Cut(k, "_"); ok && (strings.HasPrefix(k, "MASTER_") || strings.HasPrefix(k, "WORKER_")) && !slices.Contains(inMap, n) {
			inMap = append(inMap, n)
		}
	}
	sort.Strings(inMap)
	assert.Equal(t, appliedNames(p), inMap, "d2-configmap lists the applied nodes")
}

// lastRuns are the SIMULATED kubespray's runs since before (directory names, NN-playbook).
func (d *day2) runsSince(t *testing.T, before int) []string {
	all := d.kubesprayRuns(t)
	var out []string
	for _, r := range all[before:] {
		out = append(out, strings.SplitN(filepath.Base(r), "-", 2)[1])
	}
	return out
}

// limitOf reads the --limit a recorded run was given.
func limitOf(t *testing.T, run string) string {
	data, err := os.ReadFile(filepath.Join(run, "argv.json"))
	require.NoError(t, err)
	var argv []string
	require.NoError(t, json.Unmarshal(data, &argv))
	if i := slices.Index(argv, "--limit"); i >= 0 {
		return argv[i+1]
	}
	return ""
}

// hostLogs reads every d2 machine's SIMULATED kubespray log: what each run changed on it.
func (d *day2) hostLogs(t *testing.T) map[string][]kubespraysim.Entry {
	out := map[string][]kubespraysim.Entry{}
	for name, h := range d.hosts {
		entries, err := kubespraysim.HostLog(d.Machine(h.Status.HardwareDetails.NIC[0].IP).KubernetesDir())
		require.NoError(t, err)
		out[name] = entries
	}
	return out
}

// touched lists, per machine, what the runs since before did to it.
func (d *day2) touched(t *testing.T, before map[string][]kubespraysim.Entry) map[string][]string {
	out := map[string][]string{}
	for name, entries := range d.hostLogs(t) {
		for _, e := range entries[len(before[name]):] {
			out[name] = append(out[name], e.Playbook+": "+e.Did)
		}
	}
	return out
}

func (d *day2) claimed(t *testing.T) []string {
	var list metal3v1.BareMetalHostList
	require.NoError(t, d.Client.List(d.ctx, &list, client.InNamespace(d.Namespace), client.MatchingLabels{bpav1.HostClaimLabel: "d2"}))
	var out []string
	for _, h := range list.Items {
		out = append(out, h.Name)
	}
	sort.Strings(out)
	return out
}

func (d *day2) addWorker(t *testing.T) {
	sw := &bpav1.Software{
		ObjectMeta: metav1.ObjectMeta{Name: "d2", Namespace: d.Namespace, Labels: map[string]string{"cluster": "d2"}},
		Spec:       bpav1.SoftwareSpec{WorkerSoftware: []bpav1.SoftwareItem{{Name: "tmux"}}, SSH: &bpav1.SSHConfig{Port: int32(d.SSH.Port)}},
	}
	require.NoError(t, d.Client.Create(d.ctx, sw))
	first := d.waitSoftware(t, sw.Name, 1, "")

	before, logs := len(d.kubesprayRuns(t)), d.hostLogs(t)
	p, plan := d.edit(t, func(p *bpav1.Provisioning) {
		p.Spec.Workers = append(p.Spec.Workers, bpav1.NodeEntry{"d2w2": {MACAddress: d.hosts["d2w2"].Spec.BootMACAddress}})
	})
	assert.Contains(t, plan, "scale-workers")
	assert.Contains(t, plan, "'--limit' 'd2w2'")
	got := d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	assert.Equal(t, []string{"facts", "scale"}, d.runsSince(t, before))
	assert.Equal(t, "d2w2", limitOf(t, d.kubesprayRuns(t)[before+1]), "scale.yml is limited to the new host")
	assert.Equal(t, map[string][]string{"d2w2": {"scale.yml: joined, kubelet v1.30.4"}}, d.touched(t, logs), "only the new host is touched")
	assert.Equal(t, []bpav1.OperationStatus{{Name: translator.StepBackupEtcd, Reason: translator.BackupReason, Phase: "Succeeded"},
		{Name: "scale-workers", Playbooks: []string{"facts", "scale"}, Nodes: []string{"d2w2"}, Reason: "add worker d2w2", Phase: "Succeeded"}}, got.Status.Plan,
		"a verified etcd snapshot first")
	d.assertNodes(t, got, "v1.30.4")
	// The new node gets the cluster's Software, and only it.
	w2 := d.Machine(d.hosts["d2w2"].Status.HardwareDetails.NIC[0].IP)
	d.waitSoftware(t, sw.Name, 1, first.Status.NodesHash)
	assert.Len(t, installCalls(w2), 1, "d2w2 gets the Software")
	// Done with Software: its runs take the cluster's lock, and one trying a dead host
	// later would only delay the Provisioning's runs.
	require.NoError(t, d.Client.Delete(d.ctx, sw))
	d.waitGone(t, sw)
}

func (d *day2) scalePool(t *testing.T) {
	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.WorkerPools[0].Replicas = 4 })
	assert.Contains(t, plan, "'--limit' 'd2edge-3,d2edge-4'")
	got := d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	assert.Contains(t, appliedNames(got), "d2edge-4")

	p, plan = d.edit(t, func(p *bpav1.Provisioning) {
		p.Spec.WorkerPools[0].Replicas = 3
		p.Annotations = map[string]string{bpav1.DeleteNodesAnnotation: "d2edge-2"}
	})
	assert.Contains(t, plan, "remove-workers")
	assert.Contains(t, plan, `"node":"d2edge-2"`)
	got = d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	assert.Equal(t, []string{"d2edge-1", "d2edge-3", "d2edge-4", "d2m1", "d2w1", "d2w2"}, appliedNames(got), "the annotated member left")
	d.assertNodes(t, got, "v1.30.4")
	removed := hostOf(t, got, "d2edge-2")
	assert.NotContains(t, d.claimed(t), removed, "the removed node's host is released")
	d.assertReleased(t, d.p, []string{removed})
}

func (d *day2) removeDeadWorker(t *testing.T) {
	w2 := d.Machine(d.hosts["d2w2"].Status.HardwareDetails.NIC[0].IP)
	w2.Stop()
	logs := d.hostLogs(t)
	p, plan := d.edit(t, func(p *bpav1.Provisioning) {
		p.Spec.Workers = p.Spec.Workers[:1] // d2w1 only
	})
	assert.Contains(t, plan, "remove-workers")
	assert.Contains(t, plan, `"node":"d2w2"`)
	stalled := &bpav1.Provisioning{}
	d.waitFor(t, stalled, d.p.Name, func() bool {
		c := findCondition(stalled.Status.Conditions, bpav1.ConditionStalled)
		return stalled.Status.ObservedGeneration == p.Generation && c != nil && c.Reason == "NodeUnreachable"
	}, "Stalled NodeUnreachable")
	assert.Contains(t, stalled.Status.Message, "d2w2")
	assert.Contains(t, stalled.Status.Message, "allowUngraceful")

	p, _ = d.edit(t, func(p *bpav1.Provisioning) { p.Spec.NodeRemoval = &bpav1.NodeRemoval{AllowUngraceful: true} })
	got := d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	assert.NotContains(t, appliedNames(got), "d2w2")
	d.assertNodes(t, got, "v1.30.4")
	assert.NotContains(t, d.claimed(t), "d2-d2w2")
	assert.Equal(t, []string{"remove-node.yml: removed ungracefully, not drained, Node deleted, not reset"}, d.touched(t, logs)["d2w2"])
}

func (d *day2) addMasters(t *testing.T) {
	before := len(d.kubesprayRuns(t))
	p, plan := d.edit(t, func(p *bpav1.Provisioning) {
		p.Spec.Masters = append(p.Spec.Masters, bpav1.NodeEntry{"d2m2": {MACAddress: d.hosts["d2m2"].Spec.BootMACAddress}}, bpav1.NodeEntry{"d2m3": {MACAddress: d.hosts["d2m3"].Spec.BootMACAddress}})
	})
	assert.Contains(t, plan, "add-control-plane")
	assert.Contains(t, plan, "upgrade-control-plane")
	assert.Contains(t, plan, "update-node-proxies")
	got := d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	// nodes.md: "Adding an etcd node" (cluster.yml, then upgrade-cluster.yml, limited), then
	// "Adding/replacing a control plane node" (cluster.yml, for the nodes' apiserver proxies).
	assert.Equal(t, []string{"cluster", "upgrade-cluster", "cluster"}, d.runsSince(t, before), "kubespray's documented order")
	runs := d.kubesprayRuns(t)[before:]
	for _, r := range runs[:2] {
		assert.Equal(t, "etcd,kube_control_plane", limitOf(t, r))
	}
	assert.Empty(t, limitOf(t, runs[2]), "the proxies are updated on every host")
	// Every node outside the control plane now proxies to all three masters.
	workers := 0
	for _, h := range got.Status.Applied.Hosts {
		if slices.Contains(h.Roles, "master") {
			continue
		}
		workers++
		proxy, err := kubespraysim.ReadProxy(d.Machine(h.IP).KubernetesDir())
		require.NoError(t, err)
		var names []string
		for _, u := range proxy.Upstreams {
			names = append(names, strings.Fields(u)[0])
		}
		assert.Equal(t, []string{"d2m1", "d2m2", "d2m3"}, names, "the apiserver proxy of %s", h.Name)
	}
	assert.NotZero(t, workers)
	etcd := 0
	for _, h := range got.Status.Applied.Hosts {
		if h.Etcd {
			etcd++
		}
	}
	assert.Equal(t, 3, etcd, "the etcd count stays odd")
	d.assertNodes(t, got, "v1.30.4")
}

// restoreMembers restores a snapshot of the three-master cluster: restore-etcd stops etcd on
// every member and restores the first, then kubespray's cluster.yml on etcd and the control
// plane (recover-control-plane.md) lets the others rejoin, and verify passes.
func (d *day2) restoreMembers(t *testing.T) {
	snap := d.freshSnapshot(t)
	for _, n := range []string{"d2m1", "d2m2", "d2m3"} {
		d.Machine(d.hosts[n].Status.HardwareDetails.NIC[0].IP).ResetCalls()
	}
	before := len(d.kubesprayRuns(t))
	done := d.ask(t, bpav1.RestoreAnnotation, snap, bpav1.RequestSucceeded, func(p *bpav1.Provisioning) *bpav1.RequestStatus {
		if p.Status.Restore == nil {
			return nil
		}
		return &p.Status.Restore.RequestStatus
	})
	assert.Equal(t, []string{"cluster"}, d.runsSince(t, before), "kubespray's rejoin")
	assert.Equal(t, "etcd,kube_control_plane", limitOf(t, d.kubesprayRuns(t)[before]))
	wfs := d.workflowsOf(t, bpav1.RestoreOfLabel, d.p.Name)
	require.Len(t, wfs, 1)
	phases := stepPhases(t, &wfs[0])
	for _, s := range []string{translator.StepRestoreEtcd, translator.StepRejoinEtcd, translator.StepVerify} {
		assert.Equal(t, "Succeeded", phases[s], s)
	}
	for _, n := range []string{"d2m1", "d2m2", "d2m3"} {
		var calls []string
		for _, c := range d.Machine(d.hosts[n].Status.HardwareDetails.NIC[0].IP).CallsTo("systemctl") {
			calls = append(calls, strings.Join(c.Args, " "))
		}
		assert.Contains(t, calls, "stop etcd", "etcd stopped on %s", n)
		if n == "d2m1" {
			assert.Contains(t, calls, "start etcd", "the first member restored and started")
		}
	}
	d.assertNodes(t, done, "v1.30.4")
}

func (d *day2) upgrade(t *testing.T) {
	before := len(d.kubesprayRuns(t))
	// A downgrade is refused without a Workflow and without touching anything. (Two minors
	// at once are a chain now: scenario l.)
	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.Kubernetes.Version = "1.30.3" })
	assert.Contains(t, plan, "REFUSED")
	stalled := &bpav1.Provisioning{}
	d.waitFor(t, stalled, d.p.Name, func() bool {
		c := findCondition(stalled.Status.Conditions, bpav1.ConditionStalled)
		return c != nil && c.ObservedGeneration == p.Generation && c.Reason == bpav1.ReasonDowngrade
	}, "Stalled "+bpav1.ReasonDowngrade)
	assert.Contains(t, findCondition(stalled.Status.Conditions, bpav1.ConditionStalled).Message, "spec.kubernetes.version")
	assert.Empty(t, d.runsSince(t, before), "nothing ran")

	logs := d.hostLogs(t)
	p, plan = d.edit(t, func(p *bpav1.Provisioning) { p.Spec.Kubernetes.Version = "1.31.4" })
	assert.Contains(t, plan, "upgrade-cluster.yml")
	got := d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	assert.Equal(t, []string{"upgrade-cluster"}, d.runsSince(t, before))
	// Each node was drained with spec.nodeRemoval's settings (kubespray's defaults here), as
	// roles/upgrade/pre-upgrade drains it.
	touched := d.touched(t, logs)
	require.NotEmpty(t, touched)
	for host, did := range touched {
		assert.Equal(t, []string{"upgrade-cluster.yml: upgraded, kubelet v1.30.4 -> v1.31.4, drained (grace period 300, timeout 360s, retries 3)"}, did, host)
	}
	assert.Equal(t, "1.31.4", got.Status.Applied.KubernetesVersion)
	d.kubelet = "v1.31.4"
	d.assertNodes(t, got, d.kubelet)
}

func (d *day2) failMidScale(t *testing.T) {
	require.NoError(t, os.WriteFile(d.FailFile, []byte("scale\n"), 0o644))
	before, logs := len(d.kubesprayRuns(t)), d.hostLogs(t)
	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.WorkerPools[0].Replicas = 4 })
	assert.Contains(t, plan, "'--limit' 'd2edge-2'", "the freed index is reused")
	failed := d.waitGeneration(t, p.Generation, bpav1.PhaseFailed)
	assert.Contains(t, failed.Status.Message, "scale-workers")
	assert.NotContains(t, appliedNames(failed), "d2edge-5", "a node is applied only once the step that adds it succeeded")

	require.NoError(t, os.Remove(d.FailFile))
	out, err := d.Argo(d.ctx, "retry", failed.Status.Workflow.Name)
	require.NoError(t, err, out)
	d.waitPhase(t, d.p.Name, bpav1.PhaseRunning)
	got := d.waitPhase(t, d.p.Name, bpav1.PhaseSucceeded)
	assert.Equal(t, failed.Status.Workflow.Name, got.Status.Workflow.Name, "retried in place")
	runs := d.runsSince(t, before)
	assert.Equal(t, []string{"facts", "scale", "facts", "scale"}, runs, "only the failed step ran again")
	assert.Contains(t, appliedNames(got), "d2edge-2", "the freed index is reused")
	touched := d.touched(t, logs)
	require.Len(t, touched, 1, "only the new member's host was changed: %v", touched)
	for _, did := range touched {
		assert.Equal(t, []string{"scale.yml: joined, kubelet " + d.kubelet}, did, "joined once: the failed attempt changed nothing")
	}
	d.assertNodes(t, got, d.kubelet)
	// The history keeps the retried operation once, with its final result.
	var records []bpav1.OperationRecord
	for _, r := range got.Status.Operations {
		if r.Workflow == failed.Status.Workflow.Name && r.Name == translator.StepScaleWorkers {
			records = append(records, r)
		}
	}
	require.Len(t, records, 1, "%+v", got.Status.Operations)
	assert.Equal(t, "Succeeded", records[0].Result)
	assert.LessOrEqual(t, len(got.Status.Operations), 10)
}

// removeTwoMasters takes the control plane from three masters back to one: each etcd member
// leaves in its own remove-node.yml run (kubespray's remove-etcd-node acts on one), then one
// cluster.yml reconfigures etcd and the proxies on what is left (docs/operations/nodes.md).
func (d *day2) removeTwoMasters(t *testing.T) {
	before, logs := len(d.kubesprayRuns(t)), d.hostLogs(t)
	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.Masters = p.Spec.Masters[:1] })
	assert.Contains(t, plan, "## Step 2/4 remove-control-plane: d2m2 leave the cluster\n")
	assert.Contains(t, plan, "## Step 3/4 remove-control-plane-2: d2m3 leave the cluster\n")
	assert.Contains(t, plan, "## Step 4/4 reconfigure-etcd: ")
	got := d.waitGeneration(t, p.Generation, bpav1.PhaseSucceeded)
	assert.Equal(t, []string{"remove-node", "remove-node", "cluster"}, d.runsSince(t, before), "one removal per etcd member, then the reconfigure")
	runs := d.kubesprayRuns(t)[before:]
	for i, node := range []string{"d2m2", "d2m3"} {
		assert.Equal(t, node, extraVar(t, runs[i], "node"), "run %d removes one member", i+1)
	}
	touched := d.touched(t, logs)
	for _, m := range []string{"d2m2", "d2m3"} {
		require.Len(t, touched[m], 1, "%s: %v", m, touched[m])
		assert.True(t, strings.HasPrefix(touched[m][0], "remove-node.yml: ") && strings.Contains(touched[m][0], "Node deleted, reset"), "%s: %s", m, touched[m][0])
	}
	assert.NotContains(t, appliedNames(got), "d2m2")
	assert.NotContains(t, appliedNames(got), "d2m3")
	etcd := 0
	for _, h := range got.Status.Applied.Hosts {
		if h.Etcd {
			etcd++
		}
	}
	assert.Equal(t, 1, etcd, "one etcd member is left")
	assert.NotContains(t, d.claimed(t), "d2-d2m2")
	assert.NotContains(t, d.claimed(t), "d2-d2m3")
	d.assertNodes(t, got, d.kubelet)
}

// removalThatRemovedNothing: kubespray exits 0 when its node name matches no host, having
// removed nothing. The stand-in is made to do just that; verify must fail the run at once,
// the node must stay in status.applied and claimed, and a rerun must remove it.
func (d *day2) removalThatRemovedNothing(t *testing.T) {
	require.NoError(t, os.WriteFile(d.UnmatchedFile, nil, 0o644))
	before := len(d.kubesprayRuns(t))
	p, plan := d.edit(t, func(p *bpav1.Provisioning) {
		p.Spec.WorkerPools[0].Replicas = 3
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[bpav1.DeleteNodesAnnotation] = "d2edge-4"
	})
	assert.Contains(t, plan, `"node":"d2edge-4"`)
	failed := d.waitGeneration(t, p.Generation, bpav1.PhaseFailed)
	assert.Equal(t, []string{"remove-node"}, d.runsSince(t, before), "kubespray ran once")
	require.Len(t, failed.Status.Plan, 2)
	assert.Equal(t, "Succeeded", failed.Status.Plan[1].Phase, "kubespray's run succeeded")
	assert.Contains(t, failed.Status.Message, "verify")
	assert.Contains(t, failed.Status.Message, "removal did not take effect: node d2edge-4: still registered")
	assert.Contains(t, appliedNames(failed), "d2edge-4", "the node is still in the cluster, and status says so")
	bmh := hostOf(t, failed, "d2edge-4")
	assert.Contains(t, d.claimed(t), bmh, "its host stays claimed")
	d.assertNodes(t, failed, "")

	require.NoError(t, os.Remove(d.UnmatchedFile))
	cr := &bpav1.Provisioning{}
	require.NoError(t, d.Client.Get(d.ctx, client.ObjectKeyFromObject(failed), cr))
	cr.Annotations[bpav1.RerunAnnotation] = "removal-" + strconv.FormatInt(cr.Generation, 10) // annotations set just above
	require.NoError(t, d.Client.Update(d.ctx, cr))
	got := &bpav1.Provisioning{}
	d.waitFor(t, got, d.p.Name, func() bool {
		if got.Status.LastHandledRerun != cr.Annotations[bpav1.RerunAnnotation] {
			return false
		}
		if got.Status.Phase == bpav1.PhaseFailed || got.Status.Phase == bpav1.PhaseError {
			t.Fatalf("the rerun %s: %s", got.Status.Phase, got.Status.Message)
		}
		return got.Status.Phase == bpav1.PhaseSucceeded
	}, "the rerun to succeed")
	assert.Equal(t, []string{"remove-node", "remove-node"}, d.runsSince(t, before), "the rerun removed it again")
	assert.NotContains(t, appliedNames(got), "d2edge-4")
	assert.NotContains(t, d.claimed(t), bmh, "released once it left")
	d.assertNodes(t, got, d.kubelet)
}

// hostOf is the BareMetalHost of node in p's last run.
func hostOf(t *testing.T, p *bpav1.Provisioning, node string) string {
	t.Helper()
	for _, h := range p.Status.Hosts {
		if h.Name == node {
			require.NotEmpty(t, h.BareMetalHost, node)
			return h.BareMetalHost
		}
	}
	t.Fatalf("%s is not a host of the last run", node)
	return ""
}

// extraVar reads one -e variable of a recorded run (the JSON object run-kubespray passes).
func extraVar(t *testing.T, run, name string) string {
	data, err := os.ReadFile(filepath.Join(run, "argv.json"))
	require.NoError(t, err)
	var argv []string
	require.NoError(t, json.Unmarshal(data, &argv))
	for i, a := range argv {
		if a != "-e" || i+1 == len(argv) || !strings.HasPrefix(argv[i+1], "{") {
			continue
		}
		vars := map[string]any{}
		require.NoError(t, json.Unmarshal([]byte(argv[i+1]), &vars))
		if v, ok := vars[name]; ok {
			return fmt.Sprint(v)
		}
	}
	return ""
}

func (d *day2) deleteWithReset(t *testing.T) {
	p, plan := d.edit(t, func(p *bpav1.Provisioning) { p.Spec.DeletionPolicy = bpav1.DeletionReset })
	assert.Contains(t, plan, "0 step(s)", "a deletion policy changes nothing kubespray applies")
	got := &bpav1.Provisioning{}
	d.waitFor(t, got, d.p.Name, func() bool { return got.Status.ObservedGeneration == p.Generation }, "the policy change observed")
	before := len(d.kubesprayRuns(t))
	require.NoError(t, d.Client.Delete(d.ctx, got))
	d.waitGoneWithin(t, got, runTimeout) // reset.yml runs first
	assert.Equal(t, []string{"reset"}, d.runsSince(t, before), "reset.yml ran before the claims went")
	assert.Empty(t, d.claimed(t), "claims are released")
	m1 := d.Machine(d.hosts["d2m1"].Status.HardwareDetails.NIC[0].IP)
	_, err := os.Stat(filepath.Join(m1.KubernetesDir(), "admin.conf"))
	assert.True(t, os.IsNotExist(err), "reset removed admin.conf: %v", err)
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// renewCertificates renews the three masters' certificates with the renew-certificates
// annotation while a client asks the application API server /readyz every 100 ms through
// whichever master answers (as kubespray's nginx-proxy on the workers does): it never goes a
// second without an answer, every master's API server certificate is later than before, and
// verify's reading of them lands in status.certificates.
func (d *day2) renewCertificates(t *testing.T) {
	before := &bpav1.Provisioning{}
	require.NoError(t, d.Client.Get(d.ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.p.Name}, before))
	var masters []string
	for _, h := range before.Status.Applied.Hosts {
		if slices.Contains(h.Roles, "master") {
			masters = append(masters, h.IP)
			d.Machine(h.IP).ResetCalls()
		}
	}
	require.Len(t, masters, 3)
	gap := d.probeThrough(t, masters)
	done := d.ask(t, bpav1.RenewCertificatesAnnotation, "e2e", bpav1.RequestSucceeded, func(p *bpav1.Provisioning) *bpav1.RequestStatus {
		return p.Status.CertificateRenewal
	})
	longest := gap()
	t.Logf("the application API server, through any master, was never away longer than %s", longest)
	assert.Less(t, longest, time.Second, "one master at a time: the others answer")
	cond := findCondition(done.Status.Conditions, bpav1.ConditionCertificatesRenewed)
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
	wfs := d.workflowsOf(t, bpav1.RenewalOfLabel, d.p.Name)
	require.Len(t, wfs, 1)
	phases := stepPhases(t, &wfs[0])
	assert.Equal(t, "Succeeded", phases[translator.StepRenewCertificates])
	assert.Equal(t, "Succeeded", phases[translator.StepVerify])
	apiserver := func(p *bpav1.Provisioning) map[string]time.Time {
		out := map[string]time.Time{}
		for _, c := range p.Status.Certificates {
			if c.Component == "apiserver" {
				out[c.Node] = c.NotAfter.Time
			}
		}
		return out
	}
	was, now := apiserver(before), apiserver(done)
	require.Len(t, now, 3, "each master's apiserver certificate read")
	for node, t0 := range was {
		assert.True(t, now[node].After(t0), "%s: %s, not later than %s", node, now[node], t0)
	}
	for _, ip := range masters {
		assert.NotEmpty(t, d.Machine(ip).CallsTo("crictl"), "kubespray's script restarted the control plane on %s", ip)
	}
}

// probeThrough asks the application API server /readyz every 100 ms through the first of
// ips that answers, until the returned func is called; that returns the longest time
// between two answers.
func (d *day2) probeThrough(t *testing.T, ips []string) func() time.Duration {
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(d.App.CAData))
	hc := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	ask := func() bool {
		for _, ip := range ips {
			req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(ip, strconv.Itoa(d.App.Port))+"/readyz", nil)
			req.Header.Set("Authorization", "Bearer "+d.App.Token)
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return true
				}
			}
		}
		return false
	}
	require.True(t, ask(), "the application API server answers through the masters before the renewal")
	stop := make(chan struct{})
	result := make(chan time.Duration, 1)
	go func() {
		last, longest := time.Now(), time.Duration(0)
		for {
			select {
			case <-stop:
				result <- max(longest, time.Since(last))
				return
			case <-time.After(100 * time.Millisecond):
			}
			if ask() {
				longest, last = max(longest, time.Since(last)), time.Now()
			}
		}
	}()
	return func() time.Duration { close(stop); return <-result }
}
