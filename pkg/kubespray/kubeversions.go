package kubespray

import (
	"fmt"
	"slices"
	"strings"
)

// A release installs exactly the Kubernetes versions it has checksums for: kube_version
// picks kubelet_checksums[image_arch][kube_version] (kubespray_defaults' download.yml), and
// a version without a key fails there with "'dict object' has no attribute", whatever its
// neighbours. So each release tag carries a set, not a range: kubeversions_generated.go,
// extracted from kubespray by hack/kubespray-data.

// kubeData is one tag's generated record.
type kubeData struct {
	// MinRequired is kube_version_min_required ("Stop if unsupported version of Kubernetes").
	MinRequired string
	// Versions are the amd64 keys of kubelet_checksums, as written (v2.27 writes the 'v').
	Versions []string
}

// releaseVersions is releaseKube parsed: the minimum and the installable versions (keys
// not older than the minimum), oldest first.
type releaseVersions struct {
	min      KubeVersion
	versions []KubeVersion
}

var kubeByTag = func() map[string]releaseVersions {
	out := map[string]releaseVersions{}
	for tag, d := range releaseKube {
		min, err := ParseKubeVersion(d.MinRequired)
		if err != nil {
			panic(fmt.Sprintf("kubeversions_generated.go: %s: %v", tag, err))
		}
		r := releaseVersions{min: min}
		for _, s := range d.Versions {
			v, err := ParseKubeVersion(s)
			if err != nil {
				panic(fmt.Sprintf("kubeversions_generated.go: %s: %v", tag, err))
			}
			if !v.less(min) {
				r.versions = append(r.versions, v)
			}
		}
		slices.SortFunc(r.versions, func(a, b KubeVersion) int {
			if a.less(b) {
				return -1
			}
			if b.less(a) {
				return 1
			}
			return 0
		})
		out[tag] = r
	}
	return out
}()

// Tag names a release of p, e.g. v2.28.0.
func (p *Profile) Tag(patch int) string { return fmt.Sprintf("%s.%d", p.Minor, patch) }

// patches is how many patch releases of p are recorded (v2.28.0, v2.28.1: 2).
func (p *Profile) patches() int {
	n := 0
	for kubeByTag[p.Tag(n)].versions != nil {
		n++
	}
	return n
}

// MinRequired is the release's kube_version_min_required.
func (p *Profile) MinRequired(patch int) KubeVersion { return kubeByTag[p.Tag(patch)].min }

// KubeVersions are the Kubernetes versions the release installs, oldest first.
func (p *Profile) KubeVersions(patch int) []KubeVersion {
	return slices.Clone(kubeByTag[p.Tag(patch)].versions)
}

// DefaultKube is kube_version's default: the release's newest Kubernetes.
func (p *Profile) DefaultKube(patch int) KubeVersion {
	vs := kubeByTag[p.Tag(patch)].versions
	return vs[len(vs)-1]
}

// Supports says whether the release installs Kubernetes v.
func (p *Profile) Supports(patch int, v KubeVersion) bool {
	return slices.Contains(kubeByTag[p.Tag(patch)].versions, v)
}

// kubeRuns compacts versions (oldest first) into runs of consecutive patches of a minor.
func kubeRuns(vs []KubeVersion) [][2]KubeVersion {
	var runs [][2]KubeVersion
	for _, v := range vs {
		if n := len(runs); n > 0 && runs[n-1][1].Minor == v.Minor && runs[n-1][1].Patch+1 == v.Patch {
			runs[n-1][1] = v
			continue
		}
		runs = append(runs, [2]KubeVersion{v, v})
	}
	return runs
}

// DescribeKube names the release's Kubernetes versions compactly, newest first:
// "1.32.0–1.32.5, 1.31.0–1.31.9, 1.30.0–1.30.13".
func (p *Profile) DescribeKube(patch int) string {
	return describeRuns(kubeRuns(kubeByTag[p.Tag(patch)].versions))
}

// describeRuns writes runs (oldest first) newest first.
func describeRuns(runs [][2]KubeVersion) string {
	out := make([]string, 0, len(runs))
	for i := len(runs) - 1; i >= 0; i-- {
		if r := runs[i]; r[0] == r[1] {
			out = append(out, r[0].String())
		} else {
			out = append(out, r[0].String()+"–"+r[1].String())
		}
	}
	return strings.Join(out, ", ")
}
