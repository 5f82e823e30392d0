package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/workflow/packer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// maxRunWorkflowKiB is issue 14's bound on the Workflow of a 1,000-node run, status
// included, as stored: half of Argo's own limit (MAX_WORKFLOW_SIZE, 1 MiB), beyond which
// its controller compresses the node statuses, then fails the run unless a database takes
// them (nodeStatusOffload).
const maxRunWorkflowKiB = 512

// TestThousandNodeRunWorkflowSize stores on a real apiserver the Workflow of a finished
// day-2 run that added 1,000 pool workers to a 15-master cluster (scale-workers, so every
// new node's name is in the plan annotation and in the step's operations), with the status
// Argo's controller keeps for it, and measures the JSON the apiserver returns, which is
// what it stores in etcd. The status is built as Argo builds it (see finishedStatus): the
// hosts list, the inventory and the vars file appear in it once per node that took or
// gave them. The log names the parts that weigh most.
func TestThousandNodeRunWorkflowSize(t *testing.T) {
	p, hosts := thousandNodeScaleUp(t)
	// The site's backup server, with a CA of a realistic size: a day-2 run snapshots etcd first.
	wf, err := translator.Provisioning(p, translator.Options{BackupServer: "https://backups.site:8443", BackupServerCA: string(nodetrusttest.NewCA(t, []string{"backups.site"}).PEM)})
	require.NoError(t, err)
	require.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", translator.StepBackupEtcd, translator.StepScaleWorkers, "verify", "publish-kubeconfig"},
		translator.StepsOf(mustPlan(t, p)))

	// The step outputs, as the steps write them.
	hostsJSON, err := json.Marshal(hosts)
	require.NoError(t, err)
	ini, _, err := inventory.Render(hosts, inventory.Options{})
	require.NoError(t, err)
	vars, err := inventory.ExtraVars(&p.Spec)
	require.NoError(t, err)
	backup := `{"name":"etcd-20261128T013902Z.db","size":2147483648,"sha256":"e90501e26b42e78f0cf5c71ba1d003ee6aee55928a61b3facb4783b6e83f409a","revision":123456789,"member":"master-1","takenAt":"2026-11-28T01:39:02Z","verified":true,"workflow":"edge-provision-2"}`
	// verify's certificates at their bound (bpav1.MaxCertificates entries).
	certs := stepio.Certificates{CheckedAt: metav1.Now()}
	for i := range bpav1.MaxCertificates {
		certs.Certificates = append(certs.Certificates, bpav1.CertificateStatus{Node: fmt.Sprintf("master-%d", i%15+1),
			Component: "apiserver-kubelet-client", NotAfter: metav1.Now(), Subject: "kube-apiserver-kubelet-client"})
	}
	certsJSON, err := json.Marshal(certs)
	require.NoError(t, err)
	outputs := map[string]string{"hosts": string(hostsJSON), "inventory": string(ini), "extra-vars": string(vars), "backup": backup, "certificates": string(certsJSON)}
	wf.Status = finishedStatus(t, wf, outputs)

	t.Logf("hosts JSON %.1f KiB (%d hosts), inventory %.1f KiB, vars %.1f KiB", kib(len(hostsJSON)), len(hosts), kib(len(ini)), kib(len(vars)))
	t.Logf("the Workflow as Argo builds it: %.1f KiB (spec %.1f KiB, plan annotation %.1f KiB, status %.1f KiB)",
		kib(jsonSize(t, wf)), kib(jsonSize(t, wf.Spec)), kib(len(wf.Annotations[translator.PlanAnnotation])), kib(jsonSize(t, wf.Status)))
	for _, part := range statusParts(t, wf.Status) {
		t.Logf("  %-62s %7.1f KiB", part.name, kib(part.size))
	}
	// What each value costs as stored, and what the ways of passing it less often would
	// save: the stored size without it.
	named := func(names ...string) func(task, part string) bool {
		return func(_, part string) bool { return slices.Contains(names, part[strings.LastIndexByte(part, '.')+1:]) }
	}
	repeated := func(_, part string) bool {
		return strings.HasPrefix(part, "inputs.parameters.") && named("hosts", "inventory", "extra-vars", "operations")("", part)
	}
	passThrough := func(task, part string) bool { return task == "render-inventory" && part == "outputs.parameters.hosts" }
	for _, what := range []struct {
		name string
		drop func(task, part string) bool
	}{
		{"every copy of the hosts list", named("hosts")},
		{"every copy of the inventory", named("inventory")},
		{"every copy of the operations", named("operations")},
		{"any of these three", named("hosts", "inventory", "operations")},
		{"the inputs.parameters an artifact repeats (a task passing the value as a raw artifact only)", repeated},
		{"render-inventory's hosts output (verify and publish-kubeconfig taking resolve-leases' instead)", passThrough},
		{"both", func(task, part string) bool { return repeated(task, part) || passThrough(task, part) }},
	} {
		trimmed := wf.DeepCopy()
		trimmed.Status = withoutValues(wf.Status, what.drop, nil)
		t.Logf("stored without %s: %s", what.name, stored(t, trimmed))
	}

	// What Argo's controller writes: above MAX_WORKFLOW_SIZE it swaps status.nodes for
	// status.compressedNodes (gzip, base64), and fails the run beyond that.
	packed := wf.DeepCopy()
	require.NoError(t, packer.CompressWorkflowIfNeeded(packed), "Argo cannot store the Workflow without a nodeStatusOffload database")
	r := rig.ForTest(t, rig.Options{})
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	packed.Namespace = r.Namespace
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.Create(ctx, packed))
	kc, err := kubernetes.NewForConfig(r.RESTConfig)
	require.NoError(t, err)
	raw, err := kc.RESTClient().Get().AbsPath("/apis/argoproj.io/v1alpha1/namespaces", r.Namespace, "workflows", wf.Name).DoRaw(ctx)
	require.NoError(t, err)
	t.Logf("as stored (nodes compressed: %t): %.1f KiB", packed.Status.CompressedNodes != "", kib(len(raw)))
	assert.Less(t, kib(len(raw)), float64(maxRunWorkflowKiB), "the stored Workflow of a 1,000-node run, in KiB")
}

