package simhost

import (
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostsAreIsolated starts two hosts and checks that each sees its own admin.conf and
// package state, that the stand-ins record calls, and that the real /etc/kubernetes is
// untouched.
func TestHostsAreIsolated(t *testing.T) {
	c := NewCluster(t)
	start := time.Now()
	a := c.Start("master-1", "127.0.1.11")
	b := c.Start("worker-1", "127.0.1.12")
	t.Logf("started 2 hosts in %v", time.Since(start))
	a.WriteAdminConf([]byte("A\n"))
	b.WriteAdminConf([]byte("B\n"))
	a.SetPackages(map[string]string{"jq": "1.6-2"})
	writeFile(t, a.File("/etc/ssl/etcd/ca.pem"), []byte("etcd CA of A\n"), 0o600)

	for _, tc := range []struct {
		h    *Host
		cmd  string
		want string
	}{
		{a, "cat /etc/kubernetes/admin.conf", "A\n"},
		{b, "cat /etc/kubernetes/admin.conf", "B\n"},
		{a, "cat /etc/ssl/etcd/ca.pem", "etcd CA of A\n"},
		{b, "ls -A /etc/ssl/etcd", ""},
		{a, "dpkg-query -W", "jq\t1.6-2\tii \n"},
		{b, "dpkg-query -W", ""},
		{a, "sudo -n -- apt-get install -y curl=7.88 && dpkg-query -W", "Setting up curl (7.88) ...\ncurl\t7.88\tii \njq\t1.6-2\tii \n"},
	} {
		out, err := tc.h.exec(tc.cmd)
		if err != nil {
			t.Fatalf("%s: %s: %v", tc.h.Name, tc.cmd, err)
		}
		if string(out) != tc.want {
			t.Errorf("%s: %s = %q, want %q", tc.h.Name, tc.cmd, out, tc.want)
		}
	}
	if _, err := os.Stat("/etc/kubernetes/admin.conf"); err == nil {
		data, _ := os.ReadFile("/etc/kubernetes/admin.conf")
		if string(data) == "A\n" || string(data) == "B\n" {
			t.Error("a simulated host's admin.conf leaked onto the real /etc/kubernetes")
		}
	}
	want := []Call{
		{Tool: "dpkg-query", Args: []string{"-W"}},
		{Tool: "sudo", Args: []string{"-n", "--", "apt-get", "install", "-y", "curl=7.88"}},
		{Tool: "apt-get", Args: []string{"install", "-y", "curl=7.88"}},
		{Tool: "dpkg-query", Args: []string{"-W"}},
	}
	if got := a.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls on %s:\n got %v\nwant %v", a.Name, got, want)
	}
	if got := a.Packages(); !reflect.DeepEqual(got, map[string]string{"jq": "1.6-2", "curl": "7.88"}) {
		t.Errorf("packages on %s = %v", a.Name, got)
	}
	if kh, _ := os.ReadFile(c.KnownHostsPath()); strings.Count(string(kh), "\n") != 2 {
		t.Errorf("known_hosts should have a line per host:\n%s", kh)
	}
}

