package inventory

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func host(name, ip string, roles ...string) bpav1.HostStatus {
	return bpav1.HostStatus{Name: name, IP: ip, Roles: roles, MAC: "52:54:00:00:00:01", BareMetalHost: "bmh-" + name}
}

// samples are the host sets every flavour is rendered and checked for.
var samples = map[string][]bpav1.HostStatus{
	// examples/provisioning-by-mac.yaml on examples/bmh
	"by-mac": {host("master", "127.0.1.11", "master"), host("worker-1", "127.0.1.12", "worker"), host("worker-2", "127.0.1.13", "worker")},
	// ICN single-node samples: one host with both roles
	"combined": {host("master-1", "127.0.1.19", "master", "worker")},
	// ICN e2e_bpa_remote_virtletvm_cr_multi.yaml shape, listed out of order, one master also a worker
	"multi": {
		host("worker-2", "10.10.10.22", "worker"), host("master-3", "10.10.10.13", "master", "worker"),
		host("master-1", "10.10.10.11", "master"), host("worker-1", "10.10.10.21", "worker"), host("master-2", "10.10.10.12", "master"),
	},
	"ipv6": {host("master-1", "fd00::1", "master", "worker"), host("worker-1", "fd00:0:0::2", "worker")},
	// two masters: etcd on one (hosts without etcd flags: the first by name)
	"two-masters": {host("m1", "192.168.50.63", "master"), host("m2", "192.168.50.64", "master"), host("w1", "192.168.50.65", "worker")},
	// four masters, discover-hosts chose three for etcd (not the first by name)
	"four-masters": {host("m1", "10.0.0.1", "master"), etcdHost("m2", "10.0.0.2"), etcdHost("m3", "10.0.0.3"), etcdHost("m4", "10.0.0.4"), host("w1", "10.0.0.5", "worker")},
}

func etcdHost(name, ip string) bpav1.HostStatus {
	h := host(name, ip, "master")
	h.Etcd = true
	return h
}

// etcdOf is who must be in [etcd]: the hosts flagged, else the largest odd number of masters by name.
func etcdOf(hosts []bpav1.HostStatus) []string {
	var flagged, masters []string
	for _, h := range hosts {
		if h.Etcd {
			flagged = append(flagged, h.Name)
		}
		if slices.Contains(h.Roles, "master") {
			masters = append(masters, h.Name)
		}
	}
	if flagged != nil {
		return sorted(flagged)
	}
	masters = sorted(masters)
	return masters[:len(masters)-(1-len(masters)%2)]
}

// groups says which hosts each group must hold, per flavour, as functions of the roles.
var groups = map[bpav1.InventoryFlavor]map[string]string{
	bpav1.InventoryFlavorKubespray: {"kube_control_plane": "master", "etcd": "etcd", "kube_node": "worker", "k8s_cluster": "all"},
	bpav1.InventoryFlavorKUD: {"kube-master": "master", "kube-node": "worker", "etcd": "etcd", "ovn-central": "master",
		"ovn-controller": "worker", "virtlet": "worker", "k8s-cluster": "all"},
}

// TestRenderedInventoriesParseInAnsible runs the real ansible-inventory on every rendered
// inventory. It fails (it does not skip) without ansible-core: CI installs it, and an
// inventory only BPA can read is worthless.
func TestRenderedInventoriesParseInAnsible(t *testing.T) {
	for _, flavor := range []bpav1.InventoryFlavor{bpav1.InventoryFlavorKubespray, bpav1.InventoryFlavorKUD} {
		for name, hosts := range samples {
			t.Run(string(flavor)+"/"+name, func(t *testing.T) {
				ini, warnings, err := Render(hosts, Options{Flavor: flavor})
				require.NoError(t, err)
				inv := ansibleInventory(t, ini)
				want := map[string][]string{"all": nil}
				for _, h := range hosts {
					ip := net.ParseIP(h.IP).String() // the canonical form BPA writes
					assert.Equal(t, ip, inv.hostvar(h.Name, "ansible_host"), "%s ansible_host", h.Name)
					assert.Equal(t, ip, inv.hostvar(h.Name, "ip"), "%s ip", h.Name)
					want["all"] = append(want["all"], h.Name)
					for _, r := range h.Roles {
						want[r] = append(want[r], h.Name)
					}
				}
				want["etcd"] = etcdOf(hosts)
				for group, role := range groups[flavor] {
					assert.Equal(t, sorted(want[role]), inv.members(group), "group %s", group)
				}
				assert.Equal(t, sorted(want["all"]), inv.members("all"))
				assert.Empty(t, warnings)
			})
		}
	}
}

