package translator_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// day2 builds a Provisioning from a spec and an applied host list ("name:roles[:etcd]").
func day2(t *testing.T, spec string, applied *bpav1.AppliedState) *bpav1.Provisioning {
	t.Helper()
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"cluster": "c"}, Generation: 2}}
	require.NoError(t, yaml.UnmarshalStrict([]byte(spec), &p.Spec))
	p.Status.Applied = applied
	return p
}

func host(name string, master, etcd bool) bpav1.HostStatus {
	h := bpav1.HostStatus{Name: name, Roles: []string{"worker"}, MAC: "00:00:00:00:00:" + name[len(name)-1:] + "0", BareMetalHost: "bmh-" + name, IP: "10.0.0.1"}
	if master {
		h.Roles = []string{"master"}
		h.Etcd = etcd
	}
	return h
}

// appliedAs is the applied state of a cluster built from spec by this release.
func appliedAs(t *testing.T, spec string, hosts ...bpav1.HostStatus) *bpav1.AppliedState {
	t.Helper()
	c, err := translator.PlanChange(day2(t, spec, nil))
	require.NoError(t, err)
	return &bpav1.AppliedState{Hosts: hosts, KubesprayVersion: c.KubesprayVersion, KubernetesVersion: c.KubernetesVersion, Settings: c.Settings, Immutable: c.Immutable}
}

// operations plans p's day-2 run and drops the etcd snapshot it takes first
// (TestPlanBackups), leaving the operations.
func operations(t *testing.T, p *bpav1.Provisioning) *translator.ChangePlan {
	t.Helper()
	c, err := translator.PlanChange(p)
	require.NoError(t, err)
	require.Equal(t, translator.StepBackupEtcd, c.Steps[0].Name)
	c.Steps = c.Steps[1:]
	return c
}

type wantStep struct {
	name      string
	nodes     []string
	playbooks []kubespray.Playbook
}

// steps are a plan's operations, without the etcd snapshot a day-2 run takes first
// (TestPlanBackups).
func steps(c *translator.ChangePlan) []wantStep {
	var out []wantStep
	for _, s := range c.Steps {
		if s.Name == translator.StepBackupEtcd {
			continue
		}
		w := wantStep{name: s.Name, nodes: s.Nodes}
		for _, op := range s.Operations {
			w.playbooks = append(w.playbooks, op.Playbook)
		}
		out = append(out, w)
	}
	return out
}

const base = `
masters: [{m1: null}]
workers: [{w1: null}]
kubernetes: {version: 1.31.4}
`