// TestCallLogKeepsHostileArguments shows the log records arguments byte for byte.
func TestCallLogKeepsHostileArguments(t *testing.T) {
	h := Start(t, "h", "127.0.1.13")
	if _, err := h.exec(`DEBIAN_FRONTEND=noninteractive apt-get update 'a	b' 'x
y' "'" ''`); err != nil {
		t.Fatal(err)
	}
	want := []Call{{Tool: "apt-get", DebianFrontend: "noninteractive", Args: []string{"update", "a\tb", "x\ny", "'", ""}}}
	if got := h.Calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestAptGetStandIn covers the stand-in's repository, hold, remove and failure knobs.
func TestAptGetStandIn(t *testing.T) {
	h := Start(t, "h", "127.0.1.14")
	h.SetAvailable(map[string]string{"htop": "3.2.2-2"})
	h.SetPackages(map[string]string{"tmux": "3.3a-3", "vim": "2:9.0"})
	h.Hold("vim")
	if _, err := h.exec("apt-get install -y htop vim=2:9.1 && apt-get remove -y tmux"); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Packages(), map[string]string{"htop": "3.2.2-2", "vim": "2:9.0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("packages = %v, want %v", got, want)
	}
	out, _ := h.exec("dpkg-query -W")
	if !strings.Contains(string(out), "tmux\t3.3a-3\trc \n") {
		t.Errorf("a removed package should show as rc:\n%s", out)
	}
	if _, err := h.exec("apt-get install -y nosuchpkg"); err == nil || !strings.Contains(err.Error(), "Unable to locate package nosuchpkg") {
		t.Errorf("installing an unknown package: %v", err)
	}
	// A name with a '.' that is no package is a regular expression to apt.
	h.SetAvailable(map[string]string{"htop": "3.2.2-2", "xz-utils": "5.4.1-0.2", "xzdec": "5.4.1-0.2"})
	if _, err := h.exec("apt-get install -y xz.."); err != nil {
		t.Fatal(err)
	}
	if got := h.Packages(); got["xz-utils"] != "5.4.1-0.2" || got["xzdec"] != "5.4.1-0.2" || got["xz.."] != "" {
		t.Errorf("xz.. as a regular expression: packages = %v", got)
	}
	h.Fail("apt-get", "E: Could not get lock /var/lib/dpkg/lock-frontend")
	if _, err := h.exec("apt-get update"); err == nil || !strings.Contains(err.Error(), "Could not get lock") {
		t.Errorf("injected failure: %v", err)
	}
}

// TestAptCacheStandIn: apt-cache show knows the available and installed packages, reads an
// unknown name with a '.' as a regular expression (as apt 2.6 does), and exits 100 only when
// it found nothing.
func TestAptCacheStandIn(t *testing.T) {
	h := Start(t, "h", "127.0.1.16")
	h.SetAvailable(map[string]string{"xz-utils": "5.4.1-0.2", "xzdec": "5.4.1-0.2", "htop": "3.2.2-2"})
	h.SetPackages(map[string]string{"telnet": "0.17-44"})
	out, err := h.exec("apt-cache show --no-all-versions -- htop telnet nosuchpkg xz..")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if n, ok := strings.CutPrefix(l, "Package: "); ok {
			names = append(names, n)
		}
	}
	if want := []string{"htop", "telnet", "xz-utils", "xzdec"}; !reflect.DeepEqual(names, want) {
		t.Errorf("records for %v, want %v:\n%s", names, want, out)
	}
	if _, err := h.exec("apt-cache show nosuchpkg"); err == nil || !strings.Contains(err.Error(), "exited with status 100") {
		t.Errorf("no package found: %v", err)
	}
}

// TestStopLeavesNothing checks that Stop kills sshd and its session processes, including a
// session that is still running, and frees the port.
func TestStopLeavesNothing(t *testing.T) {
	h := Start(t, "h", "127.0.1.15")
	// A session that would outlive the listener if only its process group were signalled.
	go func() { _, _ = h.exec("sleep 300") }()
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if pids = h.Processes(); len(pids) >= 3 { // listener, session sshd(s), shell/sleep
			break
		}
	}
	if len(pids) < 3 {
		t.Fatalf("expected the running session under sshd, got pids %v", pids)
	}
	start := time.Now()
	h.Stop()
	t.Logf("Stop took %v for %d processes", time.Since(start), len(pids))
	if h.Alive() {
		t.Error("sshd still running after Stop")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			if _, _, state, ok := readStat(pid); ok && state != "Z" {
				t.Errorf("process %d survived Stop", pid)
			}
		}
	}
	if c, err := net.DialTimeout("tcp", h.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the port still accepts connections after Stop")
	}
	h.Stop() // idempotent
}

