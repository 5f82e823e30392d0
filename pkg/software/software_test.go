package software

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/reference"
)

func item(name, version string) bpav1.SoftwareItem {
	return bpav1.SoftwareItem{Name: name, Version: version}
}

func absent(name string) bpav1.SoftwareItem {
	return bpav1.SoftwareItem{Name: name, State: bpav1.PackageAbsent}
}

var (
	goodNames = []string{"jq", "libc6", "libstdc++6", "libsigc++-2.0-dev", "python3.11", "lib32z1-dev", "0ad", "x11-apps"}
	// A trailing '-' or '+' is apt-get's remove or install suffix, so g++ goes too.
	badNames     = []string{"", "a", "Jq", "-rf", "--purge", ".jq", "jq;id", "x; rm -rf /", "$(id)", "`id`", "jq\nid", "jq id", "jq=1.0", "jq'", strings.Repeat("a", 129), "openssh-server-", "kubelet-", "xz.+", "g++", "a-", "a+"}
	goodVersions = []string{"1", "1.6-2", "1.5+dfsg-1ubuntu0.1", "2:9.0.1378-2", "1.0~rc1", "7.88.1-10+deb12u5", "latest"}
	badVersions  = []string{"a1", "-1", "Latest", "latest ", "newest", "1.0-", "1.0 2", "1.0;id", "$(id)", "1.0\n2", ":1", "1:", "1.0'", "1_0", strings.Repeat("1", 129)}
)

func TestValidate(t *testing.T) {
	for _, n := range goodNames {
		for _, v := range append([]string{""}, goodVersions...) {
			if err := Validate([]bpav1.SoftwareItem{item(n, v)}); err != nil {
				t.Errorf("%s=%s: %v", n, v, err)
			}
		}
	}
	for _, n := range badNames {
		err := Validate([]bpav1.SoftwareItem{item(n, "")})
		if err == nil || !strings.Contains(err.Error(), show(n)) {
			t.Errorf("name %q: error must name the value, got %v", n, err)
		}
	}
	for _, v := range badVersions {
		err := Validate([]bpav1.SoftwareItem{item("jq", v)})
		if err == nil || !strings.Contains(err.Error(), show(v)) || !strings.Contains(err.Error(), "jq") {
			t.Errorf("version %q: error must name the value and package, got %v", v, err)
		}
	}
	if err := Validate([]bpav1.SoftwareItem{{Name: "jq", State: "purged"}}); err == nil || !strings.Contains(err.Error(), `"purged"`) {
		t.Errorf("bad state: %v", err)
	}
	// Every problem is reported, not just the first, and control characters are escaped.
	err := Validate([]bpav1.SoftwareItem{item("ok", ""), item("x; rm -rf /", ""), item("jq", "$(id)"), item("a\nb", "")})
	if err == nil || strings.Count(err.Error(), ";") < 2 || strings.Contains(err.Error(), "\n") {
		t.Errorf("want every problem on one line, got %v", err)
	}
}

// TestValidateAgreesWithAdmission: the step must reject exactly what admission rejects.
func TestValidateAgreesWithAdmission(t *testing.T) {
	for _, n := range append(append([]string(nil), goodNames...), badNames...) {
		mine := Validate([]bpav1.SoftwareItem{item(n, "")}) == nil
		theirs := len(validation.ValidateSoftwareItem(field.NewPath("x"), n)) == 0
		if mine != theirs {
			t.Errorf("name %q: step says valid=%v, admission %v", n, mine, theirs)
		}
	}
	for _, v := range append(append([]string(nil), goodVersions...), badVersions...) {
		mine := Validate([]bpav1.SoftwareItem{item("jq", v)}) == nil
		theirs := len(validation.ValidatePackageVersion(field.NewPath("x"), v)) == 0
		if mine != theirs {
			t.Errorf("version %q: step says valid=%v, admission %v", v, mine, theirs)
		}
	}
}