// thousandNodeScaleUp is a Provisioning whose cluster has 15 masters and whose spec asks for
// 1,000 pool workers more, and the 1,015 hosts discover-hosts and resolve-leases give it.
func thousandNodeScaleUp(t *testing.T) (*bpav1.Provisioning, []bpav1.HostStatus) {
	cpu := int32(8)
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Name: "edge-site-01", Namespace: "bpa-system", Generation: 2, UID: uuid.NewUUID(),
		Labels: map[string]string{bpav1.ClusterLabel: "edge-site-01"}}}
	for i := 1; i <= 15; i++ {
		p.Spec.Masters = append(p.Spec.Masters, bpav1.NodeEntry{fmt.Sprintf("master-%d", i): nil})
	}
	p.Spec.WorkerPools = []bpav1.WorkerPool{{Name: "edge", Replicas: 1000, CPU: &cpu}}
	nodes, err := hostmatch.Desired(p)
	require.NoError(t, err)
	var hosts []bpav1.HostStatus
	for i, n := range nodes {
		hosts = append(hosts, bpav1.HostStatus{Name: n.Name, Roles: n.Roles(), Etcd: n.Etcd,
			MAC: fmt.Sprintf("3c:fd:fe:b5:%02x:%02x", i>>8, i&0xff), IP: fmt.Sprintf("10.20.%d.%d", i>>8, i&0xff),
			BareMetalHost: fmt.Sprintf("rack%02d-node%02d", i/40, i%40)})
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name }) // as resolve-leases writes them
	c := mustPlan(t, &bpav1.Provisioning{ObjectMeta: p.ObjectMeta, Spec: bpav1.ProvisioningSpec{Masters: p.Spec.Masters, WorkerPools: []bpav1.WorkerPool{{Name: "edge", CPU: &cpu}}}})
	p.Status.Applied = &bpav1.AppliedState{KubesprayVersion: c.KubesprayVersion, KubernetesVersion: c.KubernetesVersion, Settings: c.Settings, Generation: 1}
	for _, h := range hosts {
		if strings.HasPrefix(h.Name, "master-") {
			p.Status.Applied.Hosts = append(p.Status.Applied.Hosts, h)
		}
	}
	return p, hosts
}

