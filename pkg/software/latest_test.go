package software

import (
	"reflect"
	"strings"
	"testing"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// A latest item installs its target only on a host that lacks the package or has an older
// version: never a downgrade (and no --allow-downgrades for it), while a pin keeps meaning
// exactly its version in the same plan.
func TestPlanHostLatest(t *testing.T) {
	latest := map[string]string{"htop": "3.2.2-3"}
	for _, tc := range []struct {
		name      string
		installed map[string]string
		wanted    []bpav1.SoftwareItem
		cmd       []string // the install command, nil for none
		unsatisfy []string
	}{
		{"not installed", nil, []bpav1.SoftwareItem{item("htop", "latest")},
			[]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "htop=3.2.2-3"}, []string{"htop: not installed"}},
		{"older", map[string]string{"htop": "3.2.2-2"}, []bpav1.SoftwareItem{item("htop", "latest")},
			[]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "htop=3.2.2-3"},
			[]string{"htop: installed 3.2.2-2, older than the newest 3.2.2-3"}},
		{"the target", map[string]string{"htop": "3.2.2-3"}, []bpav1.SoftwareItem{item("htop", "latest")}, nil, nil},
		{"newer (never downgraded)", map[string]string{"htop": "3.2.2-10"}, []bpav1.SoftwareItem{item("htop", "latest")}, nil, nil},
		{"newer by epoch", map[string]string{"htop": "1:2.0"}, []bpav1.SoftwareItem{item("htop", "latest")}, nil, nil},
		{"a pin beside it downgrades, the latest item does not", map[string]string{"htop": "3.2.2-2", "jq": "1.7"},
			[]bpav1.SoftwareItem{item("htop", "latest"), item("jq", "1.6-2.1")},
			[]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "--allow-downgrades", "htop=3.2.2-3", "jq=1.6-2.1"},
			[]string{"htop: installed 3.2.2-2, older than the newest 3.2.2-3", "jq: installed 1.7, wanted 1.6-2.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanHost(tc.wanted, tc.installed, latest)
			if err != nil {
				t.Fatal(err)
			}
			var cmd []string
			if c := p.Changes(); len(c) > 0 {
				cmd = c[0]
			}
			if !reflect.DeepEqual(cmd, tc.cmd) {
				t.Errorf("install\n got %q\nwant %q", cmd, tc.cmd)
			}
			if !reflect.DeepEqual(p.Unsatisfied(), tc.unsatisfy) {
				t.Errorf("unsatisfied %q, want %q", p.Unsatisfied(), tc.unsatisfy)
			}
			if p.Packages[0].Wanted != "latest" || p.Packages[0].Target != "3.2.2-3" {
				t.Errorf("status %+v: want wanted latest, target 3.2.2-3", p.Packages[0])
			}
		})
	}
	// No target, or a target that is not a Debian version: no plan at all.
	for _, bad := range []map[string]string{nil, {"htop": "-o Dpkg::Options=x"}, {"htop": "3.2; id"}} {
		if p, err := PlanHost([]bpav1.SoftwareItem{item("htop", "latest")}, nil, bad); err == nil || p.Changed() {
			t.Errorf("target %v: plan %+v, err %v", bad, p, err)
		}
	}
}

func TestLatestParameter(t *testing.T) {
	v := []bpav1.PackageVersion{{Name: "jq", Version: "1.7.1-3"}, {Name: "htop", Version: "1:3.2.2-3"}}
	s := FormatLatest(v)
	if s != "htop=1:3.2.2-3 jq=1.7.1-3" {
		t.Fatalf("FormatLatest = %q", s)
	}
	back, err := ParseLatest(s)
	if err != nil || !reflect.DeepEqual(back, []bpav1.PackageVersion{v[1], v[0]}) {
		t.Errorf("ParseLatest = %v, %v", back, err)
	}
	if got, err := ParseLatest(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"htop", "htop=", "htop=a1", "-o=1.0", "htop=1.0;id", "htop=1.0 htop=1.1", "htop=1.0=2"} {
		if _, err := ParseLatest(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestTrackedAndResolve(t *testing.T) {
	spec := bpav1.SoftwareSpec{
		MasterSoftware: []bpav1.SoftwareItem{item("htop", "latest"), item("jq", "1.6-2.1")},
		WorkerSoftware: []bpav1.SoftwareItem{item("htop", "latest"), item("bpa-tool", "latest"), item("curl", "")},
	}
	if got := spec.Tracked(); !reflect.DeepEqual(got, []string{"bpa-tool", "htop"}) {
		t.Errorf("Tracked = %q", got)
	}
	nodes, err := Nodes(spec, []bpav1.HostStatus{{Name: "m", IP: "10.0.0.1", Roles: []string{"master"}}, {Name: "w", IP: "10.0.0.2", Roles: []string{"worker"}}})
	if err != nil {
		t.Fatal(err)
	}
	newest := []bpav1.PackageVersion{{Name: "bpa-tool", Version: "1.0-1"}, {Name: "htop", Version: "3.2.2-3"}}
	for i := range nodes {
		if err := nodes[i].Resolve(newest); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(nodes[0].Latest, map[string]string{"htop": "3.2.2-3"}) || !reflect.DeepEqual(nodes[1].Latest, map[string]string{"bpa-tool": "1.0-1", "htop": "3.2.2-3"}) {
		t.Errorf("Latest: %v %v", nodes[0].Latest, nodes[1].Latest)
	}
	if err := nodes[1].Resolve(newest[1:]); err == nil || !strings.Contains(err.Error(), "bpa-tool") {
		t.Errorf("a tracked package without a version: %v", err)
	}
}

// Only a host whose recorded version of a tracked package is older (or that has no record
// of a success) is visited by an upload's run.
func TestNeedsLatest(t *testing.T) {
	n := Node{Name: "w1", Latest: map[string]string{"htop": "3.2.2-3"}}
	rec := func(phase, installed string) *bpav1.HostSoftwareStatus {
		return &bpav1.HostSoftwareStatus{Name: "w1", Phase: phase, Packages: []bpav1.PackageStatus{{Name: "htop", Wanted: "latest", Installed: installed}}}
	}
	for _, tc := range []struct {
		rec  *bpav1.HostSoftwareStatus
		want bool
	}{
		{nil, true},
		{rec("Failed", "3.2.2-3"), true},
		{rec("Succeeded", ""), true},
		{rec("Succeeded", "3.2.2-2"), true},
		{rec("Succeeded", "3.2.2-3"), false},
		{rec("Succeeded", "3.2.2-4"), false},
	} {
		if got := NeedsLatest(n, tc.rec); got != tc.want {
			t.Errorf("%+v: NeedsLatest = %v", tc.rec, got)
		}
	}
}

func TestUploaded(t *testing.T) {
	before := []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-2"}, {Name: "jq", Version: "1.7"}}
	now := []bpav1.PackageVersion{{Name: "bpa-tool", Version: "1.0"}, {Name: "htop", Version: "3.2.2-3"}, {Name: "jq", Version: "1.6"}}
	if got := Uploaded(before, now); got != "bpa-tool 1.0 uploaded, htop 3.2.2-3 uploaded" {
		t.Errorf("Uploaded = %q", got)
	}
}
