package translator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	argotemplate "github.com/argoproj/argo-workflows/v3/util/template"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// TestSoftwareFanOutShowsNodeNames: install-software fans out over the node names, so Argo
// names each host's node install-software(0:master-1); each child still gets its own node,
// picked by Argo's own template engine out of resolve-nodes' list, and nothing more.
func TestSoftwareFanOutShowsNodeNames(t *testing.T) {
	data, err := os.ReadFile("../../examples/software.yaml")
	require.NoError(t, err)
	sw := &bpav1.Software{}
	require.NoError(t, yaml.Unmarshal(data, sw))
	wf, err := translator.Software(sw, translator.Options{})
	require.NoError(t, err)
	install := findTask(t, wf.Spec.Templates[0].DAG.Tasks, "install-software")

	// resolve-nodes' two outputs for a three-node cluster.
	nodes, err := software.Nodes(sw.Spec, []bpav1.HostStatus{
		{Name: "master-1", IP: "127.0.1.14", Roles: []string{"master"}},
		{Name: "worker-1", IP: "127.0.1.15", Roles: []string{"worker"}},
		{Name: "worker-2", IP: "127.0.1.16", Roles: []string{"master", "worker"}},
	})
	require.NoError(t, err)
	nodesJSON, err := json.Marshal(nodes)
	require.NoError(t, err)
	names, err := json.Marshal([]string{"master-1", "worker-1", "worker-2"})
	require.NoError(t, err)

	require.Equal(t, "{{tasks.resolve-nodes.outputs.parameters.names}}", install.WithParam)
	var items []wfv1.Item
	require.NoError(t, json.Unmarshal(names, &items))
	for i, item := range items {
		// Argo names a child task(i:item), an item shown as itself when it is a string.
		display := fmt.Sprintf("install-software(%d:%v)", i, item)
		assert.Equal(t, fmt.Sprintf("install-software(%d:%s)", i, nodes[i].Name), display)

		// What Argo substitutes when it expands the child (workflow/controller processItem).
		host := argument(t, install, "host")
		quoted, err := json.Marshal(host)
		require.NoError(t, err)
		out, err := argotemplate.Replace(string(quoted), map[string]any{
			"item": item.GetStrVal(), "tasks.resolve-nodes.outputs.parameters.nodes": string(nodesJSON),
		}, false)
		require.NoError(t, err)
		var value string
		require.NoError(t, json.Unmarshal([]byte(out), &value))
		var got software.Node
		require.NoError(t, json.Unmarshal([]byte(value), &got), value)
		assert.Equal(t, nodes[i], got, "child %d gets its own node", i)
		assert.Less(t, len(value), len(nodesJSON)/2, "a child's input is its node, not the whole list")
	}

	// The WorkflowTemplate's ad-hoc DAG fans out the same way.
	all, err := workflowtemplates.All()
	require.NoError(t, err)
	for _, wft := range all {
		for _, tmpl := range wft.Spec.Templates {
			if wft.Name != workflowtemplates.Software || tmpl.DAG == nil || tmpl.Name != "install" {
				continue
			}
			adhoc := findTask(t, tmpl.DAG.Tasks, "install-software")
			assert.Equal(t, install.WithParam, adhoc.WithParam)
			assert.Equal(t, argument(t, install, "host"), argument(t, adhoc, "host"))
		}
	}
}

func findTask(t *testing.T, tasks []wfv1.DAGTask, name string) wfv1.DAGTask {
	t.Helper()
	for _, task := range tasks {
		if task.Name == name {
			return task
		}
	}
	t.Fatalf("no task %s", name)
	return wfv1.DAGTask{}
}

func argument(t *testing.T, task wfv1.DAGTask, name string) string {
	t.Helper()
	for _, p := range task.Arguments.Parameters {
		if p.Name == name {
			return p.Value.String()
		}
	}
	t.Fatalf("task %s has no argument %s", task.Name, name)
	return ""
}
