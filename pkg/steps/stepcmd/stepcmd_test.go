package stepcmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFailureReachesTheTerminationLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "termination-log")
	cmd := Command(Step{Name: "x", Run: func(context.Context) error {
		return errors.New("no lease for 00:c6:14:04:61:b2 " + strings.Repeat("x", 5000))
	}})
	cmd.SetArgs([]string{"--termination-log=" + log})
	require.Error(t, cmd.Execute())
	got, err := os.ReadFile(log)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(got), "no lease for 00:c6:14:04:61:b2"))
	assert.LessOrEqual(t, len(got), maxTerminationMessage, "the kubelet keeps 4 KiB")
}

func TestSuccessWritesNoTerminationLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "termination-log")
	cmd := Command(Step{Name: "x", Run: func(context.Context) error { return nil }})
	cmd.SetArgs([]string{"--termination-log=" + log})
	require.NoError(t, cmd.Execute())
	_, err := os.Stat(log)
	assert.True(t, os.IsNotExist(err))
}
