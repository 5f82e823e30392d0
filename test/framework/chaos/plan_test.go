package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var short = Config{Faults: 10, Clusters: 3, OpsPerCluster: 2, MaxGap: 5 * time.Second, MaxOutage: 3 * time.Second}

func TestPlanIsDeterministic(t *testing.T) {
	a, b := NewPlan(42, short), NewPlan(42, short)
	assert.Equal(t, a, b, "the same seed gives the same plan")
	assert.NotEqual(t, a.Faults, NewPlan(43, short).Faults, "another seed gives other faults")
	long := short
	long.Faults = 100
	assert.Equal(t, NewPlan(7, long), NewPlan(7, long))
}

func TestPlanCoversEveryKind(t *testing.T) {
	for seed := range uint64(50) {
		p := NewPlan(seed, short)
		require.Len(t, p.Faults, 10)
		seen := map[Kind]bool{}
		for _, f := range p.Faults {
			seen[f.Kind] = true
			assert.LessOrEqual(t, f.Outage, short.MaxOutage)
			assert.LessOrEqual(t, f.Gap, short.MaxGap)
		}
		assert.Len(t, seen, len(Kinds), "seed %d: every fault kind at least once", seed)
		ops := map[OpKind]bool{}
		for _, list := range p.Ops {
			require.Len(t, list, 2)
			for _, o := range list {
				ops[o] = true
			}
		}
		assert.Len(t, ops, len(OpKinds), "seed %d: every operation kind at least once", seed)
	}
}