func TestPlanChange(t *testing.T) {
	m1, w1 := host("m1", true, true), host("w1", false, false)
	applied := func(t *testing.T, hosts ...bpav1.HostStatus) *bpav1.AppliedState { return appliedAs(t, base, hosts...) }
	for name, tc := range map[string]struct {
		spec    string
		applied func(t *testing.T) *bpav1.AppliedState
		want    []wantStep
	}{
		"first creation": {base, func(*testing.T) *bpav1.AppliedState { return nil },
			[]wantStep{{"run-kubespray", nil, []kubespray.Playbook{kubespray.Cluster}}}},
		"nothing changed": {base, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) }, nil},
		"a worker added": {`
masters: [{m1: null}]
workers: [{w1: null}, {w2: null}]
kubernetes: {version: 1.31.4}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) },
			[]wantStep{{"scale-workers", []string{"w2"}, []kubespray.Playbook{kubespray.Facts, kubespray.Scale}}}},
		"a worker removed": {`
masters: [{m1: null}]
workers: [{w1: null}]
kubernetes: {version: 1.31.4}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1, host("w2", false, false)) },
			[]wantStep{{"remove-workers", []string{"w2"}, []kubespray.Playbook{kubespray.Remove}}}},
		"two masters added, then workers in the same edit": {`
masters: [{m1: null}, {m2: null}, {m3: null}]
workers: [{w1: null}, {w2: null}]
kubernetes: {version: 1.31.4}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) },
			[]wantStep{
				{"add-control-plane", []string{"m2", "m3"}, []kubespray.Playbook{kubespray.Cluster}},
				{"upgrade-control-plane", []string{"m2", "m3"}, []kubespray.Playbook{kubespray.Upgrade}},
				{"update-node-proxies", nil, []kubespray.Playbook{kubespray.Cluster}},
				{"scale-workers", []string{"w2"}, []kubespray.Playbook{kubespray.Facts, kubespray.Scale}},
			}},
		"a control-plane node without etcd left: the other nodes' proxies forget it": {`
masters: [{m1: {etcd: true}}]
workers: [{w1: null}]
kubernetes: {version: 1.31.4}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, host("m2", true, false), w1) },
			[]wantStep{
				{"remove-control-plane", []string{"m2"}, []kubespray.Playbook{kubespray.Remove}},
				{"update-node-proxies", nil, []kubespray.Playbook{kubespray.Cluster}},
			}},
		"masters added with new settings: the final cluster.yml updates the proxies": {`
masters: [{m1: null}, {m2: null}, {m3: null}]
workers: [{w1: null}]
kubernetes: {version: 1.31.4}
kubespray: {extraVars: {helm_enabled: true}}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) },
			[]wantStep{
				{"add-control-plane", []string{"m2", "m3"}, []kubespray.Playbook{kubespray.Cluster}},
				{"upgrade-control-plane", []string{"m2", "m3"}, []kubespray.Playbook{kubespray.Upgrade}},
				{"reconfigure", nil, []kubespray.Playbook{kubespray.Cluster}},
			}},
		"a master without etcd replaced by two with etcd: the proxies are updated once, at the end": {`
masters: [{m1: {etcd: true}}, {m3: {etcd: true}}, {m4: {etcd: true}}]
workers: [{w1: null}]
kubernetes: {version: 1.31.4}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, host("m2", true, false), w1) },
			[]wantStep{
				{"remove-control-plane", []string{"m2"}, []kubespray.Playbook{kubespray.Remove}},
				{"add-control-plane", []string{"m3", "m4"}, []kubespray.Playbook{kubespray.Cluster}},
				{"upgrade-control-plane", []string{"m3", "m4"}, []kubespray.Playbook{kubespray.Upgrade}},
				{"update-node-proxies", nil, []kubespray.Playbook{kubespray.Cluster}},
			}},
		"two etcd masters removed: remove-node.yml for each, then cluster.yml": {base, func(t *testing.T) *bpav1.AppliedState {
			return applied(t, m1, host("m2", true, true), host("m3", true, true), w1)
		}, []wantStep{
			{"remove-control-plane", []string{"m2"}, []kubespray.Playbook{kubespray.Remove}},
			{"remove-control-plane-2", []string{"m3"}, []kubespray.Playbook{kubespray.Remove}},
			{"reconfigure-etcd", nil, []kubespray.Playbook{kubespray.Cluster}},
		}},
		"workers and masters without etcd leave together, etcd members one by one": {base, func(t *testing.T) *bpav1.AppliedState {
			return applied(t, m1, host("m2", true, true), host("m3", true, true), host("m4", true, false), host("m5", true, false), w1,
				host("w2", false, false), host("w3", false, false))
		}, []wantStep{
			{"remove-workers", []string{"w2", "w3"}, []kubespray.Playbook{kubespray.Remove}},
			{"remove-control-plane", []string{"m4", "m5"}, []kubespray.Playbook{kubespray.Remove}},
			{"remove-control-plane-2", []string{"m2"}, []kubespray.Playbook{kubespray.Remove}},
			{"remove-control-plane-3", []string{"m3"}, []kubespray.Playbook{kubespray.Remove}},
			{"reconfigure-etcd", nil, []kubespray.Playbook{kubespray.Cluster}},
		}},
		"upgrade one minor": {`
masters: [{m1: null}]
workers: [{w1: null}]
kubernetes: {version: 1.32.5}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) },
			[]wantStep{{"preflight", nil, nil}, {"upgrade", nil, []kubespray.Playbook{kubespray.Upgrade}}}},
		"settings changed": {`
masters: [{m1: null}]
workers: [{w1: null}]
kubernetes: {version: 1.31.4}
kubespray: {extraVars: {helm_enabled: true}}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) },
			[]wantStep{{"reconfigure", nil, []kubespray.Playbook{kubespray.Cluster}}}},
		"removal and addition with new settings": {`
masters: [{m1: null}]
workers: [{w2: null}]
kubernetes: {version: 1.31.4}
kubespray: {extraVars: {helm_enabled: true}}`, func(t *testing.T) *bpav1.AppliedState { return applied(t, m1, w1) },
			[]wantStep{
				{"remove-workers", []string{"w1"}, []kubespray.Playbook{kubespray.Remove}},
				{"scale-workers", []string{"w2"}, []kubespray.Playbook{kubespray.Facts, kubespray.Scale}},
				{"reconfigure", nil, []kubespray.Playbook{kubespray.Cluster}},
			}},
	} {
		t.Run(name, func(t *testing.T) {
			prov := day2(t, tc.spec, tc.applied(t))
			c, err := translator.PlanChange(prov)
			require.NoError(t, err)
			assert.Equal(t, tc.want, steps(c))
			if len(tc.want) > 0 && prov.Status.Applied != nil {
				assert.Equal(t, translator.StepBackupEtcd, c.Steps[0].Name, "a day-2 run snapshots etcd first")
			}
			// Argo refuses a DAG with two tasks of one name, or one that depends on nothing it has.
			wf, err := translator.Provisioning(prov, withBackups(translator.Options{}))
			require.NoError(t, err)
			if len(tc.want) > 0 {
				require.NoError(t, validation.ValidateWorkflow(wf))
			}
			p, _, err := kubespray.ProfileFor(c.KubesprayVersion)
			require.NoError(t, err)
			for _, op := range c.Operations() {
				require.NoError(t, p.Validate(op), "every planned operation passes the kubespray contract")
			}
		})
	}
}

