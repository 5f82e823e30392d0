package translator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/util/template"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// The committed provision.yaml is what `make generate` writes from the translator.
func TestAdHocRunIsGenerated(t *testing.T) {
	const path = "../../workflowtemplates/provision.yaml"
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := translator.GenerateAdHocRun(file)
	require.NoError(t, err)
	require.Equal(t, string(want), string(file), "%s differs from what pkg/translator generates: run make generate", path)

	// What the file says is what the translator built, field for field.
	wft := provisionTemplate(t)
	for _, want := range translator.AdHocTemplates() {
		got := wft.GetTemplateByName(want.Name)
		require.NotNil(t, got, want.Name)
		assert.Equal(t, want, *got, want.Name)
	}
	var outputs []string
	for _, o := range wft.GetTemplateByName("lookup").Outputs.Parameters {
		outputs = append(outputs, o.Name)
		assert.Equal(t, stepio.Out(o.Name), o.ValueFrom.Path)
	}
	assert.Equal(t, translator.AdHocParameterNames(), outputs)
}

func provisionTemplate(t *testing.T) *wfv1.WorkflowTemplate {
	g, err := workflowtemplates.NewGetter()
	require.NoError(t, err)
	wft, err := g.Get(workflowtemplates.Provision)
	require.NoError(t, err)
	return wft
}

// ranTask is a DAG task as it runs: its name (an ad-hoc run's resolve-leases-from-file is
// the controller's resolve-leases), the template it calls and its arguments' values: its
// parameters (Args) and its raw artifacts (Files).
type ranTask struct {
	Name     string            `json:"name"`
	Template string            `json:"template"`
	Args     map[string]string `json:"args"`
	Files    map[string]string `json:"files,omitempty"`
}

// canonical is the controller's name of an ad-hoc task.
func canonical(name string) string {
	if name == "resolve-leases-from-file" {
		return "resolve-leases"
	}
	return name
}

// taskOutputs are the outputs the tasks after a step read from it, by its template.
var taskOutputs = map[string][]string{
	"discover-hosts": {"hosts"}, "resolve-leases": {"hosts"}, "resolve-leases-from-file": {"hosts"},
	"render-inventory": {"inventory", "extra-vars"},
}

// dependsNames are the task names a depends expression reads.
var dependsNames = regexp.MustCompile(`[a-z][a-z0-9-]*`)

// runDAG runs a chain of DAG tasks as Argo's controller does, with every task succeeding:
// in order, each after the tasks it depends on (all earlier: the DAG is a chain); `when`
// resolved with Argo's own template code and then, as Argo's govaluate would, read as
// "A == B" of true and false only (anything else fails the test: this stand-in is
// stricter than Argo); each argument resolved with Argo's template code against scope, the
// outputs of a task that ran standing as <task.output>, those of a skipped one absent, as
// Argo 3.7's scope has them. It returns the tasks that ran.
func runDAG(t *testing.T, tasks []wfv1.DAGTask, scope map[string]any, skip string) []ranTask {
	t.Helper()
	var ran []ranTask
	done := map[string]bool{}
	for _, task := range tasks {
		for _, dep := range dependsNames.FindAllString(task.Depends, -1) {
			require.True(t, done[dep], "task %s depends on %s, which is not an earlier task", task.Name, dep)
		}
		done[task.Name] = true
		if task.Name == skip {
			continue
		}
		tmpl := task.Template
		if task.TemplateRef != nil {
			require.Equal(t, workflowtemplates.Provision, task.TemplateRef.Name)
			tmpl = task.TemplateRef.Template
		}
		if task.When != "" && !when(t, task.When, scope) {
			// As Argo 3.7 scopes a skipped task: its declared outputs absent (nil).
			scope["tasks."+task.Name+".status"] = string(wfv1.NodeSkipped)
			for _, o := range taskOutputs[tmpl] {
				scope["tasks."+task.Name+".outputs.parameters."+o] = nil
			}
			continue
		}
		r := ranTask{Name: canonical(task.Name), Template: tmpl, Args: map[string]string{}}
		for _, p := range task.Arguments.Parameters {
			r.Args[p.Name] = resolve(t, p.Value.String(), scope)
		}
		for _, a := range task.Arguments.Artifacts {
			require.NotNil(t, a.Raw, "artifact %s of %s", a.Name, task.Name)
			if r.Files == nil {
				r.Files = map[string]string{}
			}
			r.Files[a.Name] = resolve(t, a.Raw.Data, scope)
		}
		ran = append(ran, r)
		scope["tasks."+task.Name+".status"] = string(wfv1.NodeSucceeded)
		for _, o := range taskOutputs[tmpl] {
			scope["tasks."+task.Name+".outputs.parameters."+o] = "<" + r.Name + "." + o + ">"
		}
	}
	return ran
}

