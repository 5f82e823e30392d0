package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
)

// A step runs in its pod: it refuses the root's --kubeconfig (exit status 2, naming why) and
// keeps its own --namespace (default $POD_NAMESPACE), which shadows the root's.
func TestStepsTakeTheirPodsConfig(t *testing.T) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"step", "lookup", "--kubeconfig", filepath.Join(t.TempDir(), "none")})
	err := root.Execute()
	require.Error(t, err)
	assert.Equal(t, 2, cli.ExitCode(err))
	assert.Contains(t, err.Error(), "--kubeconfig does not apply to bpa step lookup: a step uses its pod's in-cluster config")

	cmd, _, err := newRoot().Find([]string{"step", "lookup"})
	require.NoError(t, err)
	assert.NotNil(t, cmd.LocalFlags().Lookup("namespace"))
}