func TestUserTemplateParsesInAnsible(t *testing.T) {
	tmpl := `# {{ len .Hosts }} hosts, flavour {{ .Flavor | upper }}
[all]
{{- range .Hosts }}
{{ .Name }} ansible_host={{ .IP }} access_ip={{ .IP }}
{{- end }}

[kube_control_plane]
{{ (first .Masters).Name }}

[etcd]
{{- range $i, $h := .Etcd }}
{{ .Name }} etcd_member_name=etcd{{ add1 $i }}
{{- end }}

[kube_node]
{{- range .Workers }}
{{ .Name }}
{{- end }}
`
	ini, _, err := Render(samples["multi"], Options{Template: tmpl, TemplateName: "ConfigMap inv key hosts.ini.tmpl"})
	require.NoError(t, err)
	assert.Contains(t, string(ini), "# 5 hosts, flavour KUBESPRAY")
	inv := ansibleInventory(t, ini)
	assert.Equal(t, []string{"master-1"}, inv.members("kube_control_plane"), "hosts are sorted, so the first master is stable")
	assert.Equal(t, []string{"master-3", "worker-1", "worker-2"}, inv.members("kube_node"))
	assert.Equal(t, "etcd2", inv.hostvar("master-2", "etcd_member_name"))
	assert.Equal(t, "10.10.10.21", inv.hostvar("worker-1", "access_ip"))
}

// TestHostileTemplatesAreRefused: an inventory template (a ConfigMap the CR names) can write
// anything. Each attack is first shown to work on the real ansible-inventory (it sets what
// the attacker wants), then refused by Render, naming the line.
func TestHostileTemplatesAreRefused(t *testing.T) {
	const good = "[all]\nmaster ansible_host=127.0.1.11 ip=127.0.1.11\nworker-1 ansible_host=127.0.1.12\nworker-2 ansible_host=127.0.1.13\n" +
		"[kube_control_plane]\nmaster\n[etcd]\nmaster\n[kube_node]\nworker-1\nworker-2\n"
	for name, tc := range map[string]struct {
		ini       string
		host, v   string // a host variable the real ansible-inventory then has
		wantValue string
		want      string
	}{
		"connection local": {good + "[etcd]\nmaster ansible_connection=local\n", "master", "ansible_connection", "local",
			"line 13: host master: only the variables ansible_host, ip, access_ip and etcd_member_name may be set"},
		"proxy command": {good + "[kube_node]\nworker-1 ansible_ssh_extra_args=\"-o ProxyCommand=sh -c 'cat /etc/bpa/ssh/ssh-privatekey'\"\n",
			"worker-1", "ansible_ssh_extra_args", "-o ProxyCommand=sh -c 'cat /etc/bpa/ssh/ssh-privatekey'", "line 13: host worker-1: only the variables"},
		"group vars": {good + "[all:vars]\nansible_connection=local\n", "master", "ansible_connection", "local",
			"line 12: only [group] and [group:children] sections are allowed (no [group:vars]"},
		"jinja in a host var": {strings.Replace(good, "ip=127.0.1.11", "ip=\"{{ lookup('pipe', 'id') }}\"", 1), "master", "ip", "{{ lookup('pipe', 'id') }}",
			`line 2: "{{": Jinja delimiters and #jinja2: are refused`},
		"become": {good + "[kube_node]\nworker-2 ansible_become_exe=/tmp/x\n", "worker-2", "ansible_become_exe", "/tmp/x", "line 13: host worker-2: only the variables"},
		"another IP": {strings.Replace(good, "worker-1 ansible_host=127.0.1.12", "worker-1 ansible_host=10.0.0.99", 1), "worker-1", "ansible_host", "10.0.0.99",
			"line 3: host worker-1: ansible_host must be the host's own IP 127.0.1.12"},
		"a host of its own": {good + "[kube_node]\nelsewhere ansible_host=10.0.0.99\n", "elsewhere", "ansible_host", "10.0.0.99",
			"line 13: host elsewhere is not one of the cluster's hosts"},
		"bastion": {good + "[bastion]\nworker-2 ansible_host=127.0.1.13\n", "worker-2", "ansible_host", "127.0.1.13", "line 12: not a kubespray or KUD group"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.wantValue, ansibleInventory(t, []byte(tc.ini)).hostvar(tc.host, tc.v), "the attack works on Ansible")
			// The template writes the hostile inventory verbatim (a raw string action).
			_, _, err := Render(samples["by-mac"], Options{Template: "{{`" + tc.ini + "`}}", TemplateName: "ConfigMap inv key hosts.ini.tmpl"})
			require.Error(t, err)
			assert.Equal(t, "ConfigMap inv key hosts.ini.tmpl: rendered inventory: "+tc.want, err.Error()[:min(len(err.Error()), len("ConfigMap inv key hosts.ini.tmpl: rendered inventory: "+tc.want))])
		})
	}
}