func mustPlan(t *testing.T, p *bpav1.Provisioning) *translator.ChangePlan {
	c, err := translator.PlanChange(p)
	require.NoError(t, err)
	return c
}

// finishedStatus is the status Argo's controller keeps for wf once every task succeeded at
// its first attempt, built from the bpa-provision WorkflowTemplate as Argo builds it:
//   - a task whose template has a retryStrategy is a Retry node with one Pod child; both
//     carry the template's inputs (Argo copies the processed template's inputs to each
//     node it initialises), and the Retry node its child's outputs;
//   - a node's inputs are the template's parameters with the task's arguments substituted,
//     and its artifacts, each the task's argument of that name (path and mode the
//     template's) if it has one, with {{inputs.parameters.*}} substituted in raw data
//     (workflow/common ProcessArgs, SubstituteParams): the hosts list, a parameter that
//     an artifact's data names, is there twice; run-kubespray's inventory, a raw artifact
//     argument, once, its data resolved in the DAG's scope (workflow/controller/dag.go
//     resolveDependencyReferences substitutes the task's JSON whole);
//   - a node's outputs are the template's output parameters with the values the step wrote
//     (outputs, by parameter name), and the exit code;
//   - status.storedTemplates holds each template the tasks reference.
func finishedStatus(t *testing.T, wf *wfv1.Workflow, outputs map[string]string) wfv1.WorkflowStatus {
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	started := metav1.NewTime(time.Now().Add(-2 * time.Hour).Truncate(time.Second))
	vars := map[string]string{"workflow.name": wf.Name, "workflow.namespace": wf.Namespace, "workflow.uid": string(uuid.NewUUID())}
	for _, prm := range wf.Spec.Arguments.Parameters {
		vars["workflow.parameters."+prm.Name] = prm.Value.String()
	}
	root := wfv1.NodeStatus{ID: wf.Name, Name: wf.Name, DisplayName: wf.Name, Type: wfv1.NodeTypeDAG, TemplateName: wf.Spec.Entrypoint,
		TemplateScope: "local/" + wf.Name, Phase: wfv1.NodeSucceeded, StartedAt: started, Progress: "6/6"}
	st := wfv1.WorkflowStatus{Phase: wfv1.WorkflowSucceeded, StartedAt: started, FinishedAt: metav1.NewTime(started.Add(time.Hour)),
		Progress: "6/6", Nodes: wfv1.Nodes{}, StoredTemplates: map[string]wfv1.Template{},
		ResourcesDuration:     wfv1.ResourcesDuration{"cpu": 1234, "memory": 5678},
		Conditions:            wfv1.Conditions{{Type: wfv1.ConditionTypePodRunning, Status: metav1.ConditionFalse}, {Type: wfv1.ConditionTypeCompleted, Status: metav1.ConditionTrue}},
		ArtifactRepositoryRef: &wfv1.ArtifactRepositoryRefStatus{Default: true}, TaskResultsCompletionStatus: map[string]bool{}}
	seq := 0
	node := func(name string, typ wfv1.NodeType, ref *wfv1.TemplateRef) wfv1.NodeStatus {
		seq++
		start := metav1.NewTime(started.Add(time.Duration(seq) * time.Minute))
		return wfv1.NodeStatus{ID: fmt.Sprintf("%s-%d", wf.Name, 1000000000+seq*7919), Name: wf.Name + "." + name, DisplayName: name,
			Type: typ, TemplateRef: ref, TemplateScope: "local/" + wf.Name, Phase: wfv1.NodeSucceeded, BoundaryID: wf.Name,
			StartedAt: start, FinishedAt: metav1.NewTime(start.Add(40 * time.Second)), Progress: "1/1",
			ResourcesDuration: wfv1.ResourcesDuration{"cpu": 12, "memory": 34}}
	}
	st.Nodes[root.ID] = root
	// link makes to a child of from, as a DAG makes a task's node the child of the node of
	// the task it depends on.
	link := func(from, to string) {
		n := st.Nodes[from]
		n.Children = append(n.Children, to)
		st.Nodes[from] = n
	}
	prev := root.ID
	for _, task := range wf.Spec.Templates[0].DAG.Tasks {
		wft, err := g.Get(task.TemplateRef.Name)
		require.NoError(t, err)
		tmpl := wft.GetTemplateByName(task.TemplateRef.Template)
		require.NotNil(t, tmpl, task.TemplateRef.Template)
		st.StoredTemplates["namespaced/"+task.TemplateRef.Name+"/"+task.TemplateRef.Template] = *tmpl

		in := tmpl.Inputs.DeepCopy()
		inputs := map[string]string{}
		for i, prm := range in.Parameters {
			v := ""
			if prm.Default != nil {
				v = prm.Default.String()
			}
			if arg := task.Arguments.GetParameterByName(prm.Name); arg != nil {
				v = substitute(t, arg.Value.String(), vars)
			}
			in.Parameters[i].Value, inputs["inputs.parameters."+prm.Name] = wfv1.AnyStringPtr(v), v
		}
		for i, art := range in.Artifacts {
			if arg := task.Arguments.GetArtifactByName(art.Name); arg != nil {
				require.NotNil(t, arg.Raw, "artifact %s of %s", art.Name, task.Name)
				in.Artifacts[i] = *arg.DeepCopy()
				in.Artifacts[i].Path, in.Artifacts[i].Mode, in.Artifacts[i].RecurseMode = art.Path, art.Mode, art.RecurseMode
				in.Artifacts[i].Raw.Data = substitute(t, arg.Raw.Data, vars)
			}
			if raw := in.Artifacts[i].Raw; raw != nil {
				raw.Data = substitute(t, raw.Data, inputs)
			}
		}
		exit := "0"
		out := &wfv1.Outputs{ExitCode: &exit}
		for _, prm := range tmpl.Outputs.Parameters {
			v, ok := outputs[prm.Name]
			require.True(t, ok, "no value for output %s of %s", prm.Name, task.Name)
			prm.Value = wfv1.AnyStringPtr(v)
			out.Parameters = append(out.Parameters, prm)
			vars["tasks."+task.Name+".outputs.parameters."+prm.Name] = v
		}

		ref := task.TemplateRef.DeepCopy()
		pod := node(task.Name, wfv1.NodeTypePod, ref)
		pod.Inputs, pod.Outputs, pod.HostNodeName = in, out, fmt.Sprintf("worker-%d", seq%3)
		st.TaskResultsCompletionStatus[pod.ID] = true
		if tmpl.RetryStrategy != nil {
			retry := node(task.Name, wfv1.NodeTypeRetry, ref)
			pod.Name, pod.DisplayName, pod.NodeFlag = retry.Name+"(0)", task.Name+"(0)", &wfv1.NodeFlag{Retried: true}
			retry.Inputs, retry.Outputs, retry.Children = in.DeepCopy(), out.DeepCopy(), []string{pod.ID}
			st.Nodes[retry.ID] = retry
			link(prev, retry.ID)
		} else {
			link(prev, pod.ID)
		}
		st.Nodes[pod.ID] = pod
		prev = pod.ID
	}
	root = st.Nodes[root.ID]
	root.OutboundNodes = []string{prev}
	st.Nodes[root.ID] = root
	return st
}

