package kubespray

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadAmong reports the nodes of dead as unreachable.
func deadAmong(dead ...string) Unreachable {
	return func(nodes []string) ([]string, []string, error) {
		var d, why []string
		for _, n := range nodes {
			if slices.Contains(dead, n) {
				d, why = append(d, n), append(why, n+": connection refused")
			}
		}
		return d, why, nil
	}
}

// The dead-host procedure: a dead node leaves first, ungracefully, with the removal's drain
// settings and inventory; the live ones after it, without it in the inventory.
func TestWithoutDeadHosts(t *testing.T) {
	remove := RemoveNodes([]string{"w1", "w2"}, false, "remove w1, w2")
	remove.Vars["drain_timeout"], remove.Without = "60s", []string{"w0"}
	facts := GatherFacts("facts")
	ops := []Operation{facts, remove}

	got, err := WithoutDeadHosts(ops, true, deadAmong())
	require.NoError(t, err)
	assert.Equal(t, ops, got, "every node reachable: the plan as it is")

	got, err = WithoutDeadHosts(ops, true, deadAmong("w2"))
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, facts, got[0])
	assert.Equal(t, map[string]any{"node": "w2", "skip_confirmation": true, "reset_nodes": false, "allow_ungraceful_removal": true, "drain_timeout": "60s"}, got[1].Vars)
	assert.Equal(t, []string{"w0"}, got[1].Without)
	assert.Equal(t, map[string]any{"node": "w1", "skip_confirmation": true, "drain_timeout": "60s"}, got[2].Vars)
	assert.Equal(t, []string{"w0", "w2"}, got[2].Without)
	assert.Equal(t, "w1,w2", remove.Vars["node"], "the planned operation is not changed in place")

	got, err = WithoutDeadHosts(ops, true, deadAmong("w1", "w2"))
	require.NoError(t, err)
	require.Len(t, got, 2, "no graceful removal is left")
	assert.Equal(t, "w1,w2", got[1].Vars["node"])

	_, err = WithoutDeadHosts(ops, false, deadAmong("w2"))
	assert.EqualError(t, err, "NodeUnreachable: cannot reach node w2 over SSH to drain and reset it before removal (w2: connection refused); nothing was run. "+
		"Bring the host back, or set spec.nodeRemoval.allowUngraceful: true to remove it without draining or resetting it")

	_, err = WithoutDeadHosts(ops, true, func([]string) ([]string, []string, error) {
		return nil, nil, errors.New("answers but cannot be logged in to")
	})
	assert.EqualError(t, err, "answers but cannot be logged in to")
}