func TestCheckInventory(t *testing.T) {
	hosts := []Host{{Name: "m", IP: "10.0.0.1"}, {Name: "w", IP: "fd00::2"}}
	for ini, want := range map[string]string{
		"[all]\nm ansible_host=10.0.0.1 ip=10.0.0.1 access_ip=10.0.0.1\nw ansible_host=fd00::2\n; comment\n# comment\n[k8s_cluster:children]\nkube_node\n": "",
		"m ansible_host=10.0.0.1\n": "line 1: a host or group outside any [group] section",
		"[all]\nm\n":                "line 2: host m has no ansible_host",
		"[all]\nm ansible_host=10.0.0.1\n[etcd]\nw\n":          "line 4: host w has no ansible_host",
		"[all]\nm[1:3] ansible_host=10.0.0.1\n":                "line 2: the host name must be an RFC 1123 label",
		"[all]\nm ansible_host=10.0.0.1 ansible_host=10.0.0.1": "line 2: host m: ansible_host is set twice",
		"[all]\nm ansible_host=010.0.0.1\n":                    "line 2: host m: ansible_host must be an IP address in canonical form",
		"[all]\nm ansible_host=FD00::2\n":                      "must be an IP address in canonical form",
		"[all]\nm ansible_host=10.0.0.1 etcd_member_name=E_1":  "line 2: host m: etcd_member_name must be an RFC 1123 label",
		"[all]\nm ansible_host=10.0.0.1 ip":                    "line 2: host m: only the variables",
		"[all\n":                                               "line 1: a section header must be [group] or [group:children]",
		"[evil:children]\nall\n":                               "line 1: not a kubespray or KUD group (want one of all, calico_rr,",
		"[k8s_cluster:children]\nkube_node extra\n":            "line 2: in [k8s_cluster:children] each line names one kubespray or KUD group",
		"[k8s_cluster:children]\nevil\n":                       "line 2: in [k8s_cluster:children]",
		"# ok\n#jinja2:variable_start_string:'[['\n":           `line 2: "#jinja2:": Jinja delimiters`,
		"[all]\nm ansible_host=10.0.0.1 # {# c #}\n":           `line 2: "{#"`,
		"[all]\nm ansible_host=10.0.0.1 # trailing\n":          "line 2: host m: only the variables",
	} {
		err := CheckInventory([]byte(ini), hosts)
		if want == "" {
			assert.NoError(t, err, ini)
		} else {
			assert.ErrorContains(t, err, want, ini)
		}
	}
	// Without the hosts (run-kubespray), any canonical IP and host name is taken.
	assert.NoError(t, CheckInventory([]byte("[all]\nother ansible_host=192.0.2.1\n"), nil))
}