// substitute replaces each {{name}} of s by vars[name], failing t on a name it lacks.
func substitute(t *testing.T, s string, vars map[string]string) string {
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "}}")
		require.GreaterOrEqual(t, j, 0, "unterminated placeholder in %q", s)
		name := s[i+2 : i+j]
		v, ok := vars[name]
		require.True(t, ok, "no value for {{%s}}", name)
		s = s[:i] + v + s[i+j+2:]
	}
}

type sizedPart struct {
	name string
	size int
}

// statusParts sizes the status's node inputs and outputs by task, template part and
// parameter, largest first, with the rest of the status as one part.
func statusParts(t *testing.T, st wfv1.WorkflowStatus) []sizedPart {
	sizes := map[string]int{}
	rest := withoutValues(st, func(string, string) bool { return true }, func(task, part string, v any) { sizes[task+" "+part] += jsonSize(t, v) })
	var parts []sizedPart
	small := "(parameters under 1 KiB)"
	for _, name := range slices.Sorted(maps.Keys(sizes)) {
		if sizes[name] >= 1024 {
			parts = append(parts, sizedPart{name, sizes[name]})
		} else {
			sizes[small] += sizes[name]
		}
	}
	parts = append(parts, sizedPart{small, sizes[small]},
		sizedPart{"(the rest of the status: nodes' other fields, storedTemplates)", jsonSize(t, rest)})
	slices.SortStableFunc(parts, func(a, b sizedPart) int { return b.size - a.size })
	return parts
}