func resolve(t *testing.T, s string, scope map[string]any) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	out, err := template.Replace(string(b), scope, false)
	require.NoError(t, err, s)
	var v string
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	return v
}

func when(t *testing.T, expr string, scope map[string]any) bool {
	t.Helper()
	a, b, ok := strings.Cut(resolve(t, expr, scope), " == ")
	require.True(t, ok, "when %q", expr)
	require.Contains(t, []string{"true", "false"}, a, "when %q", expr)
	require.Contains(t, []string{"true", "false"}, b, "when %q", expr)
	return a == b
}

// controllerDAG is what the controller's Workflow for p runs.
func controllerDAG(t *testing.T, p *bpav1.Provisioning, opts translator.Options) []ranTask {
	t.Helper()
	wf, err := translator.Provisioning(p, opts)
	require.NoError(t, err)
	require.NotNil(t, wf)
	scope := map[string]any{}
	for _, a := range wf.Spec.Arguments.Parameters {
		scope["workflow.parameters."+a.Name] = a.Value.String()
	}
	require.Equal(t, "provision", wf.Spec.Entrypoint)
	return runDAG(t, wf.Spec.Templates[0].DAG.Tasks, scope, "")
}

// adHocDAG is what `argo submit --from workflowtemplate/bpa-provision -p provisioning=NAME`
// runs for p: main's lookup, then provision with the outputs of its plan task, which are
// what `bpa step lookup` writes (translator.AdHocParameters, given the policy's CA).
func adHocDAG(t *testing.T, p *bpav1.Provisioning, ca string) []ranTask {
	t.Helper()
	outputs, err := translator.AdHocParameters(p, withBackups(translator.Options{ArtifactsCA: ca}))
	require.NoError(t, err)
	wft := provisionTemplate(t)
	require.Equal(t, "main", wft.Spec.Entrypoint)
	main := wft.GetTemplateByName("main").DAG.Tasks
	require.Len(t, main, 2)
	require.Equal(t, []string{"lookup", "provision"}, []string{main[0].Template, main[1].Template})
	provision := wft.GetTemplateByName("provision")
	require.Equal(t, "bpa-cluster-{{inputs.parameters.cluster}}", provision.Synchronization.Mutexes[0].Name, "the controller's runs' mutex")
	scope := map[string]any{
		"workflow.parameters.provisioning": p.Name,
		"inputs.parameters.provisioning":   p.Name,
		"inputs.parameters.cluster":        outputs["cluster"],
		"tasks.plan.status":                string(wfv1.NodeSucceeded),
	}
	for k, v := range outputs {
		scope["tasks.lookup.outputs.parameters."+k] = v
		scope["tasks.plan.outputs.parameters."+k] = v
	}
	require.Equal(t, outputs["cluster"], resolve(t, main[1].Arguments.GetParameterByName("cluster").Value.String(), scope))
	tasks := provision.DAG.Tasks
	require.Equal(t, translator.AdHocPlanTask, tasks[0].Name)
	require.Equal(t, "lookup", tasks[0].Template)
	return runDAG(t, tasks, scope, translator.AdHocPlanTask)
}

// day2Change is a cluster of m1, m2, m3 (each with etcd), w1, w2 and pool members edge-1
// and edge-2, asked to become spec.
func day2Change(t *testing.T, spec string) *bpav1.Provisioning {
	t.Helper()
	built := `
masters: [{m1: {etcd: true}}, {m2: {etcd: true}}, {m3: {etcd: true}}]
workers: [{w1: null}, {w2: null}]
workerPools: [{name: edge, replicas: 2}]
kubernetes: {version: 1.31.4}
`
	hosts := []bpav1.HostStatus{host("m1", true, true), host("m2", true, true), host("m3", true, true), host("w1", false, false), host("w2", false, false),
		host("edge-1", false, false), host("edge-2", false, false)}
	p := day2(t, spec, appliedAs(t, built, hosts...))
	p.UID = "uid-p"
	return p
}