func TestTemplateErrors(t *testing.T) {
	hosts := samples["by-mac"]
	for name, tc := range map[string]struct{ tmpl, want string }{
		"syntax":      {"{{ range .Hosts }}", "ConfigMap x key y: template: ConfigMap x key y:1: unexpected EOF"},
		"no env":      {`{{ env "HOME" }}`, `function "env" not defined`},
		"no expand":   {`{{ expandenv "$HOME" }}`, `function "expandenv" not defined`},
		"bad field":   {"{{ .Nope }}", "can't evaluate field Nope"},
		"exec failed": {`{{ fail "no" }}`, "ConfigMap x key y: template: ConfigMap x key y:1:3: executing"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Render(hosts, Options{Template: tc.tmpl, TemplateName: "ConfigMap x key y"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, _, err := Render(hosts, Options{Flavor: "ansible"})
	assert.ErrorContains(t, err, `unknown inventory flavor "ansible"`)
}

func TestHostsAreValidatedBeforeRendering(t *testing.T) {
	ok := host("master-1", "10.0.0.1", "master")
	for name, tc := range map[string]struct {
		hosts []bpav1.HostStatus
		want  string
	}{
		"name with a space": {[]bpav1.HostStatus{host("master-1 ansible_connection=local", "10.0.0.1", "master")}, `hosts[0]: name "master-1 ansible_connection=local"`},
		"upper-case name":   {[]bpav1.HostStatus{host("Master", "10.0.0.1", "master")}, `name "Master"`},
		"newline in name":   {[]bpav1.HostStatus{host("m\n[all:vars]", "10.0.0.1", "master")}, "hosts[0]: name"},
		"no IP":             {[]bpav1.HostStatus{host("m", "", "master")}, "host m has no IP address"},
		"IP with vars":      {[]bpav1.HostStatus{host("m", "10.0.0.1 ansible_user=root", "master")}, `host m: "10.0.0.1 ansible_user=root" is not an IP address`},
		"hostname as IP":    {[]bpav1.HostStatus{host("m", "example.com", "master")}, "is not an IP address"},
		"bad MAC":           {[]bpav1.HostStatus{{Name: "m", IP: "10.0.0.1", Roles: []string{"master"}, MAC: "zz"}}, `host m: "zz" is not a MAC address`},
		"bad BMH name":      {[]bpav1.HostStatus{{Name: "m", IP: "10.0.0.1", Roles: []string{"master"}, BareMetalHost: "a b"}}, `host m: bareMetalHost "a b"`},
		"unknown role":      {[]bpav1.HostStatus{host("m", "10.0.0.1", "master", "etcd")}, `host m: role "etcd": want master or worker`},
		"role twice":        {[]bpav1.HostStatus{host("m", "10.0.0.1", "master", "master")}, `role "master": want master or worker, each at most once`},
		"no role":           {[]bpav1.HostStatus{host("m", "10.0.0.1")}, "host m has no role"},
		"no master":         {[]bpav1.HostStatus{host("w", "10.0.0.1", "worker")}, "no host has the master role"},
		"name twice":        {[]bpav1.HostStatus{ok, host("master-1", "10.0.0.2", "worker")}, "hosts[1]: host master-1 is listed twice"},
		"IP twice":          {[]bpav1.HostStatus{ok, host("worker-1", "10.0.0.1", "worker")}, "hosts master-1 and worker-1 have the same IP 10.0.0.1"},
		"IP twice, spelled": {[]bpav1.HostStatus{ok, host("worker-1", "::ffff:10.0.0.1", "worker")}, "have the same IP 10.0.0.1"},
		"no hosts":          {nil, "no host has the master role"},
		"even etcd":         {[]bpav1.HostStatus{etcdHost("m1", "10.0.0.1"), etcdHost("m2", "10.0.0.2")}, "2 hosts run etcd: kubespray refuses an even number"},
		"etcd on a worker":  {[]bpav1.HostStatus{host("m1", "10.0.0.1", "master"), {Name: "w1", IP: "10.0.0.2", Roles: []string{"worker"}, Etcd: true}}, "host w1: only a master can run etcd"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Render(tc.hosts, Options{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestWarnings(t *testing.T) {
	_, w, err := Render([]bpav1.HostStatus{host("m1", "10.0.0.1", "master"), host("m2", "10.0.0.2", "master")}, Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"no host has the worker role: the cluster can run no workloads"}, w)
}

func TestRenderIsDeterministic(t *testing.T) {
	a, _, err := Render(samples["multi"], Options{})
	require.NoError(t, err)
	rev := append([]bpav1.HostStatus(nil), samples["multi"]...)
	sort.Slice(rev, func(i, j int) bool { return rev[i].Name > rev[j].Name })
	b, _, err := Render(rev, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(a), string(b))
}

// ansible is what `ansible-inventory --list` says about an inventory.
type ansible map[string]json.RawMessage

func ansibleInventory(t *testing.T, ini []byte) ansible {
	t.Helper()
	bin, err := exec.LookPath("ansible-inventory")
	require.NoError(t, err, "ansible-inventory is needed (Debian package ansible-core; .ci/run installs it)")
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts.ini")
	require.NoError(t, os.WriteFile(path, ini, 0o644))
	cmd := exec.Command(bin, "-i", path, "--list")
	// Only the INI plugin, and an inventory it cannot parse is an error rather than the
	// empty inventory plus a warning that ansible-inventory gives by default.
	cmd.Env = append(os.Environ(), "ANSIBLE_INVENTORY_ENABLED=ini", "ANSIBLE_INVENTORY_UNPARSED_FAILED=true",
		"ANSIBLE_LOCAL_TEMP="+dir, "ANSIBLE_HOME="+dir, "ANSIBLE_NOCOLOR=1")
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "ansible-inventory on:\n%s\n%s", ini, stderr)
	var inv ansible
	require.NoError(t, json.Unmarshal(out, &inv), "%s", out)
	return inv
}

type group struct {
	Hosts    []string `json:"hosts"`
	Children []string `json:"children"`
}

// members lists a group's hosts including those of its children, sorted.
func (a ansible) members(name string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		var g group
		if raw, ok := a[n]; ok {
			_ = json.Unmarshal(raw, &g)
		}
		for _, h := range g.Hosts {
			seen[h] = true
		}
		for _, c := range g.Children {
			walk(c)
		}
	}
	walk(name)
	var out []string
	for h := range seen {
		out = append(out, h)
	}
	return sorted(out)
}

func (a ansible) hostvar(host, v string) string {
	var meta struct {
		HostVars map[string]map[string]any `json:"hostvars"`
	}
	_ = json.Unmarshal(a["_meta"], &meta)
	return fmt.Sprint(meta.HostVars[host][v])
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// The groups an inventory may hold come from pkg/kubespray and the KUD layout: the same set
// as when they were written out here.
func TestAllowedGroups(t *testing.T) {
	var got []string
	for g := range allowedGroups {
		got = append(got, g)
	}
	assert.ElementsMatch(t, []string{"all", "ungrouped", "kube_control_plane", "etcd", "kube_node", "k8s_cluster", "calico_rr",
		"kube-master", "kube-node", "k8s-cluster", "ovn-central", "ovn-controller", "virtlet"}, got)
}