func TestPlanDetails(t *testing.T) {
	m1, w1 := host("m1", true, true), host("w1", false, false)
	t.Run("removed nodes leave the inventory of later operations; drain settings are passed", func(t *testing.T) {
		spec := base + "\nnodeRemoval: {drainTimeoutSeconds: 60, allowUngraceful: true}\n"
		c := operations(t, day2(t, spec, appliedAs(t, base, m1, w1, host("w2", false, false), host("m2", true, false))))
		require.Len(t, c.Steps, 3)
		rm := c.Steps[0].Operations[0]
		assert.Equal(t, map[string]any{"node": "w2", "skip_confirmation": true, "drain_grace_period": 300, "drain_timeout": "60s", "drain_retries": 3}, rm.Vars)
		assert.Empty(t, rm.Without, "a node is removed while it is still in the inventory")
		assert.True(t, c.Steps[0].AllowUngraceful)
		assert.Equal(t, []string{"w2"}, c.Steps[1].Operations[0].Without, "the second removal runs without the first's node")
		assert.Equal(t, []kubespray.Playbook{kubespray.Remove}, steps(c)[1].playbooks, "m2 runs no etcd: no cluster.yml in its step")
		assert.Equal(t, "update-node-proxies", c.Steps[2].Name)
		assert.Equal(t, []string{"w2", "m2"}, c.Steps[2].Operations[0].Without, "the proxies are refreshed without the removed nodes")
	})
	t.Run("each etcd member leaves in its own remove-node.yml, on an inventory without those gone before", func(t *testing.T) {
		spec := "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}"
		c := operations(t, day2(t, spec, appliedAs(t, base, m1, host("m2", true, true), host("m3", true, true), host("m4", true, true), host("m5", true, true), w1)))
		require.Len(t, c.Steps, 5)
		for i, m := range []string{"m2", "m3", "m4", "m5"} {
			op := c.Steps[i].Operations[0]
			assert.Equal(t, m, op.Vars["node"], "one node per run")
			assert.Len(t, op.Without, i, m)
			assert.Subset(t, []string{"m2", "m3", "m4", "m5"}[:i], op.Without, m)
			// The inventory holds 5, 4, 3, 2 etcd members: the even ones pass kubespray's
			// "Stop if even number of etcd hosts" only with ignore_assert_errors.
			_, ignored := op.Vars["ignore_assert_errors"]
			assert.Equal(t, i%2 == 1, ignored, m)
			assert.True(t, c.Steps[i].Removes)
		}
		last := c.Steps[4]
		assert.Equal(t, "reconfigure-etcd", last.Name)
		assert.Equal(t, []string{"m2", "m3", "m4", "m5"}, last.Operations[0].Without)
		assert.Empty(t, last.Operations[0].Vars, "the last cluster.yml runs every check: one etcd member is odd")
		assert.Equal(t, "remove-control-plane", translator.StepBase("remove-control-plane-3"))
		assert.Equal(t, "verify-2", translator.StepBase("verify-2"), "only plan steps are numbered")
	})
	t.Run("scale.yml is limited to the new workers, after facts.yml on all", func(t *testing.T) {
		spec := "masters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}, {w3: null}]\nkubernetes: {version: 1.31.4}"
		c := operations(t, day2(t, spec, appliedAs(t, base, m1, w1)))
		ops := c.Steps[0].Operations
		assert.Empty(t, ops[0].Limit)
		assert.Equal(t, []string{"w2", "w3"}, ops[1].Limit)
	})
	t.Run("etcd members join with kubespray's documented limit and ignore_assert_errors", func(t *testing.T) {
		spec := "masters: [{m1: null}, {m2: null}, {m3: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}"
		c := operations(t, day2(t, spec, appliedAs(t, base, m1, w1)))
		require.Len(t, c.Steps, 3)
		for _, s := range c.Steps[:2] {
			assert.Equal(t, []string{"etcd", "kube_control_plane"}, s.Operations[0].Limit)
		}
		// Two etcd members join in one run: etcd_retries=10 (docs/operations/nodes.md).
		assert.Equal(t, map[string]any{"ignore_assert_errors": "yes", "etcd_retries": 10}, c.Steps[0].Operations[0].Vars)
		assert.Equal(t, map[string]any{"ignore_assert_errors": "yes", "etcd_retries": 10,
			"drain_grace_period": 300, "drain_timeout": "360s", "drain_retries": 3}, c.Steps[1].Operations[0].Vars,
			"upgrade-cluster.yml drains the masters with the drain settings")
		assert.False(t, c.Steps[0].Adds, "the masters count as added only once upgrade-cluster.yml succeeded")
		assert.True(t, c.Steps[1].Adds)
		proxies := c.Steps[2]
		assert.Equal(t, "update-node-proxies", proxies.Name)
		assert.Empty(t, proxies.Operations[0].Limit, "cluster.yml on every host: w1's apiserver proxy learns of m2 and m3")
		assert.False(t, proxies.Adds || proxies.Removes)
	})
	t.Run("an upgrade drains with spec.nodeRemoval's settings", func(t *testing.T) {
		spec := "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.32.5}\nnodeRemoval: {drainGracePeriodSeconds: 30, drainRetries: 5}"
		c := operations(t, day2(t, spec, appliedAs(t, base, m1, w1)))
		// The preflight checks come first and run no playbook: nothing is touched if they fail.
		require.Equal(t, []wantStep{{"preflight", nil, nil}, {"upgrade", nil, []kubespray.Playbook{kubespray.Upgrade}}}, steps(c))
		assert.Empty(t, c.Steps[0].Operations)
		assert.Equal(t, map[string]any{"drain_grace_period": 30, "drain_timeout": "360s", "drain_retries": 5}, c.Steps[1].Operations[0].Vars)
	})
	t.Run("masters only: no proxies to update", func(t *testing.T) {
		const masters = "masters: [{m1: null}]\nkubernetes: {version: 1.31.4}"
		m1 := host("m1", true, true)
		m1.Roles = []string{"master", "worker"} // masters run workloads when there are no workers
		c, err := translator.PlanChange(day2(t, "masters: [{m1: null}, {m2: null}, {m3: null}]\nkubernetes: {version: 1.31.4}", appliedAs(t, masters, m1)))
		require.NoError(t, err)
		assert.Equal(t, []wantStep{
			{"add-control-plane", []string{"m2", "m3"}, []kubespray.Playbook{kubespray.Cluster}},
			{"upgrade-control-plane", []string{"m2", "m3"}, []kubespray.Playbook{kubespray.Upgrade}},
		}, steps(c))
	})
	t.Run("a control-plane node without etcd joins with cluster.yml on every host", func(t *testing.T) {
		spec := "masters: [{m1: {etcd: true}}, {m2: {etcd: false}}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}"
		c := operations(t, day2(t, spec, appliedAs(t, base, m1, w1)))
		assert.Equal(t, []wantStep{{"add-control-plane", []string{"m2"}, []kubespray.Playbook{kubespray.Cluster}}}, steps(c))
		assert.Empty(t, c.Steps[0].Operations[0].Limit, "every node's apiserver proxy learns of it")
		assert.Empty(t, c.Steps[0].Operations[0].Vars, "no etcd member joins: kubespray's etcd_retries")
	})
	t.Run("kube_version set as a kubespray variable is planned like spec.kubernetes.version", func(t *testing.T) {
		spec := "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubespray: {extraVars: {kube_version: 1.30.0}}"
		_, err := translator.PlanChange(day2(t, spec, appliedAs(t, base, m1, w1)))
		var r *translator.Refusal
		require.True(t, errors.As(err, &r), "a downgrade through extraVars is refused: %v", err)
		assert.Equal(t, "spec.kubespray.extraVars.kube_version", r.Field)
		assert.Equal(t, bpav1.ReasonDowngrade, r.Reason)
	})
	t.Run("spec.offline on a built cluster reconfigures every host", func(t *testing.T) {
		c, err := translator.PlanChange(day2(t, base+"\noffline: {url: \"https://artifacts.example:8443\"}", appliedAs(t, base, m1, w1)))
		require.NoError(t, err)
		assert.Equal(t, []wantStep{{"reconfigure", nil, []kubespray.Playbook{kubespray.Cluster}}}, steps(c))
	})
	t.Run("a rerun request with nothing changed reconfigures every host", func(t *testing.T) {
		p := day2(t, base, appliedAs(t, base, m1, w1))
		p.Annotations = map[string]string{bpav1.RerunAnnotation: "1"}
		c, err := translator.PlanChange(p)
		require.NoError(t, err)
		assert.Equal(t, []wantStep{{"reconfigure", nil, []kubespray.Playbook{kubespray.Cluster}}}, steps(c))
	})
	t.Run("an empty plan makes no Workflow", func(t *testing.T) {
		wf, err := translator.Provisioning(day2(t, base, appliedAs(t, base, m1, w1)), withBackups(translator.Options{}))
		require.NoError(t, err)
		assert.Nil(t, wf)
	})
}

