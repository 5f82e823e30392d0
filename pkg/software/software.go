// Package software decides what to do on one host to bring its Debian packages to the state
// a Software CR wants. It is pure: it turns the wanted items and `dpkg-query -W` output into
// argv lists, and the install-software step runs them over SSH.
//
// The rules:
//
//   - A present item (the default) is satisfied when the package is installed and, if a
//     version is pinned, installed at exactly that version (dpkg's version string, epoch
//     included).
//   - A `version: latest` item is satisfied when the package is installed at the newest
//     version the artifact server's repository held when the run started (the run's
//     target), or at a newer one: latest never downgrades; only a pin does.
//   - An absent item (`state: absent`) is satisfied when the package is not installed
//     (removed with config files left counts as not installed).
//   - Removing an item from the CR does nothing on the hosts: BPA does not remember what it
//     installed, so it cannot tell "no longer wanted" from "never managed". Say
//     `state: absent` to remove a package.
//   - A host that satisfies every item gets no command at all, not even `apt-get update`, so
//     reruns are cheap and change nothing.
//
// Names and versions are checked against Debian policy syntax before any argv is built.
// Admission checks them too; checking again here means a value that bypassed admission (an
// older policy, a CR edited while the policy was missing) still never reaches a command.
package software

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/debversion"
)

// DpkgQueryFormat is the -f format of the query; ParseDpkgQuery reads its output.
const DpkgQueryFormat = `${Package}\t${Version}\t${db:Status-Abbrev}\n`

// AbsentWanted is PackageStatus.Wanted for a `state: absent` item. It cannot be mistaken for
// a version, since Debian versions start with a digit.
const AbsentWanted = "absent"

var (
	namePattern = regexp.MustCompile(bpav1.DebianPackageNamePattern)
)

// QueryCommand is the argv that lists the installed packages. It names no packages, so it
// exits 0 whatever is installed; with names, dpkg-query exits 1 for any it has never heard
// of, which would be indistinguishable from a real failure.
func QueryCommand() []string {
	return []string{"dpkg-query", "-W", "-f=" + DpkgQueryFormat}
}

// Validate checks every item's name, version and state, and that no package is named twice
// with different wishes. The error names every offending value.
func Validate(items []bpav1.SoftwareItem) error {
	_, err := Normalize(items)
	return err
}

