package kubespraysim

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// kubesprayTasks reads pkg/kubespray's list of kubespray's task names at tag, by file.
func kubesprayTasks(t *testing.T, tag string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "pkg", "kubespray", "testdata", "tasks", tag+".txt"))
	require.NoError(t, err)
	defer f.Close()
	out, file := map[string][]string{}, ""
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			file = strings.Trim(line, "[]")
		default:
			out[file] = append(out[file], line)
		}
	}
	require.NoError(t, s.Err())
	return out
}

// taskNames lists the names of the tasks (blocks' tasks included) of a tasks file, or of the
// plays' tasks and pre_tasks of a playbook.
func taskNames(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var items []map[string]any
	require.NoError(t, yaml.Unmarshal(data, &items), file)
	var names []string
	var walk func([]any)
	walk = func(list []any) {
		for _, i := range list {
			m, _ := i.(map[string]any)
			if n, ok := m["name"].(string); ok && !strings.HasPrefix(n, "SIMULATED") {
				names = append(names, n)
			}
			for _, k := range []string{"block", "rescue", "always"} {
				if sub, ok := m[k].([]any); ok {
					walk(sub)
				}
			}
		}
	}
	for _, item := range items {
		if _, imported := item["import_playbook"]; imported {
			continue
		}
		if _, play := item["hosts"]; play {
			for _, k := range []string{"pre_tasks", "tasks"} {
				if sub, ok := item[k].([]any); ok {
					walk(sub)
				}
			}
			continue
		}
		walk([]any{item})
	}
	return names
}

// TestStandInCitesRealTasks: every task of the stand-in's checks that is not marked SIMULATED
// carries the name of a task of the kubespray file it stands for, at every tag it runs as
// (validate_inventory at v2.28 only; preinstall's v2.27 block at v2.27 only; the etcd
// certificates' tasks at every tag).
func TestStandInCitesRealTasks(t *testing.T) {
	tree, err := Tree()
	require.NoError(t, err)
	for _, c := range []struct{ here, theirs, minor string }{
		{"roles/validate_inventory/tasks/main.yml", "roles/validate_inventory/tasks/main.yml", "v2.28"},
		{"roles/kubernetes/preinstall/tasks/main.yml", "roles/kubernetes/preinstall/tasks/0040-verify-settings.yml", "v2.27"},
		{"playbooks/remove_node.yml", "playbooks/remove_node.yml", "v2.28"},
		{"playbooks/reset.yml", "playbooks/reset.yml", ""},
		{"roles/etcd/tasks/gen_certs_script.yml", "roles/etcd/tasks/gen_certs_script.yml", ""},
	} {
		names := taskNames(t, filepath.Join(tree, c.here))
		require.NotEmpty(t, names, c.here)
		for _, tag := range kubespray.Versions() {
			if !strings.HasPrefix(tag, c.minor) {
				continue
			}
			theirs := kubesprayTasks(t, tag)[c.theirs]
			require.NotEmpty(t, theirs, "%s at %s", c.theirs, tag)
			for _, n := range names {
				assert.Contains(t, theirs, n, "%s: task %q is not a task of kubespray %s's %s", c.here, n, tag, c.theirs)
			}
		}
	}
	// The fact-cache check of --limit is the one preinstall task of both minors.
	for _, tag := range kubespray.Versions() {
		assert.Contains(t, kubesprayTasks(t, tag)["roles/kubernetes/preinstall/tasks/0040-verify-settings.yml"],
			"Stop if any host not in '--limit' does not have a fact cache", tag)
	}
}
