package translator_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// A day-2 run takes a verified etcd snapshot before its first operation and before each
// later hop of a chained upgrade, unless the spec opts out; a creation takes none; and
// without a backup server in the site policy the run is refused, naming the field.
func TestPlanBackups(t *testing.T) {
	m1, w1 := host("m1", true, true), host("w1", false, false)
	applied := func(t *testing.T, hosts ...bpav1.HostStatus) *bpav1.AppliedState { return appliedAs(t, base, hosts...) }
	names := func(c *translator.ChangePlan) []string {
		var out []string
		for _, s := range c.Steps {
			out = append(out, s.Name)
		}
		return out
	}
	t.Run("before a day-2 run's first operation", func(t *testing.T) {
		p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}]\nkubernetes: {version: 1.31.4}", applied(t, m1, w1))
		c, err := translator.PlanChange(p)
		require.NoError(t, err)
		assert.Equal(t, []string{"backup-etcd", "scale-workers"}, names(c))
		assert.Empty(t, c.Steps[0].Operations, "no playbook")
		assert.Equal(t, translator.BackupReason, c.Steps[0].Reason)
	})
	t.Run("before each hop of a chained upgrade", func(t *testing.T) {
		_, c, err := chained(t, "kubespray: {version: v2.28.1}\nkubernetes: {version: 1.32.8}", "v2.27.0", "1.29.5")
		require.NoError(t, err)
		assert.Equal(t, []string{"backup-etcd", "preflight", "upgrade", "backup-etcd-2", "upgrade-2", "backup-etcd-3", "upgrade-3"}, names(c))
	})
	t.Run("not when the spec opts out", func(t *testing.T) {
		p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}]\nkubernetes: {version: 1.31.4}\netcdBackup: {beforeDay2: Skip}", applied(t, m1, w1))
		c, err := translator.PlanChange(p)
		require.NoError(t, err)
		assert.Equal(t, []string{"scale-workers"}, names(c))
		wf, err := translator.Provisioning(p, translator.Options{})
		require.NoError(t, err, "no backup server needed")
		require.NotNil(t, wf)
	})
	t.Run("not for a new cluster", func(t *testing.T) {
		p := day2(t, "masters: [{m1: null}]\nkubernetes: {version: 1.31.4}", nil)
		c, err := translator.PlanChange(p)
		require.NoError(t, err)
		assert.Equal(t, []string{translator.StepCreate}, names(c))
	})
	t.Run("refused without a backup server", func(t *testing.T) {
		p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}]\nkubernetes: {version: 1.31.4}", applied(t, m1, w1))
		for name, err := range map[string]error{
			"controller": func() error { _, err := translator.Provisioning(p, translator.Options{}); return err }(),
			"ad hoc":     func() error { _, err := translator.AdHocParameters(p, translator.Options{}); return err }(),
		} {
			var r *translator.Refusal
			require.True(t, errors.As(err, &r), "%s: want a refusal, got %v", name, err)
			assert.Equal(t, "spec.etcdBackup.beforeDay2", r.Field)
			assert.Equal(t, bpav1.ReasonNoBackupServer, r.Reason)
		}
	})
}
