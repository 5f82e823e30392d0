package resolvenodes

import (
	"strings"
	"testing"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// An upload's run lists only the nodes whose recorded htop is older than the uploaded
// version (or that have no record of a success), each with the version its latest item
// resolves to; a run of scope all lists every node.
func TestLatestAndOutdatedScope(t *testing.T) {
	s := sw([]bpav1.SoftwareItem{{Name: "htop", Version: "latest"}, {Name: "jq", Version: "1.6-2"}}, []bpav1.SoftwareItem{{Name: "htop", Version: "latest"}})
	rec := func(name, phase, htop string) bpav1.HostSoftwareStatus {
		return bpav1.HostSoftwareStatus{Name: name, Phase: phase, Packages: []bpav1.PackageStatus{{Name: "htop", Wanted: "latest", Installed: htop}}}
	}
	s.Status.HostSoftware = []bpav1.HostSoftwareStatus{rec("m", "Succeeded", "3.2.2-3"), rec("w1", "Succeeded", "3.2.2-2"), rec("w2", "Failed", "3.2.2-3"), rec("w3", "Succeeded", "3.2.2-9")}
	cm := configMap(map[string]string{"MASTER_m": "10.0.0.1", "WORKER_w1": "10.0.0.2", "WORKER_w2": "10.0.0.3", "WORKER_w3": "10.0.0.4", "WORKER_w4": "10.0.0.5"})

	nodes, _, err := runWith(t, func(o *options) { o.latest, o.scope = "htop=3.2.2-3", translator.ScopeOutdated }, s, cm)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"name":"w1","ip":"10.0.0.2","roles":["worker"],"packages":[{"htop":{"version":"latest"}}],"latest":{"htop":"3.2.2-3"}},` +
		`{"name":"w2","ip":"10.0.0.3","roles":["worker"],"packages":[{"htop":{"version":"latest"}}],"latest":{"htop":"3.2.2-3"}},` +
		`{"name":"w4","ip":"10.0.0.5","roles":["worker"],"packages":[{"htop":{"version":"latest"}}],"latest":{"htop":"3.2.2-3"}}]`
	if nodes != want {
		t.Errorf("outdated nodes\n got %s\nwant %s", nodes, want)
	}

	all, _, err := runWith(t, func(o *options) { o.latest = "htop=3.2.2-3" }, s, cm)
	if err != nil || strings.Count(all, `"name"`) != 5 || !strings.Contains(all, `{"name":"m","ip":"10.0.0.1","roles":["master"],"packages":[{"htop":{"version":"latest"}},{"jq":{"version":"1.6-2"}}],"latest":{"htop":"3.2.2-3"}}`) {
		t.Errorf("scope all: %s, %v", all, err)
	}

	// Nobody outdated (a race with the controller's own check): every node, not none.
	s.Status.HostSoftware = []bpav1.HostSoftwareStatus{rec("m", "Succeeded", "3.2.2-3")}
	one := configMap(map[string]string{"MASTER_m": "10.0.0.1"})
	if got, _, err := runWith(t, func(o *options) { o.latest, o.scope = "htop=3.2.2-3", translator.ScopeOutdated }, s, one); err != nil || strings.Count(got, `"name"`) != 1 {
		t.Errorf("none outdated: %s, %v", got, err)
	}

	for name, tc := range map[string]struct{ latest, scope, want string }{
		"no version for a tracked package": {"", "", "package htop tracks the latest version, and the run names none for it"},
		"hostile version":                  {"htop=1.0;reboot", "", "--latest: latest: version"},
		"unknown scope":                    {"htop=1.0", "some", `--scope: "some"`},
	} {
		if _, _, err := runWith(t, func(o *options) { o.latest, o.scope = tc.latest, tc.scope }, s, one); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}
