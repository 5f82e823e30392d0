package translator_test

import (
	"errors"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// chained plans spec (releases named) against a cluster m1, w1 that kubespray release
// built at Kubernetes kube.
func chained(t *testing.T, spec, release, kube string) (*bpav1.Provisioning, *translator.ChangePlan, error) {
	t.Helper()
	applied := appliedAs(t, base, host("m1", true, true), host("w1", false, false))
	applied.KubesprayVersion, applied.KubernetesVersion = release, kube
	p := day2(t, "masters: [{m1: null}]\nworkers: [{w1: null}]\n"+spec, applied)
	c, err := translator.PlanChange(p)
	return p, c, err
}

// hop is what a test expects of one hop: its step, release, Kubernetes and the -e
// kube_version it is given ("" for the last, which takes the vars file's).
type hop struct{ name, release, kube, kubeVersionVar string }

func hops(c *translator.ChangePlan) []hop {
	var out []hop
	for _, s := range c.Steps {
		if s.Name == translator.StepPreflight || translator.StepBase(s.Name) == translator.StepBackupEtcd {
			continue // its checks, before the first hop (preflight_test), and the snapshots (backup_test)
		}
		require.Len(nil, s.Operations, 1)
		v, _ := s.Operations[0].Vars["kube_version"].(string)
		out = append(out, hop{s.Name, s.Release, s.Kubernetes, v})
	}
	return out
}

// imageOf is the kubespray-image argument of a Workflow task.
func imageOf(wf *wfv1.Workflow, task string) string {
	for _, tk := range wf.Spec.Templates[0].DAG.Tasks {
		if tk.Name == task {
			for _, a := range tk.Arguments.Parameters {
				if a.Name == "kubespray-image" {
					return a.Value.String()
				}
			}
		}
	}
	return ""
}

func TestPlanChains(t *testing.T) {
	for name, tc := range map[string]struct {
		spec, release, kube string
		want                []hop
	}{
		"one minor stays one upgrade": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.31.4}", "v2.28.0", "1.30.4",
			[]hop{{"upgrade", "v2.28.0", "1.31.4", ""}}},
		"two Kubernetes minors: two hops": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.32.5}", "v2.28.0", "1.30.4",
			[]hop{{"upgrade", "v2.28.0", "1.31.9", "1.31.9"}, {"upgrade-2", "v2.28.0", "1.32.5", ""}}},
		"three Kubernetes minors and a kubespray minor: three hops, v2.27's format": {"kubespray: {version: v2.28.1}\nkubernetes: {version: 1.32.8}", "v2.27.0", "1.29.5",
			[]hop{{"upgrade", "v2.27.1", "1.30.13", "v1.30.13"}, {"upgrade-2", "v2.27.1", "1.31.9", "v1.31.9"}, {"upgrade-3", "v2.28.1", "1.32.8", ""}}},
		"two kubespray minors: two hops": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.30.13}", "v2.26.0", "1.30.4",
			[]hop{{"upgrade", "v2.27.1", "1.30.13", "v1.30.13"}, {"upgrade-2", "v2.28.0", "1.30.13", ""}}},
		"two of each: two hops": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.31.9}", "v2.26.0", "1.29.2",
			[]hop{{"upgrade", "v2.27.1", "1.30.13", "v1.30.13"}, {"upgrade-2", "v2.28.0", "1.31.9", ""}}},
	} {
		t.Run(name, func(t *testing.T) {
			p, c, err := chained(t, tc.spec, tc.release, tc.kube)
			require.NoError(t, err)
			assert.Equal(t, tc.want, hops(c))
			wf, err := translator.Provisioning(p, withBackups(translator.Options{}))
			require.NoError(t, err)
			for _, h := range tc.want {
				want := "{{workflow.parameters.kubespray-image}}"
				if h.release != c.KubesprayVersion {
					want = bpav1.DefaultKubesprayImage + ":" + h.release
				}
				assert.Equal(t, want, imageOf(wf, h.name), "the image of %s", h.name)
			}
		})
	}
	t.Run("a hop's image is the spec's repository at the hop's release", func(t *testing.T) {
		p, c, err := chained(t, "kubespray: {version: v2.28.1, image: registry.site:5000/kubespray}\nkubernetes: {version: 1.32.8}", "v2.27.1", "1.30.4")
		require.NoError(t, err)
		assert.Equal(t, "registry.site:5000/kubespray:v2.27.1", translator.StepImage("registry.site:5000/kubespray:v2.28.1", c.Steps[2]), "the first hop (after the snapshot and preflight)")
		wf, err := translator.Provisioning(p, withBackups(translator.Options{}))
		require.NoError(t, err)
		assert.Equal(t, "registry.site:5000/kubespray:v2.27.1", imageOf(wf, "upgrade"))
		assert.Equal(t, "{{workflow.parameters.kubespray-image}}", imageOf(wf, "upgrade-2"))
	})
	t.Run("refused", func(t *testing.T) {
		for name, tc := range map[string]struct {
			spec, release, kube, field, reason, msg string
		}{
			"a kubespray minor pkg/kubespray does not record": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.30.13}", "v2.25.0", "1.30.4",
				"spec.kubespray.version", bpav1.ReasonSkippedMinor, "no kubespray v2.26 release in pkg/kubespray"},
			"a Kubernetes minor no release installs": {"kubespray: {version: v2.27.1}\nkubernetes: {version: 1.29.15}", "v2.26.0", "1.27.3",
				"spec.kubernetes.version", bpav1.ReasonSkippedMinor, "no kubespray release in pkg/kubespray supports Kubernetes 1.28"},
			"a Kubernetes downgrade": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.30.4}", "v2.28.0", "1.32.5",
				"spec.kubernetes.version", bpav1.ReasonDowngrade, "does not downgrade"},
			"a kubespray downgrade": {"kubespray: {version: v2.27.1}\nkubernetes: {version: 1.31.9}", "v2.28.0", "1.30.4",
				"spec.kubespray.version", bpav1.ReasonDowngrade, "does not downgrade"},
			"a chain with node changes": {"kubespray: {version: v2.28.0}\nkubernetes: {version: 1.32.5}\nmasters: [{m1: null}]\nworkers: [{w1: null}, {w2: null}]", "v2.28.0", "1.30.4",
				"spec.kubernetes.version", bpav1.ReasonUpgradeWithChanges, "add w2"},
		} {
			t.Run(name, func(t *testing.T) {
				applied := appliedAs(t, base, host("m1", true, true), host("w1", false, false))
				applied.KubesprayVersion, applied.KubernetesVersion = tc.release, tc.kube
				spec := tc.spec
				if name != "a chain with node changes" {
					spec = "masters: [{m1: null}]\nworkers: [{w1: null}]\n" + spec
				}
				_, err := translator.PlanChange(day2(t, spec, applied))
				var r *translator.Refusal
				require.True(t, errors.As(err, &r), "want a refusal, got %v", err)
				assert.Equal(t, tc.field, r.Field)
				assert.Equal(t, tc.reason, r.Reason)
				assert.Contains(t, r.Message, tc.msg)
			})
		}
	})
	t.Run("an ad-hoc run leaves a chain to the controller, and a forged hop is refused", func(t *testing.T) {
		p, c, err := chained(t, "kubespray: {version: v2.28.0}\nkubernetes: {version: 1.32.5}", "v2.28.0", "1.30.4")
		require.NoError(t, err)
		_, err = translator.AdHocParameters(p, withBackups(translator.Options{}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "let the controller run it")
		forged := *c
		forged.Steps = forged.Steps[:3] // the snapshot, preflight and the first hop, as a whole upgrade
		require.Equal(t, translator.StepUpgrade, forged.Steps[2].Name)
		assert.Error(t, translator.CheckAdHocPlan(p, &forged), "a hop to 1.31.9 would record what the spec does not ask for")
	})
}
