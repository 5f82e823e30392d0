package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// adHocDay2 (scenario d, continued): a day-2 change run ad hoc while the controller is
// down. Real Argo runs the template's main; the tasks that run are those of the Workflow the
// controller would have made for the same CR (translator.Provisioning), with the same
// operations: w1 removed, w2 added, not cluster.yml on every host. The controller, back,
// records what the run did and finds nothing left to do.
func (e *env) adHocDay2(t *testing.T, p *bpav1.Provisioning) {
	extra := e.newCluster(t, p.Name+"-extra", 132, 0, 1) // a free host for the new worker
	e.CreateSSHSecret(e.ctx, p.Labels["cluster"])        // with its host key, as an operator adds it
	e.StopController(false)
	restarted := false
	defer func() {
		if !restarted {
			e.StartController()
		}
	}()
	cur := &bpav1.Provisioning{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(p), cur))
	cur.Spec.Workers = []bpav1.NodeEntry{{"w2": extra.Spec.Workers[0]["w1"]}}
	require.NoError(t, e.Client.Update(e.ctx, cur))
	// The site's backup server, as the controller would give it (only the tasks matter here).
	want, err := translator.Provisioning(cur, translator.Options{BackupServer: "https://backups.site"})
	require.NoError(t, err)
	var wantSteps []string
	for _, task := range want.Spec.Templates[0].DAG.Tasks {
		wantSteps = append(wantSteps, task.Name)
	}
	require.Equal(t, []string{"discover-hosts", "resolve-leases", "render-inventory", translator.StepBackupEtcd, translator.StepRemoveWorkers, translator.StepScaleWorkers, "verify", "publish-kubeconfig"}, wantSteps)

	out, err := e.Argo(e.ctx, "submit", "--from", "workflowtemplate/bpa-provision", "-p", "provisioning="+p.Name, "-o", "name")
	require.NoError(t, err, out)
	name := strings.TrimSpace(out)
	var ran *wfv1.Workflow
	e.waitWorkflow(t, p.Name, "the ad-hoc day-2 run to finish", func(wf *wfv1.Workflow) bool {
		ran = wf.DeepCopy()
		return wf.Name == name && wf.Status.Fulfilled()
	})
	require.Equal(t, wfv1.WorkflowSucceeded, ran.Status.Phase, "%s; failed: %v", ran.Status.Message, failedNodes(ran))
	got := ranTasks(ran)
	var gotSteps []string
	for _, n := range got {
		gotSteps = append(gotSteps, n.DisplayName)
	}
	assert.Equal(t, wantSteps, gotSteps, "the ad-hoc run runs the controller's DAG")
	for _, task := range want.Spec.Templates[0].DAG.Tasks {
		i := slices.Index(gotSteps, task.Name)
		if i < 0 || task.TemplateRef.Template != "run-kubespray" {
			continue
		}
		assert.JSONEq(t, task.Arguments.GetParameterByName("allow-ungraceful").Value.String(), got[i].Inputs.GetParameterByName("allow-ungraceful").Value.String(), "allow-ungraceful of %s", task.Name)
		// A file only: Argo records the artifact with its data resolved.
		assert.JSONEq(t, task.Arguments.GetArtifactByName("operations").Raw.Data, got[i].Inputs.GetArtifactByName("operations").Raw.Data, "operations of %s", task.Name)
	}

	e.StartController()
	restarted = true
	done := &bpav1.Provisioning{}
	e.waitFor(t, done, p.Name, func() bool {
		ready := meta.FindStatusCondition(done.Status.Conditions, bpav1.ConditionReady)
		return done.Status.ObservedGeneration == cur.Generation && ready != nil && ready.Status == "True"
	}, "the controller to record the ad-hoc run and find nothing to do")
	assert.Equal(t, name, done.Status.Workflow.Name)
	assert.Equal(t, []string{"m1", "w2"}, appliedNames(done))
	assert.Equal(t, wantSteps, stepNames(done), "status.steps are the ad-hoc run's")
	assert.Len(t, e.workflowsOf(t, bpav1.ProvisioningNameLabel, p.Name), 3, "the controller starts no run of its own")
	plan, _ := json.Marshal(done.Status.Plan)
	assert.Contains(t, string(plan), `"nodes":["w2"]`)
}

// ranTasks are the DAG tasks of a finished ad-hoc run that ran (not the lookups), in DAG
// order (a chain: each ran after the one before it): the Retry node of a task that has one,
// else its Pod.
func ranTasks(wf *wfv1.Workflow) []wfv1.NodeStatus {
	byName := map[string]wfv1.NodeStatus{}
	for _, n := range wf.Status.Nodes {
		if n.Phase != wfv1.NodeSucceeded || strings.Contains(n.DisplayName, "(") || n.DisplayName == "lookup" || n.DisplayName == translator.AdHocPlanTask {
			continue
		}
		if n.Type != wfv1.NodeTypePod && n.Type != wfv1.NodeTypeRetry {
			continue
		}
		if prev, ok := byName[n.DisplayName]; !ok || prev.Type == wfv1.NodeTypePod {
			byName[n.DisplayName] = n
		}
	}
	var out []wfv1.NodeStatus
	for _, n := range byName {
		n.DisplayName = strings.TrimSuffix(n.DisplayName, "-from-file")
		out = append(out, n)
	}
	var order []string
	for _, task := range translator.AdHocTemplates()[1].DAG.Tasks {
		order = append(order, strings.TrimSuffix(task.Name, "-from-file"))
	}
	slices.SortStableFunc(out, func(a, b wfv1.NodeStatus) int {
		return slices.Index(order, a.DisplayName) - slices.Index(order, b.DisplayName)
	})
	return out
}

func stepNames(p *bpav1.Provisioning) []string {
	var out []string
	for _, s := range p.Status.Steps {
		out = append(out, s.Name)
	}
	return out
}

// failedNodes says which nodes of a Workflow failed, and why.
func failedNodes(wf *wfv1.Workflow) []string {
	var out []string
	for _, n := range wf.Status.Nodes {
		if n.Phase == wfv1.NodeFailed || n.Phase == wfv1.NodeError {
			out = append(out, n.DisplayName+": "+n.Message)
		}
	}
	return out
}