// withoutValues is st without the node inputs and outputs drop selects (by task and part,
// e.g. "inputs.artifacts.hosts"), calling seen with each one dropped.
func withoutValues(st wfv1.WorkflowStatus, drop func(task, part string) bool, seen func(task, part string, v any)) wfv1.WorkflowStatus {
	out := *st.DeepCopy()
	for id, n := range out.Nodes {
		task := strings.TrimSuffix(n.DisplayName, "(0)")
		keep := func(part string, v any) bool {
			if !drop(task, part) {
				return true
			}
			if seen != nil {
				seen(task, part, v)
			}
			return false
		}
		if n.Inputs != nil {
			n.Inputs.Parameters = slices.DeleteFunc(n.Inputs.Parameters, func(p wfv1.Parameter) bool { return !keep("inputs.parameters."+p.Name, p) })
			n.Inputs.Artifacts = slices.DeleteFunc(n.Inputs.Artifacts, func(a wfv1.Artifact) bool { return !keep("inputs.artifacts."+a.Name, a) })
		}
		if n.Outputs != nil {
			n.Outputs.Parameters = slices.DeleteFunc(n.Outputs.Parameters, func(p wfv1.Parameter) bool { return !keep("outputs.parameters."+p.Name, p) })
		}
		out.Nodes[id] = n
	}
	return out
}

// stored describes wf as Argo's controller writes it (its node statuses compressed above
// MAX_WORKFLOW_SIZE): its JSON size and whether the nodes were compressed, or that Argo
// could not store it at all.
func stored(t *testing.T, wf *wfv1.Workflow) string {
	wf = wf.DeepCopy()
	if err := packer.CompressWorkflowIfNeeded(wf); err != nil {
		require.True(t, packer.IsTooLargeError(err), "%v", err)
		return "too large for Argo"
	}
	return fmt.Sprintf("%.1f KiB (nodes compressed: %t)", kib(jsonSize(t, wf)), wf.Status.CompressedNodes != "")
}

func jsonSize(t *testing.T, v any) int {
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return len(data)
}

func kib(n int) float64 { return float64(n) / 1024 }
