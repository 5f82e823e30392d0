package inventory

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// playbook runs the real ansible-playbook on a local play of tasks (YAML, indented for a
// task list), with `-e @vars`, and fails the test when it fails (the tasks assert). Like the inventory tests it fails
// (it does not skip) without ansible-core.
func playbook(t *testing.T, dir, vars, tasks string) {
	t.Helper()
	bin, err := exec.LookPath("ansible-playbook")
	require.NoError(t, err, "ansible-playbook is needed (Debian package ansible-core; .ci/run installs it)")
	pb := filepath.Join(dir, "play.yml")
	require.NoError(t, os.WriteFile(pb, []byte("- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"+tasks), 0o644))
	cmd := exec.Command(bin, "-i", "localhost,", "-e", "@"+vars, pb)
	cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"), "ANSIBLE_HOME="+dir, "ANSIBLE_NOCOLOR=1",
		"ANSIBLE_PYTHON_INTERPRETER=auto_silent", "ANSIBLE_RETRY_FILES_ENABLED=false")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "ansible-playbook:\n%s", out)
}

// ansibleVersion is ansible-core's major.minor, e.g. [2, 14].
func ansibleVersion(t *testing.T) [2]int {
	out, err := exec.Command("ansible-playbook", "--version").Output()
	require.NoError(t, err)
	m := regexp.MustCompile(`core (\d+)\.(\d+)`).FindStringSubmatch(string(out))
	require.NotNil(t, m, "%s", out)
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return [2]int{major, minor}
}

// TestVarsFileIsNeverTemplated is the extraVars code-execution attack on a real
// ansible-playbook. Each payload, if Ansible templates it, runs `touch` through a pipe
// lookup. The admission rules refuse all of them; this test writes them anyway (through
// MarshalVars, which checks nothing) to show that a value which gets past the rules still
// runs nothing with the file BPA writes, and does run with the untagged JSON file BPA wrote
// before (so the test can fail).
func TestVarsFileIsNeverTemplated(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string) string { return fmt.Sprintf("lookup('pipe', 'touch %s')", filepath.Join(dir, name)) }
	payloads := map[string]any{
		"plain":  "{{ " + touch("plain") + " }}",
		"list":   []any{"ok", "{{ " + touch("list") + " }}"},
		"nested": map[string]any{"a": []any{map[string]any{"b": "{{ " + touch("nested") + " }}"}}},
		// The header changes the delimiters for this one string. ansible-core 2.14 only
		// reads it in a string that also holds a default delimiter ({#), 2.16 and later
		// in any string (the payload, below).
		"header_comment": "#jinja2:variable_start_string:'[[', variable_end_string:']]'\n{# #}[[ " + touch("header_comment") + " ]]",
		"header":         "#jinja2:variable_start_string:'[[', variable_end_string:']]'\n[[ " + touch("header") + " ]]",
	}
	var tasks strings.Builder
	for name := range payloads {
		fmt.Fprintf(&tasks, "    - debug: {msg: \"{{ %s }}\"}\n      ignore_errors: true\n", name)
	}
	run := func(file string, data []byte) map[string]bool {
		for name := range payloads {
			_ = os.Remove(filepath.Join(dir, name))
		}
		path := filepath.Join(dir, file)
		require.NoError(t, os.WriteFile(path, data, 0o644))
		playbook(t, dir, path, tasks.String())
		ran := map[string]bool{}
		for name := range payloads {
			_, err := os.Stat(filepath.Join(dir, name))
			ran[name] = err == nil
		}
		return ran
	}

	bpa, err := MarshalVars(payloads)
	require.NoError(t, err)
	assert.Error(t, CheckExtraVars(bpa), "run-kubespray refuses the file anyway")
	for name, ran := range run("bpa.yaml", bpa) {
		assert.False(t, ran, "%s: the payload ran from the !unsafe vars file", name)
	}

	plain, err := json.Marshal(payloads)
	require.NoError(t, err)
	ran := run("plain.json", plain)
	for _, name := range []string{"plain", "list", "nested", "header_comment"} {
		assert.True(t, ran[name], "%s: the payload did not run from an untagged file, so this test proves nothing", name)
	}
	// The payload, a #jinja2: header and no default delimiter, runs on ansible-core
	// 2.16 and later only: 2.14 checks for {{, {% or {# before it reads the header.
	v := ansibleVersion(t)
	assert.Equal(t, v[0] > 2 || v[1] >= 16, ran["header"], "ansible-core %d.%d, header-only payload ran: %t", v[0], v[1], ran["header"])
}

// TestTypedVarsReachAnsible: what a CR sets arrives in Ansible with its type. kubespray
// asserts that known booleans (helm_enabled, deploy_netchecker) are real booleans, and a
// string that YAML 1.1 would read as something else ("yes", "1e3", "0x1F") stays a string.
func TestTypedVarsReachAnsible(t *testing.T) {
	in := `{"helm_enabled": true, "deploy_netchecker": false, "kube_network_node_prefix": 24, "ratio": 0.25,
		"big": 12345678901234567890, "exp": 1e3, "yes_string": "yes", "exp_string": "1e3", "hex_string": "0x1F", "null_string": "null",
		"multiline": "a\n  b: {c}\n", "unicode": "é ü 中",
		"node_labels": {"node-role.kubernetes.io/ingress": "", "true": "on", "1": 2},
		"containerd_registries_mirrors": [{"prefix": "docker.io", "mirrors": [{"host": "https://mirror:5000", "capabilities": ["pull", "resolve"], "skip_verify": false}]}]}`
	vars, err := ExtraVars(&bpav1.ProvisioningSpec{Kubespray: ev(t, in)})
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "vars.yaml")
	require.NoError(t, os.WriteFile(path, vars, 0o644))

	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(in), &want))
	var dump strings.Builder
	dump.WriteString("{")
	for _, k := range sortedKeys(want) {
		if dump.Len() > 1 {
			dump.WriteString(", ")
		}
		fmt.Fprintf(&dump, "%q: {{ %s | to_json }}", k, k)
	}
	dump.WriteString("}")
	out := filepath.Join(dir, "out.json")
	// The template is this test's own; only the variables come from the file.
	tasks := fmt.Sprintf("    - copy: {dest: %q, content: %q}\n", out, dump.String()) +
		"    - assert: {that: [\"helm_enabled is boolean\", \"helm_enabled\", \"deploy_netchecker is boolean\", \"not deploy_netchecker\"," +
		" \"kube_network_node_prefix is integer\", \"ratio is float\", \"yes_string is string\", \"node_labels['1'] is integer\"]}\n"
	playbook(t, dir, path, tasks)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(data, &got), "%s", data)
	assert.Equal(t, want, got)
}
