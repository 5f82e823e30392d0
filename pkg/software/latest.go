package software

import (
	"fmt"
	"sort"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/debversion"
)

// FormatLatest writes a Software run's newest versions as the Workflow parameter `latest`
// carries them: "name=version" words, sorted, space-separated ("" for none). Neither a
// package name nor a version holds a space or '='.
func FormatLatest(versions []bpav1.PackageVersion) string {
	words := make([]string, 0, len(versions))
	for _, v := range versions {
		words = append(words, v.Name+"="+v.Version)
	}
	sort.Strings(words)
	return strings.Join(words, " ")
}

// ParseLatest reads FormatLatest's output, checking every name and version, so a hostile
// parameter never reaches a command.
func ParseLatest(s string) ([]bpav1.PackageVersion, error) {
	var out []bpav1.PackageVersion
	seen := map[string]bool{}
	for _, w := range strings.Fields(s) {
		name, version, ok := strings.Cut(w, "=")
		switch {
		case !ok || len(name) > bpav1.MaxPackageFieldLength || !namePattern.MatchString(name):
			return nil, fmt.Errorf("latest: %s is not <Debian package name>=<version>", show(w))
		case !debversion.Valid(version):
			return nil, fmt.Errorf("latest: version %s of package %s is not a Debian version", show(version), show(name))
		case seen[name]:
			return nil, fmt.Errorf("latest: package %s is named twice", show(name))
		}
		seen[name] = true
		out = append(out, bpav1.PackageVersion{Name: name, Version: version})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Resolve gives the node's latest items their versions (Node.Latest) from newest; an item
// newest has no version for is an error naming it.
func (n *Node) Resolve(newest []bpav1.PackageVersion) error {
	byName := map[string]string{}
	for _, v := range newest {
		byName[v.Name] = v.Version
	}
	n.Latest = nil
	for _, it := range n.Packages {
		if it.Version != bpav1.VersionLatest || it.State == bpav1.PackageAbsent {
			continue
		}
		v, ok := byName[it.Name]
		if !ok {
			return fmt.Errorf("host %s: package %s tracks the latest version, and the run names none for it", n.Name, it.Name)
		}
		if n.Latest == nil {
			n.Latest = map[string]string{}
		}
		n.Latest[it.Name] = v
	}
	return nil
}

// NeedsLatest says whether a host must be visited by a run that installs newly uploaded
// versions (ScopeOutdated), from rec, what the Software's status records of the host's last
// run: it must when there is no record of a success there, or when the record shows one of
// the node's tracked packages missing or older than its resolved version (Node.Latest).
// A host with that version or a newer one is left alone.
func NeedsLatest(n Node, rec *bpav1.HostSoftwareStatus) bool {
	if rec == nil || rec.Phase != "Succeeded" {
		return true
	}
	installed := map[string]string{}
	for _, p := range rec.Packages {
		installed[p.Name] = p.Installed
	}
	for name, v := range n.Latest {
		if have := installed[name]; have == "" || debversion.Compare(have, v) < 0 {
			return true
		}
	}
	return false
}

// Uploaded describes what changed between the newest versions a Software last acted on and
// now, for the run's trigger: "htop 3.2.2-3 uploaded", several joined by ", "; "" if none
// is newer.
func Uploaded(before, now []bpav1.PackageVersion) string {
	old := map[string]string{}
	for _, v := range before {
		old[v.Name] = v.Version
	}
	var parts []string
	for _, v := range now {
		if prev, ok := old[v.Name]; !ok || debversion.Compare(v.Version, prev) > 0 {
			parts = append(parts, v.Name+" "+v.Version+" uploaded")
		}
	}
	return strings.Join(parts, ", ")
}

// RecordsNeedLatest says whether any of hosts (all recorded hosts when nil) needs a run to
// get newest, by what recs, the Software's status, records of each: one without a record of
// a success, or whose record shows a tracked package older than its newest version. It is
// NeedsLatest over the status alone, for the controller to decide whether an upload needs
// a run at all.
func RecordsNeedLatest(recs []bpav1.HostSoftwareStatus, hosts []string, newest []bpav1.PackageVersion) bool {
	byName := map[string]*bpav1.HostSoftwareStatus{}
	for i := range recs {
		byName[recs[i].Name] = &recs[i]
	}
	if hosts == nil {
		hosts = sortedKeys(byName)
	}
	if len(hosts) == 0 {
		return true
	}
	versions := map[string]string{}
	for _, v := range newest {
		versions[v.Name] = v.Version
	}
	for _, h := range hosts {
		rec := byName[h]
		if rec == nil || rec.Phase != "Succeeded" {
			return true
		}
		for _, p := range rec.Packages {
			if v := versions[p.Name]; p.Wanted == bpav1.VersionLatest && v != "" && (p.Installed == "" || debversion.Compare(p.Installed, v) < 0) {
				return true
			}
		}
	}
	return false
}
