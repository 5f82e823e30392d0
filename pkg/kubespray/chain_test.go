package kubespray

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func kv(t *testing.T, s string) KubeVersion {
	t.Helper()
	v, err := ParseKubeVersion(s)
	require.NoError(t, err)
	return v
}

func hopsOf(hops []Hop) []string {
	out := make([]string, len(hops))
	for i, h := range hops {
		out[i] = h.Release + "/" + h.Kube.String()
	}
	return out
}

// The recorded releases: v2.27.0, v2.27.1 (1.29–1.31), v2.28.0, v2.28.1 (1.30–1.32).
func TestChainRecorded(t *testing.T) {
	for name, tc := range map[string]struct {
		from, fromKube, to, toKube string
		want                       []string
	}{
		"one minor is one hop":              {"v2.28.0", "1.30.4", "v2.28.0", "1.31.4", []string{"v2.28.0/1.31.4"}},
		"both in one hop, as before chains": {"v2.27.1", "1.30.4", "v2.28.0", "1.31.4", []string{"v2.28.0/1.31.4"}},
		"two Kubernetes minors: the intermediate hop is the newest 1.31 the release installs": {"v2.28.0", "1.30.4", "v2.28.0", "1.32.5",
			[]string{"v2.28.0/1.31.9", "v2.28.0/1.32.5"}},
		"three Kubernetes minors across kubespray: the cluster's minor until it cannot, its newest patch": {"v2.27.0", "1.29.5", "v2.28.1", "1.32.8",
			[]string{"v2.27.1/1.30.13", "v2.27.1/1.31.9", "v2.28.1/1.32.8"}},
		"an intermediate 1.32 never passes the target's patch": {"v2.27.1", "1.30.4", "v2.28.1", "1.32.3",
			[]string{"v2.27.1/1.31.9", "v2.28.1/1.32.3"}},
		"two kubespray minors from an unrecorded release": {"v2.26.0", "1.30.4", "v2.28.0", "1.30.13",
			[]string{"v2.27.1/1.30.13", "v2.28.0/1.30.13"}},
		"kubespray and Kubernetes, two hops each": {"v2.26.0", "1.29.2", "v2.28.0", "1.31.9",
			[]string{"v2.27.1/1.30.13", "v2.28.0/1.31.9"}},
	} {
		t.Run(name, func(t *testing.T) {
			hops, err := Chain(tc.from, kv(t, tc.fromKube), tc.to, kv(t, tc.toKube))
			require.NoError(t, err)
			assert.Equal(t, tc.want, hopsOf(hops))
			for _, h := range hops {
				p, patch, err := ProfileFor(h.Release)
				require.NoError(t, err)
				assert.True(t, p.Supports(patch, h.Kube), "%s installs %s", h.Release, h.Kube)
			}
		})
	}
}

// synthetic is a catalog of kubespray minors v2.30, v2.31, ... each installing the
// Kubernetes minors given (patches 0 to 3), one patch release each.
func synthetic(minors ...[]int) []hopRelease {
	const first = 30
	var out []hopRelease
	for i, ms := range minors {
		r := hopRelease{releaseID: releaseID{fmt.Sprintf("v2.%d.0", first+i), first + i, 0}}
		for _, m := range ms {
			for p := range 4 {
				r.kube = append(r.kube, KubeVersion{m, p})
			}
		}
		out = append(out, r)
	}
	return out
}