func TestPlanRefusals(t *testing.T) {
	m1, w1 := host("m1", true, true), host("w1", false, false)
	for name, tc := range map[string]struct {
		spec          string
		applied       []bpav1.HostStatus
		field, reason string
	}{
		"Kubernetes downgrade": {"masters: [{m1: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.30.4}",
			[]bpav1.HostStatus{m1, w1}, "spec.kubernetes.version", bpav1.ReasonDowngrade},
		"upgrade with node changes": {"masters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}]\nkubernetes: {version: 1.32.5}",
			[]bpav1.HostStatus{m1, w1}, "spec.kubernetes.version", bpav1.ReasonUpgradeWithChanges},
		"first control-plane node removed": {"masters: [{m2: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}",
			[]bpav1.HostStatus{m1, host("m2", true, true), host("m3", true, true), w1}, "spec.masters", bpav1.ReasonFirstControlPlane},
		"a new master sorting first": {"masters: [{m1: null}, {a0: {etcd: false}}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}",
			[]bpav1.HostStatus{m1, w1}, "spec.masters", bpav1.ReasonFirstControlPlane},
		"etcd members replaced in one edit": {"masters: [{m1: null}, {m4: null}, {m5: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}",
			[]bpav1.HostStatus{m1, host("m2", true, true), host("m3", true, true), w1}, "spec.masters", bpav1.ReasonEtcdReplacement},
		"a worker becomes a master": {"masters: [{m1: null}, {w1: {etcd: false}}]\nworkers: [{w2: null}]\nkubernetes: {version: 1.31.4}",
			[]bpav1.HostStatus{m1, w1, host("w2", false, false)}, "spec.masters", bpav1.ReasonRoleChange},
		"a master's etcd membership changes": {"masters: [{m1: null}, {m2: null}]\nworkers: [{w1: null}]\nkubernetes: {version: 1.31.4}",
			[]bpav1.HostStatus{m1, host("m2", true, true), host("m3", true, true), w1}, "spec.masters", bpav1.ReasonRoleChange},
		"a node moves to another host": {"masters: [{m1: null}]\nworkers: [{w1: {mac-address: \"00:00:00:00:00:99\"}}]\nkubernetes: {version: 1.31.4}",
			[]bpav1.HostStatus{m1, w1}, "spec", bpav1.ReasonHostChange},
	} {
		t.Run(name, func(t *testing.T) {
			applied := appliedAs(t, base, tc.applied...)
			applied.KubernetesVersion = "1.31.4"
			_, err := translator.PlanChange(day2(t, tc.spec, applied))
			var r *translator.Refusal
			require.True(t, errors.As(err, &r), "want a refusal, got %v", err)
			assert.Equal(t, tc.field, r.Field)
			assert.Equal(t, tc.reason, r.Reason)
			assert.Contains(t, err.Error(), tc.field+": ")
		})
	}
	t.Run("settings a live cluster keeps", func(t *testing.T) {
		withVars := func(vars string) string { return base + "\nkubespray: {extraVars: {" + vars + "}}\n" }
		for name, tc := range map[string]struct{ from, to, field, var_ string }{
			"PodSubnet":        {base + "\nPodSubnet: 10.244.0.0/16\n", base + "\nPodSubnet: 10.245.0.0/16\n", "spec.PodSubnet", "kube_pods_subnet"},
			"PodSubnet set":    {base, base + "\nPodSubnet: 10.245.0.0/16\n", "spec.PodSubnet", "kube_pods_subnet"},
			"service subnet":   {base, withVars("kube_service_addresses: 10.96.0.0/16"), "spec.kubespray.extraVars.kube_service_addresses", "kube_service_addresses"},
			"network plugin":   {base, withVars("kube_network_plugin: flannel"), "spec.kubespray.extraVars.kube_network_plugin", "kube_network_plugin"},
			"etcd deployment":  {base, withVars("etcd_deployment_type: kubeadm"), "spec.kubespray.extraVars.etcd_deployment_type", "etcd_deployment_type"},
			"cluster name":     {base, withVars("cluster_name: edge.local"), "spec.kubespray.extraVars.cluster_name", "cluster_name"},
			"DNS domain":       {base, withVars("dns_domain: edge.local"), "spec.kubespray.extraVars.dns_domain", "dns_domain"},
			"calico pool mode": {base, withVars("calico_vxlan_mode: Never"), "spec.kubespray.extraVars.calico_vxlan_mode", "calico_vxlan_mode"},
		} {
			t.Run(name, func(t *testing.T) {
				applied := appliedAs(t, tc.from, m1, w1)
				require.NotEmpty(t, applied.Immutable)
				_, err := translator.PlanChange(day2(t, tc.to, applied))
				var r *translator.Refusal
				require.True(t, errors.As(err, &r), "want a refusal, got %v", err)
				assert.Equal(t, bpav1.ReasonImmutableSetting, r.Reason)
				assert.Equal(t, tc.field, r.Field)
				assert.Contains(t, r.Message, tc.var_+" is ")
			})
		}
		// A recorded value kept, or a
		// cluster whose record predates them, plans as before.
		applied := appliedAs(t, withVars("helm_enabled: false"), m1, w1)
		c, err := translator.PlanChange(day2(t, withVars("helm_enabled: true"), applied))
		require.NoError(t, err)
		assert.Equal(t, []wantStep{{"reconfigure", nil, []kubespray.Playbook{kubespray.Cluster}}}, steps(c))
		applied.Immutable = nil
		c, err = translator.PlanChange(day2(t, base+"\nPodSubnet: 10.245.0.0/16\n", applied))
		require.NoError(t, err)
		assert.Equal(t, "10.245.0.0/16", c.Immutable["kube_pods_subnet"], "recorded once the run succeeds")
	})
	t.Run("kubespray minor skipped or downgraded", func(t *testing.T) {
		applied := appliedAs(t, base, m1, w1)
		for from, reason := range map[string]string{"v2.25.0": bpav1.ReasonSkippedMinor, "v2.29.0": bpav1.ReasonDowngrade} {
			applied.KubesprayVersion = from
			_, err := translator.PlanChange(day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}]\nkubespray: {version: v2.28.0}\nkubernetes: {version: 1.31.4}", applied))
			var r *translator.Refusal
			require.True(t, errors.As(err, &r), "from %s: %v", from, err)
			assert.Equal(t, "spec.kubespray.version", r.Field)
			assert.Equal(t, reason, r.Reason, from)
		}
	})
}

