package installsoftware

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// cluster is three simulated hosts with an empty package state and a repository offering
// candidates for the unpinned packages.
type cluster struct {
	sim   *simhost.Cluster
	hosts map[string]*simhost.Host
}

func newCluster(t *testing.T, base int) *cluster {
	t.Helper()
	c := &cluster{sim: simhost.NewCluster(t), hosts: map[string]*simhost.Host{}}
	for i, name := range []string{"master-1", "worker-1", "worker-2"} {
		h := c.sim.Start(name, fmt.Sprintf("127.0.1.%d", base+i))
		h.SetAvailable(map[string]string{"curl": "7.88.1-10+deb12u5", "htop": "3.2.2-2", "tmux": "3.3a-3", "jq": "1.6-2.1"})
		c.hosts[name] = h
	}
	return c
}

var (
	masterItems = []bpav1.SoftwareItem{{Name: "htop"}, {Name: "jq", Version: "1.6-2.1"}}
	workerItems = []bpav1.SoftwareItem{{Name: "curl"}, {Name: "tmux", Version: "3.3a-3"}}
)

func (c *cluster) nodes(t *testing.T, master, worker []bpav1.SoftwareItem) []software.Node {
	var hosts []bpav1.HostStatus
	for name, h := range c.hosts {
		role := "worker"
		if strings.HasPrefix(name, "master") {
			role = "master"
		}
		hosts = append(hosts, bpav1.HostStatus{Name: name, IP: h.IP, Roles: []string{role}})
	}
	nodes, err := software.Nodes(bpav1.SoftwareSpec{MasterSoftware: master, WorkerSoftware: worker}, hosts)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// step runs install-software for one node as the WorkflowTemplate would, with --host as
// the JSON Argo hands over. The port differs per simulated host, so it is passed as a flag.
func step(t *testing.T, c *cluster, n software.Node, port int, extra ...string) (bpav1.HostSoftwareStatus, error) {
	t.Helper()
	host, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out", "result.json")
	fs := pflag.NewFlagSet("install-software", pflag.ContinueOnError)
	o := &options{flags: fs, logf: t.Logf}
	o.ssh.AddFlags(fs)
	fs.StringVar(&o.host, "host", "", "")
	fs.StringVar(&o.output, "output", "", "")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "")
	args := append([]string{"--host=" + string(host), "--output=" + out, "--ssh-key=" + c.sim.ClientKeyPath(),
		"--known-hosts=" + c.sim.KnownHostsPath(), "--ssh-user=root", "--ssh-port=" + strconv.Itoa(port),
		"--insecure-ignore-host-key=false", "--ssh-connect-timeout=3s"}, extra...)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	runErr := o.run(context.Background())
	var res bpav1.HostSoftwareStatus
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("no result written (step error %v): %v", runErr, err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	return res, runErr
}

// stepAll runs every node's step in parallel, as Argo's fan-out does.
func stepAll(t *testing.T, c *cluster, nodes []software.Node) (map[string]bpav1.HostSoftwareStatus, map[string]error) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	results, errs := map[string]bpav1.HostSoftwareStatus{}, map[string]error{}
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			port := 22
			if h := c.hosts[n.Name]; h != nil {
				port = h.Port
			}
			res, err := step(t, c, n, port)
			mu.Lock()
			defer mu.Unlock()
			results[n.Name], errs[n.Name] = res, err
		}()
	}
	wg.Wait()
	return results, errs
}

func tools(calls []simhost.Call) []string {
	var out []string
	for _, c := range calls {
		if len(c.Args) > 0 && c.Tool == "apt-get" {
			out = append(out, c.Tool+" "+c.Args[0])
		} else {
			out = append(out, c.Tool)
		}
	}
	return out
}

