package simhost

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestSystemctl: a host's systemctl acts on the units the test gave it (Unit) as systemd's
// does, changes them for root only, and fails as systemctl does for a unit the host has not (or no
// longer has), for an unknown verb, and for what it does not simulate; each call is
// recorded. The host's /etc is its own: a file it writes there is not the machine's.
func TestSystemctl(t *testing.T) {
	h := NewCluster(t).Start("etcd-1", "127.0.1.21")
	var mu sync.Mutex
	loaded, active, failStart := true, true, false
	h.AddUnit("etcd", Unit{
		Loaded: func() bool { mu.Lock(); defer mu.Unlock(); return loaded },
		Active: func() bool { mu.Lock(); defer mu.Unlock(); return active },
		Start: func(context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if failStart {
				return errors.New("no data dir")
			}
			active = true
			return nil
		},
		Stop: func() error { mu.Lock(); defer mu.Unlock(); active = false; return nil },
	})
	run := func(cmd string) (string, int) {
		out, err := h.exec(cmd + "; echo \" rc=$?\"")
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		s := string(out)
		i := strings.LastIndex(s, " rc=")
		code := 0
		for _, r := range strings.TrimSpace(s[i+4:]) {
			code = code*10 + int(r-'0')
		}
		return s[:i], code
	}
	for _, c := range []struct {
		cmd, want string
		code      int
	}{
		{"systemctl is-active etcd", "active\n", 0},
		{"systemctl stop etcd.service", "", 0},
		{"systemctl is-active etcd", "inactive\n", 3},
		{"sudo -n systemctl start etcd", "", 0},
		{"systemctl is-active etcd", "active\n", 0},
		{"systemctl stop kubelet 2>&1", "Failed to stop kubelet.service: Unit kubelet.service not loaded.\n", 5},
		{"systemctl start kubelet 2>&1", "Failed to start kubelet.service: Unit kubelet.service not found.\n", 5},
		{"systemctl is-active kubelet", "inactive\n", 3},
		{"systemctl enable etcd 2>&1", "Unknown command verb 'enable'.\n", 1},
		{"systemctl -q is-active etcd 2>&1", "systemctl (simhost): option -q is not simulated\n", 1},
		{"systemctl stop etcd kubelet 2>&1", "systemctl (simhost): stop of 2 units is not simulated; give one\n", 1},
		{"echo ETCD_NAME=a > /etc/etcd.env && sed -i 's/=a/=b/' /etc/etcd.env && cat /etc/etcd.env", "ETCD_NAME=b\n", 0},
	} {
		out, code := run(c.cmd)
		if code != c.code || !strings.HasPrefix(out, c.want) {
			t.Errorf("%s: %q, exit %d; want %q, exit %d", c.cmd, out, code, c.want, c.code)
		}
	}
	if data, err := os.ReadFile(h.File("/etc/etcd.env")); err != nil || string(data) != "ETCD_NAME=b\n" {
		t.Errorf("the host's /etc/etcd.env, read from the test: %q, %v", data, err)
	}
	if _, err := os.Stat("/etc/etcd.env"); !os.IsNotExist(err) {
		t.Errorf("the machine's /etc/etcd.env: %v; want none, the host's /etc is its own", err)
	}

	// A user other than root (the server asks the kernel who connected): the hosts' stand-ins
	// are in folders only root reaches, so this is asked of the server directly.
	if a := h.systemctl(1000, []string{"stop", "etcd"}); a.Code != 1 || !strings.HasPrefix(a.Stderr, "Failed to stop etcd.service: Interactive authentication required.") {
		t.Errorf("systemctl stop etcd as uid 1000: %+v", a)
	}
	if a := h.systemctl(1000, []string{"is-active", "etcd"}); a.Code != 0 || a.Stdout != "active\n" {
		t.Errorf("systemctl is-active etcd as uid 1000: %+v; anyone may ask", a)
	}

	mu.Lock()
	failStart = true
	mu.Unlock()
	if out, code := run("systemctl restart etcd 2>&1"); code != 1 || !strings.Contains(out, "Job for etcd.service failed") || !strings.Contains(out, "no data dir") {
		t.Errorf("a start that fails: %q, exit %d", out, code)
	}
	mu.Lock()
	loaded = false
	mu.Unlock()
	if out, code := run("systemctl stop etcd 2>&1"); code != 5 || out != "Failed to stop etcd.service: Unit etcd.service not loaded.\n" {
		t.Errorf("a unit no longer loaded: %q, exit %d", out, code)
	}
	var verbs []string
	for _, c := range h.CallsTo("systemctl") {
		verbs = append(verbs, strings.Join(c.Args, " "))
	}
	if len(verbs) != 13 || verbs[0] != "is-active etcd" || verbs[1] != "stop etcd.service" {
		t.Errorf("recorded systemctl calls: %q", verbs)
	}
}
