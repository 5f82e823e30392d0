package kubespraysim

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnmatchedRemovalSucceedsHavingDoneNothing: given a node name no inventory host has,
// real kubespray's remove-node.yml runs its node plays on no host and exits 0. The stand-in
// does the same (node=ghost), and its fault injection (EnvUnmatchedFile) makes a removal of a
// real host behave exactly so, which is what lets the e2e test prove that BPA's verify,
// not kubespray, catches a removal that removed nothing.
func TestUnmatchedRemovalSucceedsHavingDoneNothing(t *testing.T) {
	tree, err := Tree()
	require.NoError(t, err)
	unmatched := filepath.Join(t.TempDir(), "unmatched")
	run := func(t *testing.T, node string) (string, error) {
		dir := writeInputs(t, cluster, map[string]any{"node": node, "skip_confirmation": true})
		env, err := Container{Image: "quay.io/kubespray/kubespray:v2.28.0", Tmp: t.TempDir(), UnmatchedFile: unmatched}.Env()
		require.NoError(t, err)
		cmd := exec.Command("ansible-playbook", "-i", filepath.Join(dir, "hosts.ini"), "-e", "@"+filepath.Join(dir, "vars.yaml"), "remove-node.yml")
		cmd.Dir = tree
		cmd.Env = append(append(os.Environ(), env...), EnvCheckOnly+"=true", "ANSIBLE_NOCOLOR=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	assertRanOnNoHost := func(t *testing.T, out string, err error) {
		require.NoError(t, err, "a name that matches no host is not an error to Ansible:\n%s", out)
		assert.Contains(t, out, "Could not match supplied host pattern, ignoring: ghost")
		assert.NotContains(t, out, CheckOnlyPassed, "no node play ran:\n%s", out)
	}

	t.Run("a name no host has", func(t *testing.T) {
		out, err := run(t, "ghost")
		assertRanOnNoHost(t, out, err)
	})
	t.Run("a real host, while the fault is injected", func(t *testing.T) {
		require.NoError(t, os.WriteFile(unmatched, nil, 0o644))
		defer os.Remove(unmatched)
		out, err := run(t, "w2")
		assertRanOnNoHost(t, out, err)
	})
	t.Run("a real host", func(t *testing.T) {
		// The node plays run: their checks pass and end the check-only run there.
		out, _ := run(t, "w2")
		assert.Contains(t, out, CheckOnlyPassed)
	})
}