func TestInstallUpdateRerun(t *testing.T) {
	c := newCluster(t, 50)
	nodes := c.nodes(t, masterItems, workerItems)

	// 1. Fresh install, with version pins.
	start := time.Now()
	results, errs := stepAll(t, c, nodes)
	t.Logf("fresh install on 3 hosts: %v", time.Since(start))
	for name, err := range errs {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	m := c.hosts["master-1"]
	wantMaster := []simhost.Call{
		{Tool: "dpkg-query", Args: []string{"-W", "-f=" + software.DpkgQueryFormat}},
		{Tool: "apt-get", Args: []string{"update"}},
		{Tool: "apt-cache", Args: []string{"show", "--no-all-versions", "--", "htop", "jq"}},
		{Tool: "apt-get", DebianFrontend: "noninteractive", Args: []string{"install", "-y", "--no-install-recommends", "--allow-downgrades", "htop", "jq=1.6-2.1"}},
		{Tool: "dpkg-query", Args: []string{"-W", "-f=" + software.DpkgQueryFormat}},
	}
	if got := m.Calls(); !reflect.DeepEqual(got, wantMaster) {
		t.Errorf("master-1 calls:\n got %v\nwant %v", got, wantMaster)
	}
	if got := c.hosts["worker-2"].CallsTo("apt-get"); len(got) != 2 || !reflect.DeepEqual(got[1].Args, []string{"install", "-y", "--no-install-recommends", "--allow-downgrades", "curl", "tmux=3.3a-3"}) {
		t.Errorf("worker-2 apt-get calls: %v", got)
	}
	if got := m.Packages(); !reflect.DeepEqual(got, map[string]string{"htop": "3.2.2-2", "jq": "1.6-2.1"}) {
		t.Errorf("master-1 packages %v", got)
	}
	wantRes := bpav1.HostSoftwareStatus{Name: "master-1", IP: m.IP, Phase: "Succeeded", Changed: true, Packages: []bpav1.PackageStatus{
		{Name: "htop", Installed: "3.2.2-2"}, {Name: "jq", Wanted: "1.6-2.1", Installed: "1.6-2.1"}}}
	if !reflect.DeepEqual(results["master-1"], wantRes) {
		t.Errorf("master-1 result\n got %+v\nwant %+v", results["master-1"], wantRes)
	}

	// 2. Rerun: every host is satisfied, so nothing but dpkg-query runs anywhere.
	for _, h := range c.hosts {
		h.ResetCalls()
	}
	start = time.Now()
	results, errs = stepAll(t, c, nodes)
	t.Logf("idempotent rerun on 3 hosts: %v", time.Since(start))
	for name, h := range c.hosts {
		if errs[name] != nil {
			t.Fatalf("%s: %v", name, errs[name])
		}
		if got := tools(h.Calls()); !reflect.DeepEqual(got, []string{"dpkg-query"}) {
			t.Errorf("rerun on %s issued %v", name, got)
		}
		if results[name].Changed || results[name].Phase != "Succeeded" {
			t.Errorf("rerun result on %s: %+v", name, results[name])
		}
	}

	// 3. A version change for the masters: only master-1 runs apt-get.
	for _, h := range c.hosts {
		h.ResetCalls()
	}
	newMaster := []bpav1.SoftwareItem{{Name: "htop"}, {Name: "jq", Version: "1.7.1-2"}}
	results, errs = stepAll(t, c, c.nodes(t, newMaster, workerItems))
	for name, h := range c.hosts {
		if errs[name] != nil {
			t.Fatalf("%s: %v", name, errs[name])
		}
		want := []string{"dpkg-query"}
		if name == "master-1" {
			want = []string{"dpkg-query", "apt-get update", "apt-cache", "apt-get install", "dpkg-query"}
		}
		if got := tools(h.Calls()); !reflect.DeepEqual(got, want) {
			t.Errorf("after the version change, %s issued %v, want %v", name, got, want)
		}
	}
	if got := m.CallsTo("apt-get"); len(got) != 2 || got[1].Args[len(got[1].Args)-1] != "jq=1.7.1-2" {
		t.Errorf("master-1 apt-get calls: %v", got)
	}
	if got := results["master-1"].Packages[1]; got != (bpav1.PackageStatus{Name: "jq", Wanted: "1.7.1-2", Installed: "1.7.1-2"}) {
		t.Errorf("master-1 jq: %+v", got)
	}
}

func TestNewNodeOnlyInstallsThere(t *testing.T) {
	c := newCluster(t, 60)
	nodes := c.nodes(t, masterItems, workerItems)
	var old []software.Node
	for _, n := range nodes {
		if n.Name != "worker-2" {
			old = append(old, n)
		}
	}
	if _, errs := stepAll(t, c, old); errs["master-1"] != nil || errs["worker-1"] != nil {
		t.Fatal(errs)
	}
	for _, h := range c.hosts {
		h.ResetCalls()
	}
	// worker-2 joins the cluster: the next run covers all three, and only worker-2 changes.
	results, errs := stepAll(t, c, nodes)
	for name, h := range c.hosts {
		if errs[name] != nil {
			t.Fatalf("%s: %v", name, errs[name])
		}
		if installed := len(h.CallsTo("apt-get")) > 0; installed != (name == "worker-2") || results[name].Changed != installed {
			t.Errorf("%s: apt-get calls %v, changed %v", name, h.CallsTo("apt-get"), results[name].Changed)
		}
	}
}

// TestUnreachableHost: one host is down; its step fails fast with a result naming it, and
// the others succeed.
func TestUnreachableHost(t *testing.T) {
	c := newCluster(t, 70)
	down := c.hosts["worker-1"]
	down.Stop()
	start := time.Now()
	results, errs := stepAll(t, c, c.nodes(t, masterItems, workerItems))
	t.Logf("3 hosts, one down: %v", time.Since(start))
	if err := errs["worker-1"]; err == nil || !strings.Contains(err.Error(), "worker-1 ("+down.IP+")") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("worker-1: %v", err)
	}
	if r := results["worker-1"]; r.Phase != "Failed" || r.Name != "worker-1" || r.IP != down.IP || !strings.Contains(r.Message, "connecting") {
		t.Errorf("worker-1 result %+v", r)
	}
	for _, name := range []string{"master-1", "worker-2"} {
		if errs[name] != nil || results[name].Phase != "Succeeded" || !results[name].Changed {
			t.Errorf("%s: %v %+v", name, errs[name], results[name])
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("an unreachable host took %v to fail", took)
	}
}

// TestInjectionRejectedBeforeSSH: hostile names and versions fail the step before it
// connects; the host sees no connection at all.
func TestInjectionRejectedBeforeSSH(t *testing.T) {
	c := newCluster(t, 80)
	h := c.hosts["worker-1"]
	connections := func() int { return strings.Count(h.SSHDLog(), "Connection from") }
	before := connections()
	for _, items := range [][]bpav1.SoftwareItem{
		{{Name: "curl; reboot"}},
		{{Name: "curl"}, {Name: "$(id)"}},
		{{Name: "-oAPT::Update::Pre-Invoke::=id"}},
		{{Name: "jq", Version: "1.6 && reboot"}},
		{{Name: "jq", Version: "1.6'; id; '"}},
		{{Name: "jq", Version: "1.6\nid"}},
		{{Name: "jq", State: "purge"}},
	} {
		n := software.Node{Name: "worker-1", IP: h.IP, Roles: []string{"worker"}, Packages: items}
		res, err := step(t, c, n, h.Port)
		if err == nil || !strings.Contains(err.Error(), "invalid software items") {
			t.Errorf("%v: got %v", items, err)
		}
		if res.Phase != "Failed" || res.Name != "worker-1" || res.Message == "" {
			t.Errorf("%v: result %+v", items, res)
		}
	}
	// A hostile IP is refused too, before dialing anything.
	n := software.Node{Name: "worker-1", IP: "127.0.0.1 -oProxyCommand=id", Roles: []string{"worker"}}
	if _, err := step(t, c, n, h.Port); err == nil || !strings.Contains(err.Error(), "is not an IP address") {
		t.Errorf("hostile IP: %v", err)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("commands ran: %v", calls)
	}
	if after := connections(); after != before {
		t.Errorf("the step connected %d times despite invalid input", after-before)
	}
}

func TestAptFailureIsReported(t *testing.T) {
	c := newCluster(t, 90)
	h := c.hosts["master-1"]
	h.SetPackages(map[string]string{"htop": "3.2.2-2"})
	h.Fail("apt-get", "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)")
	n := software.Node{Name: "master-1", IP: h.IP, Roles: []string{"master"}, Packages: masterItems}
	res, err := step(t, c, n, h.Port)
	if err == nil || !strings.Contains(err.Error(), "apt-get update: apt-get exited with status 100: E: Could not get lock") {
		t.Errorf("got %v", err)
	}
	want := []bpav1.PackageStatus{{Name: "htop", Installed: "3.2.2-2"}, {Name: "jq", Wanted: "1.6-2.1"}}
	if res.Phase != "Failed" || !res.Changed || !reflect.DeepEqual(res.Packages, want) || !strings.Contains(res.Message, "Could not get lock") {
		t.Errorf("result %+v", res)
	}
}

// TestDpkgIsBelievedOverAptGet: apt-get exits 0 but leaves a held package alone; the step
// reads dpkg back and fails, naming the package.
func TestDpkgIsBelievedOverAptGet(t *testing.T) {
	c := newCluster(t, 100)
	h := c.hosts["master-1"]
	h.SetPackages(map[string]string{"htop": "3.2.2-2", "jq": "1.5+dfsg-1"})
	h.Hold("jq")
	n := software.Node{Name: "master-1", IP: h.IP, Roles: []string{"master"}, Packages: masterItems}
	res, err := step(t, c, n, h.Port)
	want := "apt-get succeeded but dpkg reports: jq: installed 1.5+dfsg-1, wanted 1.6-2.1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v", err)
	}
	if res.Phase != "Failed" || res.Packages[1].Installed != "1.5+dfsg-1" {
		t.Errorf("result %+v", res)
	}
}

