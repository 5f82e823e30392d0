package kubespray

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Chained upgrades. Kubernetes upgrades one minor at a time (kubeadm's version skew policy,
// kubespray's docs/operations/upgrades.md), kubespray must not skip a minor release of its
// own (upgrades.md: "Do not skip releases when upgrading"), and each kubespray release
// installs only some Kubernetes versions (kubeversions_generated.go). A jump of several
// minors is therefore a chain of hops: each hop one release of kubespray running
// upgrade-cluster.yml to one Kubernetes version it installs.

// Hop is one upgrade of a chain: upgrade-cluster.yml run by kubespray Release (an image tag)
// to Kubernetes Kube.
type Hop struct {
	Release string
	Kube    KubeVersion
}

// ChainGap is a jump the recorded releases cannot bridge. Kubespray says whether the
// missing piece is a kubespray minor (else a Kubernetes minor).
type ChainGap struct {
	Kubespray bool
	Msg       string
}

func (g *ChainGap) Error() string { return g.Msg }

// hopRelease is one kubespray release tag with the Kubernetes versions it installs.
type hopRelease struct {
	releaseID
	kube []KubeVersion
}

// releaseID names a release, recorded or not.
type releaseID struct {
	tag          string
	minor, patch int
}

func (r releaseID) after(o releaseID) bool {
	return r.minor > o.minor || r.minor == o.minor && r.patch > o.patch
}

// newestOf is the newest version of Kubernetes minor m that r installs, not newer than max.
func (r hopRelease) newestOf(m int, max KubeVersion) (KubeVersion, bool) {
	for i := len(r.kube) - 1; i >= 0; i-- {
		if v := r.kube[i]; v.Minor == m && !max.less(v) {
			return v, true
		}
	}
	return KubeVersion{}, false
}

// recorded lists every release pkg/kubespray records, oldest first.
func recorded() []hopRelease {
	var out []hopRelease
	for _, p := range Profiles {
		minor, _ := strconv.Atoi(strings.TrimPrefix(p.Minor, "v2."))
		for patch := range p.patches() {
			out = append(out, hopRelease{releaseID{p.Tag(patch), minor, patch}, p.KubeVersions(patch)})
		}
	}
	return out
}

// MaxHops bounds the hops of any chain between recorded releases: one per Kubernetes minor
// they install, plus one per kubespray minor (a hop may move either alone).
func MaxHops() int {
	kube := map[int]bool{}
	for _, r := range recorded() {
		for _, v := range r.kube {
			kube[v.Minor] = true
		}
	}
	return len(kube) + len(Profiles)
}

// Chain plans the hops from a cluster that kubespray fromRelease (any v2.x.y tag, recorded
// or not) built at Kubernetes fromKube to release toRelease (recorded) at toKube: the fewest
// hops, the last one (toRelease, toKube). Downgrades are the caller's to refuse. A jump the
// recorded releases cannot bridge returns a *ChainGap naming what is missing.
//
// Choices, where several chains are as short:
//   - the releases of intermediate hops are, for each kubespray minor, its newest patch
//     release not after toRelease: patch releases carry fixes and install the newest
//     Kubernetes patches;
//   - a hop stays on the release the cluster runs while that release installs the next
//     Kubernetes minor, and moves kubespray on when it must (or at the end): each hop
//     changes as little as it can, and the Kubernetes hops run with the release that
//     already runs the cluster's settings;
//   - an intermediate hop's Kubernetes is the newest patch of its minor that its release
//     installs (kubespray's default, kube_version, is its newest; for an older minor the
//     newest patch carries that minor's fixes, and kubeadm upgrades from any patch).
func Chain(fromRelease string, fromKube KubeVersion, toRelease string, toKube KubeVersion) ([]Hop, error) {
	return chain(recorded(), fromRelease, fromKube, toRelease, toKube)
}

func chain(all []hopRelease, fromRelease string, fromKube KubeVersion, toRelease string, toKube KubeVersion) ([]Hop, error) {
	from, ok := parseRelease(fromRelease)
	if !ok {
		return nil, fmt.Errorf("kubespray %q is not a release tag such as v2.28.0", fromRelease)
	}
	to := slices.IndexFunc(all, func(r hopRelease) bool { return r.tag == toRelease })
	if to < 0 {
		return nil, fmt.Errorf("kubespray %s is not recorded in pkg/kubespray", toRelease)
	}
	cands := candidates(all, from, all[to].releaseID)
	if gap := minorGap(all, cands, from, all[to].releaseID, fromKube, toKube); gap != nil {
		return nil, gap
	}
	hops := search(cands, state{from, fromKube}, all[to].releaseID, toKube)
	if hops == nil {
		return nil, &ChainGap{Msg: fmt.Sprintf("no chain of the kubespray releases in pkg/kubespray (%s) leads from kubespray %s with Kubernetes %s to kubespray %s with Kubernetes %s one minor at a time",
			tags(cands), fromRelease, fromKube, toRelease, toKube)}
	}
	return hops, nil
}

// candidates are the releases a chain from from to to may use: per kubespray minor the
// newest patch not after to, and none before from.
func candidates(all []hopRelease, from, to releaseID) []hopRelease {
	var out []hopRelease
	for _, r := range all {
		if r.after(to) || from.after(r.releaseID) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].minor == r.minor {
			out[n-1] = r
			continue
		}
		out = append(out, r)
	}
	return out
}