// TestStopKillsOrphans: a process a session left behind, whose connection is long closed,
// is killed by Stop too (it lives in the host's PID namespace).
func TestStopKillsOrphans(t *testing.T) {
	h := Start(t, "h", "127.0.1.16")
	if _, err := h.exec("setsid sleep 301 </dev/null >/dev/null 2>&1 &"); err != nil {
		t.Fatal(err)
	}
	var orphan int
	for deadline := time.Now().Add(5 * time.Second); orphan == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, pid := range h.Processes() {
			if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.HasPrefix(string(cmdline), "sleep\x00301") {
				orphan = pid
			}
		}
	}
	if orphan == 0 {
		t.Fatal("the orphaned sleep is not among the host's processes")
	}
	h.Stop()
	if _, _, state, ok := readStat(orphan); ok && state != "Z" {
		t.Errorf("orphan %d survived Stop", orphan)
	}
}

// TestAptGetStandInVersions: a package BPA's repository offers installs only at a version it
// has; a pin below what is installed needs --allow-downgrades; an unpinned install takes the
// highest version offered and never goes down, as apt's does.
func TestAptGetStandInVersions(t *testing.T) {
	h := Start(t, "h", "127.0.1.17")
	h.SetAvailable(map[string]string{"htop": "3.2.2-2"})
	writeFile(t, h.path("bpa-available"), []byte("htop\t3.2.2-3\nhtop\t3.2.2-10\n"), 0o644)
	if _, err := h.exec("apt-get install -y htop=3.2.2-9"); err == nil || !strings.Contains(err.Error(), "Version '3.2.2-9' for 'htop' was not found") {
		t.Errorf("a version no repository has: %v", err)
	}
	if _, err := h.exec("apt-get install -y htop=3.2.2-3"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.exec("apt-get install -y htop=3.2.2-2"); err == nil || !strings.Contains(err.Error(), "without --allow-downgrades") {
		t.Errorf("a downgrade without --allow-downgrades: %v", err)
	}
	if _, err := h.exec("apt-get install -y htop"); err != nil || h.Packages()["htop"] != "3.2.2-10" {
		t.Errorf("unpinned: the highest version offered (3.2.2-10, not the first listed): %v, %v", err, h.Packages())
	}
	if _, err := h.exec("apt-get install -y --allow-downgrades htop=3.2.2-2"); err != nil || h.Packages()["htop"] != "3.2.2-2" {
		t.Errorf("a downgrade with --allow-downgrades: %v, %v", err, h.Packages())
	}
	h.SetPackages(map[string]string{"htop": "3.2.2-20"})
	if out, err := h.exec("apt-get install -y htop"); err != nil || h.Packages()["htop"] != "3.2.2-20" || !strings.Contains(string(out), "already the newest version") {
		t.Errorf("unpinned never downgrades: %s %v, %v", out, err, h.Packages())
	}
}

// The df stand-in is the real df until a test sets the host's free space; then it reports
// that as available on every filesystem asked about, in df -Pk's format, and records the call.
func TestDfStandIn(t *testing.T) {
	h := Start(t, "h", "127.0.1.18")
	out, err := h.exec("df -Pk /")
	if err != nil || !strings.HasPrefix(string(out), "Filesystem") || strings.Contains(string(out), "simhost") {
		t.Fatalf("the real df: %v\n%s", err, out)
	}
	h.SetFreeDisk(3 << 30)
	out, err = h.exec("df -Pk / /var/lib")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || strings.Fields(lines[1])[3] != "3145728" || strings.Fields(lines[2])[5] != "/var/lib" {
		t.Errorf("want 3 GiB free on / and /var/lib:\n%s", out)
	}
	if calls := h.CallsTo("df"); len(calls) != 2 {
		t.Errorf("recorded %v", calls)
	}
	h.SetFreeDisk(-1)
	if out, _ := h.exec("df -Pk /"); strings.Contains(string(out), "simhost") {
		t.Errorf("SetFreeDisk(-1) gives df back: %s", out)
	}
}