func TestRemoveAbsent(t *testing.T) {
	c := newCluster(t, 110)
	h := c.hosts["worker-1"]
	h.SetPackages(map[string]string{"telnet": "0.17-44", "curl": "7.88.1-10+deb12u5"})
	n := software.Node{Name: "worker-1", IP: h.IP, Roles: []string{"worker"}, Packages: []bpav1.SoftwareItem{{Name: "curl"}, {Name: "telnet", State: bpav1.PackageAbsent}}}
	res, err := step(t, c, n, h.Port)
	if err != nil {
		t.Fatal(err)
	}
	if got := tools(h.Calls()); !reflect.DeepEqual(got, []string{"dpkg-query", "apt-cache", "apt-get remove", "dpkg-query"}) {
		t.Errorf("calls %v", got)
	}
	if _, still := h.Packages()["telnet"]; still || !res.Changed || res.Packages[1] != (bpav1.PackageStatus{Name: "telnet", Wanted: "absent"}) {
		t.Errorf("telnet not removed: %+v", res)
	}
}

// TestUnknownPackageFailsTheHost: a name that passes the syntax check but is no package
// apt knows fails the host before apt-get install or remove runs. apt would read `xz..` as
// a regular expression and install every package it matches (xz-utils here), and skip or
// misread a name it does not know.
func TestUnknownPackageFailsTheHost(t *testing.T) {
	c := newCluster(t, 130)
	h := c.hosts["worker-1"]
	h.SetAvailable(map[string]string{"curl": "7.88.1-10+deb12u5", "xz-utils": "5.4.1-0.2"})
	h.SetPackages(map[string]string{"telnet": "0.17-44"})
	for _, tc := range []struct {
		items   []bpav1.SoftwareItem
		unknown string
	}{
		{[]bpav1.SoftwareItem{{Name: "curl"}, {Name: "xz.."}}, "xz.."},
		{[]bpav1.SoftwareItem{{Name: "curl"}, {Name: "nosuchpkg"}, {Name: "telnet", State: bpav1.PackageAbsent}}, "nosuchpkg"},
	} {
		h.ResetCalls()
		n := software.Node{Name: "worker-1", IP: h.IP, Roles: []string{"worker"}, Packages: tc.items}
		res, err := step(t, c, n, h.Port)
		want := "worker-1 (" + h.IP + "): apt knows no package named " + tc.unknown + " "
		if err == nil || !strings.Contains(err.Error(), want) || res.Phase != "Failed" || !strings.Contains(res.Message, tc.unknown) {
			t.Errorf("%v: got %v, %+v; want %q", tc.items, err, res, want)
		}
		for _, call := range h.CallsTo("apt-get") {
			if call.Args[0] != "update" {
				t.Errorf("%v: apt-get ran despite an unknown name: %v", tc.items, call)
			}
		}
		if got := h.Packages(); !reflect.DeepEqual(got, map[string]string{"telnet": "0.17-44"}) {
			t.Errorf("%v: packages changed: %v", tc.items, got)
		}
	}
}

func TestWrongHostKeyRefused(t *testing.T) {
	c := newCluster(t, 120)
	h := c.hosts["worker-1"]
	other := simhost.NewCluster(t)
	other.Start("x", "127.0.1.123")
	n := software.Node{Name: "worker-1", IP: h.IP, Roles: []string{"worker"}, Packages: workerItems}
	res, err := step(t, c, n, h.Port, "--known-hosts="+other.KnownHostsPath())
	if err == nil || !strings.Contains(err.Error(), "not in known_hosts") || res.Phase != "Failed" {
		t.Errorf("got %v, %+v", err, res)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("commands ran on a host whose key was not verified: %v", calls)
	}
}

func TestCommandFlags(t *testing.T) {
	err := Command().ParseFlags([]string{`--host={"name":"m","ip":"10.0.0.1","roles":["master"],"packages":["jq"]}`,
		"--ssh-key=/etc/bpa/ssh/ssh-privatekey", "--known-hosts=/etc/bpa/ssh/known_hosts", "--ssh-user=root", "--ssh-port=22",
		"--insecure-ignore-host-key=false", "--output=/tmp/bpa/out/result.json"})
	if err != nil {
		t.Fatal(err)
	}
}