// An ad-hoc run of a day-2 change runs the DAG the controller's Workflow runs: the same
// tasks in the same order, each calling the same template with the same values. Compared
// for changes that reach every kind of task and slot, and written out for the change of
// the example of docs/day2.md (a removal and a scale-up) in a golden file.
func TestAdHocRunIsTheControllersDAG(t *testing.T) {
	for name, spec := range map[string]string{
		"removal-and-scale-up": `
masters: [{m1: {etcd: true}}, {m2: {etcd: true}}, {m3: {etcd: true}}]
workers: [{w1: null}, {w3: null}]
workerPools: [{name: edge, replicas: 4}]
kubernetes: {version: 1.31.4}
nodeRemoval: {allowUngraceful: true, drainTimeoutSeconds: 60}
`,
		"etcd-members-leave": `
masters: [{m1: {etcd: true}}]
workers: [{w1: null}, {w2: null}]
workerPools: [{name: edge, replicas: 2}]
kubernetes: {version: 1.31.4}
`,
		"control-plane-joins-from-a-leases-file": `
masters: [{m1: {etcd: true}}, {m2: {etcd: true}}, {m3: {etcd: true}}, {m4: {etcd: true}}, {m5: {etcd: true}}, {m6: {etcd: false}}]
workers: [{w1: null}, {w2: null}]
workerPools: [{name: edge, replicas: 2}]
kubernetes: {version: 1.31.4}
leases: {type: dnsmasq, hostPath: /var/lib/misc/dnsmasq.leases, nodeSelector: {dhcp: "true"}}
`,
		"upgrade": `
masters: [{m1: {etcd: true}}, {m2: {etcd: true}}, {m3: {etcd: true}}]
workers: [{w1: null}, {w2: null}]
workerPools: [{name: edge, replicas: 2}]
kubernetes: {version: 1.32.5}
`,
	} {
		t.Run(name, func(t *testing.T) {
			p := day2Change(t, spec)
			const ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
			want := controllerDAG(t, p, withBackups(translator.Options{ArtifactsCA: ca}))
			got := adHocDAG(t, p, ca)
			require.Equal(t, want, got)
			var names []string
			for _, r := range got {
				names = append(names, r.Name)
			}
			if name == "upgrade" {
				// A verified snapshot first, then the preflight checks before
				// upgrade-cluster.yml, and verify after it stops at a node left behind
				// instead of retrying.
				assert.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", "backup-etcd", "preflight", "upgrade", "verify", "publish-kubeconfig"}, names)
				assert.Equal(t, "backup-etcd", got[3].Template)
				assert.Equal(t, "https://backups.example:8443", got[3].Args["backup-server"], "the site policy's server")
				assert.Equal(t, "preflight", got[4].Template)
				assert.Equal(t, "true", got[6].Args["after-upgrade"])
				return
			}
			if name != "removal-and-scale-up" {
				return
			}
			assert.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", "backup-etcd", "remove-workers", "scale-workers", "verify", "publish-kubeconfig"}, names)
			checkGolden(t, "testdata/golden/adhoc-"+name+".dag.yaml", got)
		})
	}
}

// An ad-hoc run of a cluster that is as its spec asks reconfigures every host, as a rerun
// of the controller's would, for the ad-hoc reason.
func TestAdHocRunOfAnUnchangedCluster(t *testing.T) {
	p := day2Change(t, `
masters: [{m1: {etcd: true}}, {m2: {etcd: true}}, {m3: {etcd: true}}]
workers: [{w1: null}, {w2: null}]
workerPools: [{name: edge, replicas: 2}]
kubernetes: {version: 1.31.4}
`)
	wf, err := translator.Provisioning(p, withBackups(translator.Options{}))
	require.NoError(t, err)
	require.Nil(t, wf, "the controller has nothing to do")
	got := adHocDAG(t, p, "")
	require.Len(t, got, 7)
	assert.Equal(t, translator.StepBackupEtcd, got[3].Name)
	assert.Equal(t, translator.StepReconfigure, got[4].Name)
	assert.JSONEq(t, fmt.Sprintf(`[{"playbook":"cluster","reason":%q}]`, translator.AdHocReason), got[4].Files["operations"])

	// With a rerun the controller has not handled, it is that rerun.
	p.Annotations = map[string]string{bpav1.RerunAnnotation: "7"}
	require.Equal(t, controllerDAG(t, p, withBackups(translator.Options{})), adHocDAG(t, p, ""))
}

// A plan must fit the template's slots: at most 14 control-plane removals, which
// spec.masters' 15 allow.
func TestAdHocSlots(t *testing.T) {
	slots := translator.AdHocSlots()
	assert.Equal(t, "remove-control-plane-14", slots[slices.Index(slots, "reconfigure-etcd")-1])
	for _, s := range translator.PlanSteps {
		assert.Contains(t, slots, s)
	}
}

// withBackups is opts with a site policy's etcd backup server, which a day-2 run needs
// (its backup-etcd step).
func withBackups(opts translator.Options) translator.Options {
	opts.BackupServer, opts.BackupServerCA = "https://backups.example:8443", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"
	return opts
}
