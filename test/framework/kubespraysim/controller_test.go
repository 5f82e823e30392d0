package kubespraysim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
)

// TestCRInterpreterRunsOnTheController is the attack of extraVars on the Ansible controller,
// with the real ansible-playbook: Ansible runs ansible_python_interpreter as a command line,
// extra vars apply to the implicit localhost, and kubespray's remove_node.yml (v2.28) gathers
// facts there, so a CR's "interpreter" would run in the run-kubespray container, which holds
// the cluster's SSH key. The threat is shown on the stand-in's play (which has kubespray's
// shape); BPA's defence is that run-kubespray, render-inventory, lint and admission refuse
// such a vars file (the same check, inventory.CheckExtraVars).
func TestCRInterpreterRunsOnTheController(t *testing.T) {
	dir := writeInputs(t, cluster, nil)
	marker := filepath.Join(t.TempDir(), "ran-on-the-controller")
	vars := filepath.Join(dir, "attack.yaml")
	data, err := bpainventory.MarshalVars(map[string]any{
		"ansible_python_interpreter": "/bin/sh -c 'touch " + marker + "'; /usr/bin/python3", "node": "w2", "skip_confirmation": true})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(vars, data, 0o644))

	err = bpainventory.CheckExtraVars(data)
	require.Error(t, err, "BPA must refuse a vars file that names a command as the interpreter")
	assert.Contains(t, err.Error(), "ansible_python_interpreter: Invalid value: want a plain path of a Python 3 interpreter")

	// What BPA refuses, real Ansible would have run.
	_ = Check([]string{"-i", filepath.Join(dir, "hosts.ini"), "-e", "@" + vars, "remove-node.yml"}, "quay.io/kubespray/kubespray:v2.28.0", t.TempDir())
	assert.FileExists(t, marker, "the stand-in's localhost play, like kubespray's, runs the interpreter it is given")
}