// minorGap names the first kubespray minor, or else Kubernetes minor, between the two ends
// that no candidate release covers.
func minorGap(all, cands []hopRelease, from, to releaseID, fromKube, toKube KubeVersion) *ChainGap {
	for m := from.minor + 1; m < to.minor; m++ {
		if !slices.ContainsFunc(cands, func(r hopRelease) bool { return r.minor == m }) {
			return &ChainGap{Kubespray: true, Msg: fmt.Sprintf("no kubespray v2.%d release in pkg/kubespray: the cluster runs kubespray %s, and kubespray must not skip a minor release on the way to %s (docs/operations/upgrades.md); pkg/kubespray records %s",
				m, from.tag, to.tag, tags(all))}
		}
	}
	for m := fromKube.Minor + 1; m < toKube.Minor; m++ {
		if !slices.ContainsFunc(cands, func(r hopRelease) bool { _, ok := r.newestOf(m, toKube); return ok }) {
			return &ChainGap{Msg: fmt.Sprintf("no kubespray release in pkg/kubespray supports Kubernetes 1.%d: Kubernetes upgrades one minor at a time (docs/operations/upgrades.md) from %s to %s, and the releases between kubespray %s and %s install %s",
				m, fromKube, toKube, from.tag, to.tag, describeReleases(cands))}
		}
	}
	return nil
}

// state is where a chain stands: the release that last ran and the cluster's Kubernetes.
type state struct {
	rel  releaseID
	kube KubeVersion
}

// search is a breadth-first search for the fewest hops from start to (to, toKube); the
// order next lists the hops in makes the first chain found the preferred one.
func search(cands []hopRelease, start state, to releaseID, toKube KubeVersion) []Hop {
	type node struct {
		s    state
		hops []Hop
	}
	queue := []node{{s: start}}
	seen := map[state]bool{start: true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, s := range next(cands, n.s, to, toKube) {
			if seen[s] {
				continue
			}
			seen[s] = true
			hops := append(slices.Clone(n.hops), Hop{Release: s.rel.tag, Kube: s.kube})
			if s.rel.tag == to.tag && s.kube == toKube {
				return hops
			}
			queue = append(queue, node{s, hops})
		}
	}
	return nil
}

// next lists the hops one upgrade can make from s: Kubernetes one minor on (preferred) or
// kept, by a release not before s's and at most one kubespray minor on (the nearest first),
// which installs the version the hop goes to.
func next(cands []hopRelease, s state, to releaseID, toKube KubeVersion) []state {
	var out []state
	for _, m := range []int{s.kube.Minor + 1, s.kube.Minor} {
		if m > toKube.Minor {
			continue
		}
		for _, r := range cands {
			if s.rel.after(r.releaseID) || r.minor > s.rel.minor+1 {
				continue
			}
			v, ok := r.newestOf(m, toKube)
			if r.tag == to.tag && m == toKube.Minor {
				v, ok = toKube, slices.Contains(r.kube, toKube)
			}
			if ok && !v.less(s.kube) && (state{r.releaseID, v}) != s {
				out = append(out, state{r.releaseID, v})
			}
		}
	}
	return out
}

// parseRelease reads a v2.<minor>.<patch> tag, recorded or not.
func parseRelease(tag string) (releaseID, bool) {
	m := releaseTag.FindStringSubmatch(tag)
	if m == nil {
		return releaseID{}, false
	}
	minor, _ := strconv.Atoi(m[1])
	patch, _ := strconv.Atoi(m[2])
	return releaseID{tag, minor, patch}, true
}

func tags(rs []hopRelease) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.tag
	}
	return strings.Join(out, ", ")
}

// describeReleases names each release with the Kubernetes versions it installs.
func describeReleases(rs []hopRelease) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s: %s", r.tag, describeRuns(kubeRuns(r.kube)))
	}
	return strings.Join(out, "; ")
}
