package simhost

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost/systemctl"
)

// Unit is a systemd unit of a simulated host, as its systemctl stand-in acts on it. There is
// no systemd on a simulated host: the stand-in (systemctl/stub, first on the session PATH)
// passes its arguments over a unix socket of the host's to the test process, which answers
// as systemctl does and calls these.
type Unit struct {
	// Loaded reports whether the host has the unit now; one it has not is "not loaded".
	Loaded func() bool
	// Active reports whether it runs.
	Active func() bool
	// Start and Stop start and stop it, and return when it has; Start's error fails the job.
	Start func(ctx context.Context) error
	Stop  func() error
}

// unitTimeout bounds one start or stop, as systemd's default TimeoutStartSec (90 s) does.
const unitTimeout = 90 * time.Second

// AddUnit gives the host the unit name (without ".service").
func (h *Host) AddUnit(name string, u Unit) {
	h.unitsMu.Lock()
	defer h.unitsMu.Unlock()
	if h.units == nil {
		h.units = map[string]Unit{}
	}
	h.units[name] = u
}

// serveSystemctl answers the host's systemctl stand-in on its socket until the host stops.
func (h *Host) serveSystemctl(t framework.T) {
	t.Helper()
	l, err := net.Listen("unix", h.systemctlSocket)
	if err != nil {
		t.Fatalf("simhost %s: systemctl socket: %v", h.Name, err)
	}
	// Any user of the host may run systemctl; the server tells them apart (SO_PEERCRED).
	if err := os.Chmod(h.systemctlSocket, 0o666); err != nil {
		t.Fatalf("simhost %s: %v", h.Name, err)
	}
	h.listeners = append(h.listeners, l)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go h.answerSystemctl(c.(*net.UnixConn))
		}
	}()
}

func (h *Host) answerSystemctl(c *net.UnixConn) {
	defer c.Close()
	var req systemctl.Request
	if err := json.NewDecoder(c).Decode(&req); err != nil {
		return
	}
	uid := -1
	if raw, err := c.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				uid = int(cred.Uid)
			}
		})
	}
	answer := h.systemctl
	if req.Tool == "crictl" {
		answer = h.crictl
	}
	_ = json.NewEncoder(c).Encode(answer(uid, req.Args))
}

// systemctl answers `systemctl args...` run by uid as systemd 252 (Debian 12) does, for the
// verbs start, stop, restart and is-active on one unit, "name" or "name.service". Anything
// else fails: an unknown verb as systemctl's, an option or more units as not simulated.
func (h *Host) systemctl(uid int, args []string) systemctl.Answer {
	fail := func(code int, format string, a ...any) systemctl.Answer {
		return systemctl.Answer{Stderr: fmt.Sprintf(format, a...) + "\n", Code: code}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			return fail(1, "systemctl (simhost): option %s is not simulated", a)
		}
	}
	if len(args) == 0 {
		return fail(1, "systemctl (simhost): listing units is not simulated")
	}
	verb := args[0]
	switch verb {
	case "start", "stop", "restart", "is-active":
	default:
		return fail(1, "Unknown command verb '%s'.", verb)
	}
	if len(args) != 2 {
		return fail(1, "systemctl (simhost): %s of %d units is not simulated; give one", verb, len(args)-1)
	}
	name := strings.TrimSuffix(args[1], ".service")
	service := name + ".service"
	h.unitsMu.Lock()
	u, ok := h.units[name]
	h.unitsMu.Unlock()
	loaded := ok && u.Loaded()
	if verb == "is-active" {
		if loaded && u.Active() {
			return systemctl.Answer{Stdout: "active\n"}
		}
		return systemctl.Answer{Stdout: "inactive\n", Code: 3}
	}
	if uid != 0 {
		return fail(1, "Failed to %s %s: Interactive authentication required.\nSee system logs and 'systemctl status %s' for details.", verb, service, service)
	}
	switch {
	case !loaded && verb == "stop":
		return fail(5, "Failed to stop %s: Unit %s not loaded.", service, service)
	case !loaded:
		return fail(5, "Failed to %s %s: Unit %s not found.", verb, service, service)
	}
	ctx, cancel := context.WithTimeout(context.Background(), unitTimeout)
	defer cancel()
	var err error
	if verb != "start" {
		err = u.Stop()
	}
	if err == nil && verb != "stop" {
		err = u.Start(ctx)
	}
	if err != nil {
		return fail(1, "Job for %s failed because the control process exited with error code.\nSee \"systemctl status %s\" and \"journalctl -xeu %s\" for details.\n(simhost: %v)", service, service, service, err)
	}
	return systemctl.Answer{}
}

// systemctlStub builds the stand-in once per process (framework.Build).
var (
	stubOnce sync.Once
	stubPath string
	stubErr  error
)

func systemctlStub() (string, error) {
	stubOnce.Do(func() {
		root, err := rig.RepoRoot()
		if err != nil {
			stubErr = err
			return
		}
		stubPath, stubErr = framework.Build(root, "./test/framework/simhost/systemctl/stub", "simhost-systemctl")
	})
	return stubPath, stubErr
}

// socketDir is a short directory for the cluster's systemctl sockets: a test's temp dir
// can be too long a path for a unix socket (108 bytes).
func (c *Cluster) socketDir() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sockets == "" {
		dir, err := os.MkdirTemp("/tmp", "bpa-sd-")
		if err != nil {
			c.t.Fatalf("simhost: %v", err)
		}
		c.t.Cleanup(func() { _ = os.RemoveAll(dir) })
		c.sockets = dir
	}
	return c.sockets
}

// newSystemctlSocket names the next host's socket.
func (c *Cluster) newSystemctlSocket() string {
	dir := c.socketDir()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.socketN++
	return filepath.Join(dir, fmt.Sprintf("%d.sock", c.socketN))
}