func TestNormalize(t *testing.T) {
	got, err := Normalize(
		[]bpav1.SoftwareItem{item("tmux", ""), item("jq", ""), item("curl", "7.88"), {Name: "htop", State: bpav1.PackagePresent}},
		[]bpav1.SoftwareItem{item("jq", "1.6-2"), item("tmux", ""), item("curl", ""), item("htop", ""), absent("telnet")},
	)
	want := []bpav1.SoftwareItem{item("curl", "7.88"), item("htop", ""), item("jq", "1.6-2"), absent("telnet"), item("tmux", "")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	// latest and unpinned: latest, which satisfies both.
	if got, err := Normalize([]bpav1.SoftwareItem{item("htop", "")}, []bpav1.SoftwareItem{item("htop", "latest")}); err != nil || !reflect.DeepEqual(got, []bpav1.SoftwareItem{item("htop", "latest")}) {
		t.Errorf("latest and unpinned: %v, %v", got, err)
	}
	for _, conflict := range [][]bpav1.SoftwareItem{
		{item("jq", "1.5"), item("jq", "latest")},
		{item("jq", "1.5"), item("jq", "1.6")},
		{item("jq", ""), absent("jq")},
		{item("jq", "1.5"), absent("jq")},
	} {
		if _, err := Normalize(conflict); err == nil || !strings.Contains(err.Error(), "package jq is wanted twice") {
			t.Errorf("%v: want a conflict, got %v", conflict, err)
		}
	}
}

func TestParseDpkgQuery(t *testing.T) {
	out := "adduser\t3.134\tii \n" +
		"jq\t1.6-2.1\tii \n" +
		"libc6\t2.36-9\tii \n" +
		"libc6\t2.36-9\tii \n" + // Multi-Arch: same, listed per architecture
		"telnet\t0.17-44\trc \n" + // removed, config files left
		"half\t1.0\tiU \n" + // unpacked, not configured
		"held\t2.0\thi \n" + // installed, on hold
		"gone\t\tun \n" +
		"\n"
	got, err := ParseDpkgQuery([]byte(out))
	want := map[string]string{"adduser": "3.134", "jq": "1.6-2.1", "libc6": "2.36-9", "held": "2.0"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	if _, err := ParseDpkgQuery([]byte("jq 1.6 ii\n")); err == nil {
		t.Error("a line without tabs must be an error, not silently skipped")
	}
	if got, err := ParseDpkgQuery(nil); err != nil || len(got) != 0 {
		t.Errorf("empty output: %v, %v", got, err)
	}
}

func TestPlanHost(t *testing.T) {
	installed := map[string]string{"jq": "1.5+dfsg-1", "curl": "7.88.1-10", "telnet": "0.17-44"}
	for _, tc := range []struct {
		name      string
		wanted    []bpav1.SoftwareItem
		install   []string
		remove    []string
		cmds      [][]string
		packages  []bpav1.PackageStatus
		unsatisfy []string
	}{
		{
			name:     "all satisfied: nothing at all, not even apt-get update",
			wanted:   []bpav1.SoftwareItem{item("jq", "1.5+dfsg-1"), item("curl", ""), absent("nano")},
			packages: []bpav1.PackageStatus{{Name: "curl", Installed: "7.88.1-10"}, {Name: "jq", Wanted: "1.5+dfsg-1", Installed: "1.5+dfsg-1"}, {Name: "nano", Wanted: "absent"}},
		},
		{
			name:    "fresh installs, with and without pins",
			wanted:  []bpav1.SoftwareItem{item("htop", ""), item("tmux", "3.3a-3")},
			install: []string{"htop", "tmux=3.3a-3"},
			cmds: [][]string{
				{"apt-get", "update"},
				{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "--allow-downgrades", "htop", "tmux=3.3a-3"},
			},
			packages:  []bpav1.PackageStatus{{Name: "htop"}, {Name: "tmux", Wanted: "3.3a-3"}},
			unsatisfy: []string{"htop: not installed", "tmux: not installed"},
		},
		{
			name:    "version change",
			wanted:  []bpav1.SoftwareItem{item("jq", "1.6-2.1"), item("curl", "")},
			install: []string{"jq=1.6-2.1"},
			cmds: [][]string{
				{"apt-get", "update"},
				{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "--allow-downgrades", "jq=1.6-2.1"},
			},
			packages:  []bpav1.PackageStatus{{Name: "curl", Installed: "7.88.1-10"}, {Name: "jq", Wanted: "1.6-2.1", Installed: "1.5+dfsg-1"}},
			unsatisfy: []string{"jq: installed 1.5+dfsg-1, wanted 1.6-2.1"},
		},
		{
			name:    "unpinned install needs no --allow-downgrades",
			wanted:  []bpav1.SoftwareItem{item("htop", "")},
			install: []string{"htop"},
			cmds: [][]string{
				{"apt-get", "update"},
				{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "htop"},
			},
			packages:  []bpav1.PackageStatus{{Name: "htop"}},
			unsatisfy: []string{"htop: not installed"},
		},
		{
			name:      "removal only: no apt-get update",
			wanted:    []bpav1.SoftwareItem{absent("telnet")},
			remove:    []string{"telnet"},
			cmds:      [][]string{{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y", "telnet"}},
			packages:  []bpav1.PackageStatus{{Name: "telnet", Wanted: "absent", Installed: "0.17-44"}},
			unsatisfy: []string{"telnet: installed (0.17-44), wanted absent"},
		},
		{
			name:    "install and remove",
			wanted:  []bpav1.SoftwareItem{absent("telnet"), item("htop", "")},
			install: []string{"htop"},
			remove:  []string{"telnet"},
			cmds: [][]string{
				{"apt-get", "update"},
				{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends", "htop"},
				{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y", "telnet"},
			},
			packages:  []bpav1.PackageStatus{{Name: "htop"}, {Name: "telnet", Wanted: "absent", Installed: "0.17-44"}},
			unsatisfy: []string{"htop: not installed", "telnet: installed (0.17-44), wanted absent"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := PlanHost(tc.wanted, installed, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Install, tc.install) || !reflect.DeepEqual(p.Remove, tc.remove) {
				t.Errorf("install %q remove %q; want %q %q", p.Install, p.Remove, tc.install, tc.remove)
			}
			if p.Changed() != (len(tc.cmds) > 0) {
				t.Errorf("Changed() = %v", p.Changed())
			}
			if got := commands(p); !reflect.DeepEqual(got, tc.cmds) {
				t.Errorf("commands\n got %q\nwant %q", got, tc.cmds)
			}
			if !reflect.DeepEqual(p.Packages, tc.packages) {
				t.Errorf("packages\n got %+v\nwant %+v", p.Packages, tc.packages)
			}
			if !reflect.DeepEqual(p.Unsatisfied(), tc.unsatisfy) {
				t.Errorf("unsatisfied %q, want %q", p.Unsatisfied(), tc.unsatisfy)
			}
		})
	}
}

// commands are the plan's apt-get commands in the order install-software runs them.
func commands(p Plan) [][]string {
	if u := p.Update(); u != nil {
		return append([][]string{u}, p.Changes()...)
	}
	return p.Changes()
}

func TestUnknown(t *testing.T) {
	// What apt 2.6's `apt-cache show --no-all-versions -- xz-utils xz.. mail-transport-agent
	// telnet` prints: xz.. read as a regular expression, the virtual package nothing.
	out := []byte("Package: xz-utils\nVersion: 5.4.1-0.2\nDescription: XZ-format compression utilities\n Package: not-a-field\n\n" +
		"Package: xzdec\nVersion: 5.4.1-0.2\n\nPackage: libxz-java\nVersion: 1.9-1\n\nPackage: telnet\nVersion: 0.17+2.4-2\n")
	got := Unknown([]string{"xz-utils", "xz..", "mail-transport-agent", "telnet", "not-a-field"}, out)
	if want := []string{"xz..", "mail-transport-agent", "not-a-field"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	p := Plan{Install: []string{"tmux=3.3a-3", "htop"}, Remove: []string{"telnet"}}
	if got := p.Names(); !reflect.DeepEqual(got, []string{"htop", "telnet", "tmux"}) {
		t.Errorf("Names() = %q", got)
	}
	if got := KnownCommand(p.Names()); !reflect.DeepEqual(got, []string{"apt-cache", "show", "--no-all-versions", "--", "htop", "telnet", "tmux"}) {
		t.Errorf("KnownCommand = %q", got)
	}
}

// TestPlanHostRefusesInjectionBeforeBuildingAnything: no plan, hence no argv, comes out of
// a hostile item, even when the rest of the list is fine.
func TestPlanHostRefusesInjectionBeforeBuildingAnything(t *testing.T) {
	for _, bad := range []bpav1.SoftwareItem{item("curl; id", ""), item("jq", "1.0 && id"), item("-o", "")} {
		p, err := PlanHost([]bpav1.SoftwareItem{item("htop", ""), bad}, nil, nil)
		if err == nil || p.Changed() || len(commands(p)) != 0 {
			t.Errorf("%v: plan %+v, err %v", bad, p, err)
		}
	}
}

// TestNodesFromICNSample: a Software of the shape of ICN's sample, where jq is pinned for
// masters and unpinned for workers.
func TestNodesFromICNSample(t *testing.T) {
	checkNodesFromSample(t, "../validation/testdata/good/rack-tools.yaml", "1.6-2.1")
}

// TestReferenceNodesFromICNSample: ICN's own sample.
func TestReferenceNodesFromICNSample(t *testing.T) {
	checkNodesFromSample(t, reference.Path(t, "icn", "software", "bpa_v1alpha1_software_cr.yaml"), "1.5+dfsg-1ubuntu0.1")
}

func checkNodesFromSample(t *testing.T, path, jqPin string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var sw bpav1.Software
	if err := yaml.Unmarshal(data, &sw); err != nil {
		t.Fatal(err)
	}
	hosts := []bpav1.HostStatus{
		{Name: "worker-1", IP: "10.0.0.3", Roles: []string{"worker"}},
		{Name: "master-1", IP: "10.0.0.1", Roles: []string{"worker", "master"}},
		{Name: "master-2", IP: "10.0.0.2", Roles: []string{"master"}},
	}
	nodes, err := Nodes(sw.Spec, hosts)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(nodes)
	// master-1 has both roles: jq pinned by masterSoftware and unpinned by workerSoftware
	// merge into the pin, which satisfies both.
	want := `[` +
		`{"name":"master-1","ip":"10.0.0.1","roles":["master","worker"],"packages":["curl","expect","htop",{"jq":{"version":"` + jqPin + `"}},"maven","python","tmux"]},` +
		`{"name":"master-2","ip":"10.0.0.2","roles":["master"],"packages":["expect","htop",{"jq":{"version":"` + jqPin + `"}},"maven"]},` +
		`{"name":"worker-1","ip":"10.0.0.3","roles":["worker"],"packages":["curl","jq","python","tmux"]}]`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// The JSON reads back into the same nodes: install-software gets exactly this.
	var back []Node
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, nodes) {
		t.Errorf("round trip: %v\n%+v\n%+v", err, back, nodes)
	}
}

func TestNodesEmptyListIsNotNull(t *testing.T) {
	nodes, err := Nodes(bpav1.SoftwareSpec{MasterSoftware: []bpav1.SoftwareItem{item("jq", "")}}, []bpav1.HostStatus{{Name: "w", IP: "10.0.0.9", Roles: []string{"worker"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(nodes); string(got) != `[{"name":"w","ip":"10.0.0.9","roles":["worker"],"packages":[]}]` {
		t.Errorf("got %s", got)
	}
}

func TestNodesConflictNamesHost(t *testing.T) {
	spec := bpav1.SoftwareSpec{MasterSoftware: []bpav1.SoftwareItem{item("jq", "1.5")}, WorkerSoftware: []bpav1.SoftwareItem{item("jq", "1.6")}}
	_, err := Nodes(spec, []bpav1.HostStatus{{Name: "m", IP: "10.0.0.1", Roles: []string{"master", "worker"}}})
	if err == nil || !strings.Contains(err.Error(), "host m (master+worker)") || !strings.Contains(err.Error(), "version 1.5") {
		t.Errorf("got %v", err)
	}
}

func TestAddressDataRoundTrip(t *testing.T) {
	hosts := []bpav1.HostStatus{
		{Name: "master-1", IP: "10.0.0.1", Roles: []string{"master", "worker"}},
		{Name: "worker-1", IP: "10.0.0.3", Roles: []string{"worker"}},
	}
	data, err := AddressData(hosts)
	want := map[string]string{"MASTER_master-1": "10.0.0.1", "WORKER_master-1": "10.0.0.1", "WORKER_worker-1": "10.0.0.3"}
	if err != nil || !reflect.DeepEqual(data, want) {
		t.Fatalf("AddressData = %v, %v", data, err)
	}
	data["KUD_DEBUG"] = "true" // other keys are not nodes
	back, err := HostsFromAddressData(data)
	if err != nil || !reflect.DeepEqual(back, hosts) {
		t.Errorf("HostsFromAddressData = %+v, %v", back, err)
	}
	for _, bad := range []map[string]string{
		{"MASTER_a": "not-an-ip"},
		{"MASTER_a": "10.0.0.1", "WORKER_a": "10.0.0.2"},
		{"MASTER_": "10.0.0.1"},
	} {
		if _, err := HostsFromAddressData(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	for _, bad := range [][]bpav1.HostStatus{
		{{Name: "a", Roles: []string{"master"}}},
		{{Name: "a", IP: "10.0.0.1"}},
		{{Name: "a", IP: "10.0.0.1", Roles: []string{"etcd"}}},
		{{Name: "a", IP: "10.0.0.1", Roles: []string{"master"}}, {Name: "a", IP: "10.0.0.2", Roles: []string{"master"}}},
	} {
		if _, err := AddressData(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestNodesHashMatchesController pins the hash to the controller's algorithm
// (pkg/controller nodesRevision): sha256 over sorted "KEY=VALUE\n" lines of the node keys.
func TestNodesHashMatchesController(t *testing.T) {
	data := map[string]string{"WORKER_w": "10.0.0.2", "MASTER_m": "10.0.0.1", "OTHER": "x"}
	// echo -n $'MASTER_m=10.0.0.1\nWORKER_w=10.0.0.2\n' | sha256sum
	if got := NodesHash(data); got != "de3f1903c99c" {
		t.Errorf("NodesHash = %s", got)
	}
	data["WORKER_new"] = "10.0.0.3"
	if NodesHash(data) == "de3f1903c99c" {
		t.Error("a new node must change the hash")
	}
}

func TestHostLine(t *testing.T) {
	ok := bpav1.HostSoftwareStatus{Name: "worker-1", IP: "10.0.0.3", Phase: "Succeeded", Changed: true,
		Packages: []bpav1.PackageStatus{{Name: "curl", Installed: "7.88.1-10"}, {Name: "telnet", Wanted: "absent"}}}
	if got, want := HostLine(ok), "worker-1 (10.0.0.3): Succeeded, changed; curl 7.88.1-10, telnet not installed"; got != want {
		t.Errorf("HostLine = %q, want %q", got, want)
	}
	bad := bpav1.HostSoftwareStatus{Name: "worker-2", Phase: "Failed", Message: "ssh: connection refused"}
	if got, want := HostLine(bad), "worker-2: Failed; ssh: connection refused"; got != want {
		t.Errorf("HostLine = %q, want %q", got, want)
	}
}