func TestPoolScaling(t *testing.T) {
	m1 := host("m1", true, true)
	pool := func(n int) string {
		return "masters: [{m1: null}]\nworkerPools: [{name: edge, replicas: " + string(rune('0'+n)) + ", cpu: 4}]\nkubernetes: {version: 1.31.4}"
	}
	members := func(names ...string) []bpav1.HostStatus {
		out := []bpav1.HostStatus{m1}
		for _, n := range names {
			out = append(out, host(n, false, false))
		}
		return out
	}
	t.Run("2 to 4 adds the next two names", func(t *testing.T) {
		c, err := translator.PlanChange(day2(t, pool(4), appliedAs(t, pool(2), members("edge-1", "edge-2")...)))
		require.NoError(t, err)
		assert.Equal(t, []wantStep{{"scale-workers", []string{"edge-3", "edge-4"}, []kubespray.Playbook{kubespray.Facts, kubespray.Scale}}}, steps(c))
	})
	t.Run("4 to 3 removes the newest, or the annotated member", func(t *testing.T) {
		applied := appliedAs(t, pool(4), members("edge-1", "edge-2", "edge-3", "edge-4")...)
		c := operations(t, day2(t, pool(3), applied))
		assert.Equal(t, []string{"edge-4"}, c.Steps[0].Nodes)
		p := day2(t, pool(3), applied)
		p.Annotations = map[string]string{bpav1.DeleteNodesAnnotation: "edge-2"}
		c = operations(t, p)
		assert.Equal(t, []wantStep{{"remove-workers", []string{"edge-2"}, []kubespray.Playbook{kubespray.Remove}}}, steps(c))
	})
	t.Run("names are stable: after edge-2 left, a scale-up reuses its index", func(t *testing.T) {
		c := operations(t, day2(t, pool(4), appliedAs(t, pool(3), members("edge-1", "edge-3", "edge-4")...)))
		assert.Equal(t, []string{"edge-2"}, c.Steps[0].Nodes)
	})
}