// More kubespray minors than pkg/kubespray records, to chain three of them.
func TestChainSynthetic(t *testing.T) {
	cat := synthetic([]int{40, 41, 42}, []int{41, 42, 43}, []int{42, 43, 44}, []int{43, 44, 45})
	for name, tc := range map[string]struct {
		from, fromKube, to, toKube string
		want                       []string
	}{
		"three kubespray minors, Kubernetes kept": {"v2.30.0", "1.43.1", "v2.33.0", "1.43.3",
			[]string{"v2.31.0/1.43.3", "v2.32.0/1.43.3", "v2.33.0/1.43.3"}},
		"two kubespray minors, Kubernetes never past the target's patch": {"v2.30.0", "1.42.1", "v2.32.0", "1.42.2",
			[]string{"v2.31.0/1.42.2", "v2.32.0/1.42.2"}},
		"three hops of both": {"v2.30.0", "1.40.0", "v2.33.0", "1.43.0",
			[]string{"v2.31.0/1.41.3", "v2.32.0/1.42.3", "v2.33.0/1.43.0"}},
		"two Kubernetes minors in one release": {"v2.30.0", "1.40.0", "v2.30.0", "1.42.1",
			[]string{"v2.30.0/1.41.3", "v2.30.0/1.42.1"}},
		"more kubespray minors than Kubernetes ones: Kubernetes moves first": {"v2.30.0", "1.42.0", "v2.33.0", "1.44.0",
			[]string{"v2.31.0/1.43.3", "v2.32.0/1.44.0", "v2.33.0/1.44.0"}},
	} {
		t.Run(name, func(t *testing.T) {
			hops, err := chain(cat, tc.from, kv(t, tc.fromKube), tc.to, kv(t, tc.toKube))
			require.NoError(t, err)
			assert.Equal(t, tc.want, hopsOf(hops))
		})
	}
}

func TestChainGaps(t *testing.T) {
	gap := func(t *testing.T, err error) *ChainGap {
		t.Helper()
		var g *ChainGap
		require.True(t, errors.As(err, &g), "want a gap, got %v", err)
		return g
	}
	t.Run("a kubespray minor pkg/kubespray does not record", func(t *testing.T) {
		_, err := Chain("v2.25.3", kv(t, "1.30.1"), "v2.28.0", kv(t, "1.30.13"))
		g := gap(t, err)
		assert.True(t, g.Kubespray)
		assert.Contains(t, g.Msg, "no kubespray v2.26 release in pkg/kubespray")
	})
	t.Run("a Kubernetes minor no release installs", func(t *testing.T) {
		_, err := Chain("v2.26.0", kv(t, "1.27.3"), "v2.27.1", kv(t, "1.29.15"))
		g := gap(t, err)
		assert.False(t, g.Kubespray)
		assert.Contains(t, g.Msg, "no kubespray release in pkg/kubespray supports Kubernetes 1.28")
	})
	t.Run("a Kubernetes minor only a release after the target installs", func(t *testing.T) {
		cat := synthetic([]int{40, 41}, []int{42, 43})
		_, err := chain(cat, "v2.30.0", kv(t, "1.40.0"), "v2.31.0", kv(t, "1.42.0"))
		assert.Nil(t, err, "v2.31 installs 1.42, one kubespray minor on")
		cat = synthetic([]int{40}, []int{42, 43})
		_, err = chain(cat, "v2.30.0", kv(t, "1.40.0"), "v2.31.0", kv(t, "1.43.0"))
		assert.Contains(t, gap(t, err).Msg, "supports Kubernetes 1.41")
	})
	t.Run("minors covered, but not together", func(t *testing.T) {
		// v2.31 installs 1.42 but not the cluster's 1.40 nor 1.41: kubespray v2.30 cannot
		// pass 1.40, and v2.31 cannot take it from there.
		cat := synthetic([]int{40, 41}, []int{43, 44})
		_, err := chain(cat, "v2.30.0", kv(t, "1.40.0"), "v2.31.0", kv(t, "1.44.0"))
		assert.Contains(t, gap(t, err).Msg, "Kubernetes 1.42")
	})
	t.Run("MaxHops bounds every recorded chain", func(t *testing.T) {
		hops, err := Chain("v2.26.0", kv(t, "1.29.0"), "v2.28.1", kv(t, "1.32.8"))
		require.NoError(t, err)
		assert.LessOrEqual(t, len(hops), MaxHops())
		assert.Equal(t, 6, MaxHops(), "1.29–1.32 and two kubespray minors")
	})
}