// Normalize validates items and returns them sorted by name, one per package. Repeating an
// item is harmless; a pinned (or latest) and an unpinned item for one package become the
// pinned (or latest) one, since that satisfies both. Different pins, a pin and latest, or
// present and absent, are a conflict.
func Normalize(items ...[]bpav1.SoftwareItem) ([]bpav1.SoftwareItem, error) {
	var problems []string
	byName := map[string]bpav1.SoftwareItem{}
	for _, list := range items {
		for _, it := range list {
			if p := check(it); p != "" {
				problems = append(problems, p)
				continue
			}
			if it.State == bpav1.PackagePresent {
				it.State = "" // one spelling of the default, so equal items compare equal
			}
			prev, seen := byName[it.Name]
			switch {
			case !seen, prev == it:
				byName[it.Name] = it
			case prev.State == "" && it.State == "" && (prev.Version == "" || it.Version == ""):
				if it.Version != "" {
					byName[it.Name] = it
				}
			default:
				problems = append(problems, fmt.Sprintf("package %s is wanted twice, as %s and as %s", it.Name, describe(prev), describe(it)))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("invalid software items: %s", strings.Join(problems, "; "))
	}
	out := make([]bpav1.SoftwareItem, 0, len(byName))
	for _, it := range byName {
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// check returns what is wrong with one item, or "".
func check(it bpav1.SoftwareItem) string {
	var p []string
	if len(it.Name) > bpav1.MaxPackageFieldLength || !namePattern.MatchString(it.Name) {
		p = append(p, fmt.Sprintf("package name %s is not a Debian package name (%s; not ending in '-' or '+', which apt-get reads as remove or install)", show(it.Name), bpav1.DebianPackageNamePattern))
	}
	if it.Version != "" && it.Version != bpav1.VersionLatest && !debversion.Valid(it.Version) {
		p = append(p, fmt.Sprintf("version %s of package %s is not a Debian version ([epoch:]upstream[-revision], starting with a digit)", show(it.Version), show(it.Name)))
	}
	switch it.State {
	case "", bpav1.PackagePresent, bpav1.PackageAbsent:
	default:
		p = append(p, fmt.Sprintf("state %s of package %s must be present or absent", show(string(it.State)), show(it.Name)))
	}
	return strings.Join(p, "; ")
}

// show quotes a value for an error message, escaping control characters and bounding its
// length, so a hostile value can neither forge log lines nor flood them.
func show(s string) string {
	const max = 64
	if len(s) > max {
		return fmt.Sprintf("%q...", s[:max])
	}
	return fmt.Sprintf("%q", s)
}

func describe(it bpav1.SoftwareItem) string {
	switch {
	case it.State == bpav1.PackageAbsent:
		return "absent"
	case it.Version == bpav1.VersionLatest:
		return "latest"
	case it.Version != "":
		return "version " + it.Version
	default:
		return "any version"
	}
}

// ParseDpkgQuery reads QueryCommand's output into the installed version of each package.
// Packages dpkg knows but that are not installed (removed with config files left, half
// installed, ...) are left out: for BPA they are not there.
func ParseDpkgQuery(out []byte) (map[string]string, error) {
	installed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("dpkg-query output line %d: want 3 tab-separated fields, got %d", n, len(f))
		}
		// Status-Abbrev is want, status, error flag: "ii " is installed, "rc " removed with
		// config files, "iU " unpacked but not configured. Only status 'i' is installed.
		if abbrev := f[2]; len(abbrev) >= 2 && abbrev[1] == 'i' {
			installed[f[0]] = f[1] // a Multi-Arch: same package lists once per arch, same version
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading dpkg-query output: %w", err)
	}
	return installed, nil
}

// Plan is what one host needs.
type Plan struct {
	// Packages is each wanted item, sorted by name, with what is installed now.
	Packages []bpav1.PackageStatus
	// Install are apt-get install arguments (name or name=version); Remove are package names.
	Install []string
	Remove  []string
	// downgrades is set when a pinned version is installed, which may be older than the
	// host's: only then may apt-get downgrade (latest never does).
	downgrades bool
}

// Changed reports whether the host needs any command.
func (p Plan) Changed() bool { return len(p.Install)+len(p.Remove) > 0 }

// Unsatisfied says, per package not in its wanted state, what is wrong, sorted.
func (p Plan) Unsatisfied() []string {
	var out []string
	for _, s := range p.Packages {
		switch {
		case s.Wanted == AbsentWanted && s.Installed != "":
			out = append(out, fmt.Sprintf("%s: installed (%s), wanted absent", s.Name, s.Installed))
		case s.Wanted == AbsentWanted:
		case s.Installed == "":
			out = append(out, s.Name+": not installed")
		case s.Wanted == bpav1.VersionLatest:
			if debversion.Compare(s.Installed, s.Target) < 0 {
				out = append(out, fmt.Sprintf("%s: installed %s, older than the newest %s", s.Name, s.Installed, s.Target))
			}
		case s.Wanted != "" && s.Wanted != s.Installed:
			out = append(out, fmt.Sprintf("%s: installed %s, wanted %s", s.Name, s.Installed, s.Wanted))
		}
	}
	return out
}

// Update is `apt-get update` when the plan installs anything, so that apt knows the
// repository's current packages and versions; nil otherwise.
func (p Plan) Update() []string {
	if len(p.Install) == 0 {
		return nil
	}
	return []string{"apt-get", "update"}
}

// Names are the package names the plan hands to apt-get, sorted.
func (p Plan) Names() []string {
	var names []string
	for _, a := range p.Install {
		name, _, _ := strings.Cut(a, "=")
		names = append(names, name)
	}
	names = append(names, p.Remove...)
	sort.Strings(names)
	return names
}

// KnownCommand is the argv that asks apt about names: `apt-cache show` prints one record
// per package, whose Package field is the package's own name. Unknown reads its output.
//
// apt-get reads a name it has no package of as a pattern (apt 2.6 takes `xz..` for a
// regular expression and acts on every package it matches) or skips it, so each name must
// first be shown to be a package of exactly that name. A purely virtual name has no record
// and fails too: apt-get would have to choose among its providers.
func KnownCommand(names []string) []string {
	return append([]string{"apt-cache", "show", "--no-all-versions", "--"}, names...)
}

// Unknown returns the names no record of KnownCommand's output carries as its Package, in
// the order given. Records of other packages (a name read as a pattern) are ignored.
func Unknown(names []string, out []byte) []string {
	seen := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, ok := strings.CutPrefix(line, "Package: "); ok {
			seen[strings.TrimSpace(name)] = true
		}
	}
	var unknown []string
	for _, n := range names {
		if !seen[n] {
			unknown = append(unknown, n)
		}
	}
	return unknown
}

// Changes are the argv lists that install and remove, in order, after Update and the
// KnownCommand check; none when nothing is to be done. The environment is set through
// env(1) in the argv, never as shell text.
func (p Plan) Changes() [][]string {
	var cmds [][]string
	if len(p.Install) > 0 {
		install := []string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends"}
		if p.downgrades {
			// A pin is the wanted state whether it is newer or older than what is there;
			// without this apt-get refuses a downgrade under -y.
			install = append(install, "--allow-downgrades")
		}
		cmds = append(cmds, append(install, p.Install...))
	}
	if len(p.Remove) > 0 {
		cmds = append(cmds, append([]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y"}, p.Remove...))
	}
	return cmds
}

// PlanHost compares the wanted items with what is installed (ParseDpkgQuery's result).
// latest holds the target of each `version: latest` item (Node.Latest); one without a
// target is an error, as is a target that is not a Debian version.
func PlanHost(wanted []bpav1.SoftwareItem, installed, latest map[string]string) (Plan, error) {
	items, err := Normalize(wanted)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Packages: make([]bpav1.PackageStatus, 0, len(items))}
	for _, it := range items {
		have, ok := installed[it.Name]
		st := bpav1.PackageStatus{Name: it.Name, Wanted: it.Version, Installed: have}
		switch {
		case it.State == bpav1.PackageAbsent:
			st.Wanted = AbsentWanted
			if ok {
				p.Remove = append(p.Remove, it.Name)
			}
		case it.Version == bpav1.VersionLatest:
			if st.Target, err = target(it.Name, latest); err != nil {
				return Plan{}, err
			}
			// Older or missing only: a host with the target or newer (from the OS archive, or
			// a pin before) keeps what it has.
			if !ok || debversion.Compare(have, st.Target) < 0 {
				p.Install = append(p.Install, it.Name+"="+st.Target)
			}
		case !ok, it.Version != "" && it.Version != have:
			p.Install = append(p.Install, installArg(it))
			p.downgrades = p.downgrades || it.Version != ""
		}
		p.Packages = append(p.Packages, st)
	}
	return p, nil
}

// target is the version a latest item of name resolves to in latest.
func target(name string, latest map[string]string) (string, error) {
	v, ok := latest[name]
	switch {
	case !ok:
		return "", fmt.Errorf("package %s: version latest, but the run names no newest version for it", show(name))
	case !debversion.Valid(v):
		return "", fmt.Errorf("package %s: newest version %s is not a Debian version", show(name), show(v))
	}
	return v, nil
}

func installArg(it bpav1.SoftwareItem) string {
	if it.Version == "" {
		return it.Name
	}
	return it.Name + "=" + it.Version
}
