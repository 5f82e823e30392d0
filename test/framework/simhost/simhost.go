// Package simhost simulates a cluster's bare-metal hosts for tests, with a real OpenSSH
// server per host, so the steps' SSH client, authentication, host-key checking and command
// quoting are exercised for real without changing the machine the tests run on.
//
// Each simulated host is
//
//   - /usr/sbin/sshd -D run as the current user (root) on its own loopback address (all of
//     127.0.0.0/8 is loopback on Linux, so hosts get distinct IPs in 127.0.1.0/24) and a free
//     port, with a generated ed25519 host key and a client key shared by the hosts of one
//     Cluster (as a cluster's SSH Secret is); or, started with StartOn, on port 22 of an
//     address on a real node's bridge, in a network namespace of its own that routes
//     nowhere else (Network), where the node's pods reach it as they reach a site's machines;
//   - in its own mount and PID namespaces (unshare), where /etc is an overlay of the
//     machine's (what the host writes there, /etc/etcd.env say, is its own) and per-host
//     directories are bind-mounted on /etc/kubernetes, /etc/ssl/etcd (kubespray's etcd
//     certificates), /var/lib/kubelet/pki (the kubelet's certificates), /var/lib/etcd
//     (kubespray's etcd data dir, 0700) and /usr/local/bin (kubespray's bin_dir), so `cat
//     /etc/kubernetes/admin.conf` on host A returns A's file and the real directories are
//     never touched (they are only created, empty, if missing, to serve as mount points);
//   - with apt source and keyring directories of its own (/etc/apt/sources.list.d,
//     /etc/apt/keyrings), which its stand-in apt-get update reads;
//   - with a trust store of its own: per-host directories on /etc/bpa,
//     /usr/local/share/ca-certificates and /etc/ssl/certs (a copy of the machine's, links
//     and bundle), so the real update-ca-certificates run on a host changes that host's
//     store only. Its hooks directory (/etc/ca-certificates/update.d) is an empty one: the
//     machine's hooks (ca-certificates-java's runs dpkg) would reach outside those mounts;
//   - given a session PATH (sshd's SetEnv) that puts stand-in apt-get, apt-cache, dpkg-query
//     and sudo first. They record every call and keep a per-host package state (see
//     stubs.go); its systemctl asks the test process over a unix socket and acts on the
//     units the test gave the host (Unit, systemd.go). HOME is pointed at an empty
//     directory too, because bash sources ~/.bashrc for SSH commands and a .bashrc that
//     prepends to PATH would otherwise put the real apt-get first. Start checks over SSH that the stand-ins are what the session finds, and
//     fails the test if not.
//
// sshd must be installed (Debian: openssh-server). Tests fail, not skip, when it is not, so a
// CI machine missing it cannot pass silently.
package simhost

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHD is the OpenSSH server binary the harness runs.
const SSHD = "/usr/sbin/sshd"

// Cluster is a set of simulated hosts sharing one client key and one known_hosts file.
type Cluster struct {
	// Port, when set before the first Start, is the SSH port of every host, as on a real
	// site where one CR names one port; each host still has its own IP. Zero picks a free
	// port per host.
	Port int

	t              framework.T
	dir            string
	clientKeyPath  string
	clientSigner   ssh.Signer
	knownHostsPath string

	mu    sync.Mutex
	hosts []*Host
	// sockets is the directory of the hosts' systemctl sockets; socketN counts them.
	sockets string
	socketN int
}

// NewCluster makes an empty cluster with a fresh client key.
func NewCluster(t framework.T) *Cluster {
	t.Helper()
	requireSSHD(t)
	c := &Cluster{t: t, dir: t.TempDir()}
	priv, signer := newKey(t)
	c.clientSigner = signer
	c.clientKeyPath = filepath.Join(c.dir, "id_ed25519")
	writeFile(t, c.clientKeyPath, priv, 0o600)
	c.knownHostsPath = filepath.Join(c.dir, "known_hosts")
	writeFile(t, c.knownHostsPath, nil, 0o644)
	return c
}

// Start starts a standalone simulated host with a client key of its own.
func Start(t framework.T, name, ip string) *Host {
	t.Helper()
	return NewCluster(t).Start(name, ip)
}

// ClientKeyPath is the private key (OpenSSH format) every host of the cluster accepts.
func (c *Cluster) ClientKeyPath() string { return c.clientKeyPath }

// KnownHostsPath is a known_hosts file with a line for every host started so far.
func (c *Cluster) KnownHostsPath() string { return c.knownHostsPath }

// Hosts returns the hosts started so far.
func (c *Cluster) Hosts() []*Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Host(nil), c.hosts...)
}

// Host is one simulated host.
type Host struct {
	Name string
	IP   string
	Port int

	cluster *Cluster
	dir     string
	hostKey ssh.PublicKey
	cmd     *exec.Cmd
	done    chan struct{} // closed when sshd has exited
	stop    sync.Once
	network *Network // nil: on loopback, in the machine's network namespace
	// listeners are Forward's, in the host's network namespace, and the systemctl socket's.
	listeners []net.Listener
	// systemctlSocket is where the test process answers the host's systemctl (Unit).
	systemctlSocket string
	unitsMu         sync.Mutex
	units           map[string]Unit
	pods            []*pod
}

// Start starts a simulated host named name listening on ip (use 127.0.1.x) and a free port.
func (c *Cluster) Start(name, ip string) *Host {
	c.t.Helper()
	if net.ParseIP(ip) == nil || !net.ParseIP(ip).IsLoopback() {
		c.t.Fatalf("simhost: %q is not a loopback address; use 127.0.1.x", ip)
	}
	return c.start(&Host{Name: name, IP: ip})
}

// StartOn starts a simulated host named name in a network namespace of its own, on nw's
// bridge at nw's address, listening on the cluster's Port, or 22 (see Network).
func (c *Cluster) StartOn(name string, nw Network) *Host {
	c.t.Helper()
	if nw.Address == nil || nw.Address.IP.To4() == nil || nw.Bridge == "" {
		c.t.Fatalf("simhost: network %+v: want a bridge and an IPv4 address with its prefix", nw)
	}
	return c.start(&Host{Name: name, IP: nw.Address.IP.String(), network: &nw})
}

// unsafePathChars are what a host's folder may not hold: sshd_config's separators and quotes,
// and the overlay mount's option separators (',' and ':').
const unsafePathChars = " \t\n\"'\\,:"

func (c *Cluster) start(h *Host) *Host {
	t := c.t
	t.Helper()
	h.cluster, h.dir = c, t.TempDir()
	if strings.ContainsAny(h.dir, unsafePathChars) {
		// The test's name made it (a comma in a subtest's name, say): a folder of its own.
		dir, err := os.MkdirTemp("", "simhost-")
		if err != nil {
			t.Fatalf("simhost: %v", err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		h.dir = dir
	}
	name := h.Name
	if strings.ContainsAny(h.dir, unsafePathChars) {
		t.Fatalf("simhost: temp dir %q has characters sshd_config or mount options cannot take", h.dir)
	}
	h.setUp(t)
	var lastErr error
	// A port found free can be taken by another test process before sshd binds it; retry.
	// Not in a namespace of the host's own, where nothing else binds.
	attempts := 5
	if h.network != nil {
		attempts = 1
	}
	for attempt := 0; attempt < attempts; attempt++ {
		if lastErr = h.launch(t); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		h.Stop()
		t.Fatalf("simhost %s: %v", name, lastErr)
	}
	if err := h.checkStubsFirst(); err != nil {
		h.Stop()
		t.Fatalf("simhost %s: %v\nsshd log:\n%s", name, err, h.SSHDLog())
	}
	line := h.KnownHostsLine() + "\n"
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.knownHostsPath, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("simhost: %v", err)
	}
	c.hosts = append(c.hosts, h)
	return h
}

// setUp writes the host's keys, stand-ins, state files and directories.
func (h *Host) setUp(t framework.T) {
	t.Helper()
	priv, signer := newKey(t)
	h.hostKey = signer.PublicKey()
	writeFile(t, h.path("ssh_host_ed25519_key"), priv, 0o600)
	writeFile(t, h.path("authorized_keys"), ssh.MarshalAuthorizedKey(h.cluster.clientSigner.PublicKey()), 0o600)
	for _, d := range []string{"bin", "home", "kubernetes", "etcd-ssl", "bpa", "local-ca-certificates", "ca-hooks", "apt-keyrings", "apt-sources", "apt-preferences", "kubelet-pki",
		"local-bin", "etcd-data", "etc-upper", "etc-work"} {
		if err := os.Mkdir(h.path(d), 0o755); err != nil {
			t.Fatalf("%v", err)
		}
	}
	// kubespray's etcd data dir is etcd's only (roles/etcd/tasks/configure.yml makes it 0700).
	if err := os.Chmod(h.path("etcd-data"), 0o700); err != nil {
		t.Fatalf("%v", err)
	}
	if out, err := exec.Command("cp", "-a", "/etc/ssl/certs", h.path("ssl-certs")).CombinedOutput(); err != nil {
		t.Fatalf("simhost: copying the machine's /etc/ssl/certs: %v: %s", err, out)
	}
	for _, f := range []string{"calls.log", "packages", "available", "bpa-available", "held"} {
		writeFile(t, h.path(f), nil, 0o644)
	}
	lib := h.path("stublib.sh")
	writeFile(t, lib, []byte(strings.ReplaceAll(stubLib, "@DIR@", shQuote(h.dir))), 0o644)
	stub, err := systemctlStub()
	if err != nil {
		t.Fatalf("simhost: building the systemctl stand-in: %v", err)
	}
	h.systemctlSocket = h.cluster.newSystemctlSocket()
	h.serveSystemctl(t)
	socket := strings.NewReplacer("@STUB@", shQuote(stub), "@SOCK@", shQuote(h.systemctlSocket))
	for name, body := range map[string]string{"apt-get": stubAptGet, "apt-cache": stubAptCache, "dpkg-query": stubDpkgQuery, "sudo": stubSudo, "uname": stubUname, "df": stubDf,
		"systemctl": socket.Replace(stubSystemctl), "crictl": socket.Replace(stubCrictl)} {
		writeFile(t, h.path("bin", name), []byte(strings.ReplaceAll(body, "@LIB@", shQuote(lib))), 0o755)
	}
}

// launch picks a port, starts sshd in its own mount namespace and waits until it accepts
// connections. It returns an error (after cleaning up) when sshd exits early, e.g. because
// the port was taken meanwhile.
func (h *Host) launch(t framework.T) error {
	t.Helper()
	port := h.cluster.Port
	switch {
	case port == 0 && h.network != nil:
		port = 22 // the namespace's own: nothing else listens there
	case port == 0:
		var err error
		if port, err = freePort(h.IP); err != nil {
			return err
		}
	}
	h.Port = port
	config := fmt.Sprintf(`# simhost %s
ListenAddress %s
HostKey %s
PidFile %s
AuthorizedKeysFile %s
AuthenticationMethods publickey
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
UseDNS no
PermitUserEnvironment no
# local: what the host listens on, reached through SSH (ssh -L), as an operator reaches
# kubespray's etcd on an etcd host's 127.0.0.1 (sshexec.Client.DialContext).
AllowTcpForwarding local
X11Forwarding no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 50
LogLevel VERBOSE
SetEnv PATH=%s:/usr/sbin:/usr/bin:/sbin:/bin HOME=%s LC_ALL=C
`, h.Name, h.Addr(), h.path("ssh_host_ed25519_key"), h.path("sshd.pid"), h.path("authorized_keys"),
		h.path("bin"), h.path("home"))
	writeFile(t, h.path("sshd_config"), []byte(config), 0o644)

	// /run/sshd is sshd's privilege-separation directory, normally made by its service unit.
	script := "mkdir -p /run/sshd"
	if h.network != nil {
		script = h.network.setUp() + " && " + script
	}
	// /etc first, since the other mounts are in it: an overlay of the machine's, so what the
	// host writes there (/etc/etcd.env, say, and the mount points) is its own.
	script += fmt.Sprintf(" && mount -t overlay overlay -o lowerdir=/etc,upperdir=%s,workdir=%s /etc", h.path("etc-upper"), h.path("etc-work"))
	for dir, at := range hostMounts {
		script += fmt.Sprintf(" && mkdir -p %s && mount --bind %s %s", at, shQuote(h.path(dir)), at)
	}
	script += fmt.Sprintf(" && exec %s -D -e -f %s", SSHD, shQuote(h.path("sshd_config")))
	logFile, err := os.OpenFile(h.path("sshd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	// A PID namespace too, with sshd as its init: a session process orphaned when its
	// connection closes is re-parented to sshd, not to the machine's init, and when sshd dies
	// the kernel kills everything left in the namespace. --kill-child passes unshare's death
	// on to sshd, and Pdeathsig the test process's death on to unshare, so not even a crashed
	// test leaves anything running.
	args := []string{"--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--", "/bin/sh", "-c", script}
	if h.network != nil {
		args = append([]string{"--net"}, args...) // see Network
	}
	cmd := exec.Command("unshare", args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Own process group, so Stop can signal unshare and sshd together.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting sshd: %w", err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	h.stop = sync.Once{}
	go func() { _ = cmd.Wait(); close(h.done) }()
	if h.network != nil {
		if err := h.network.attach(cmd.Process.Pid); err != nil {
			h.stopSSHD()
			return err
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-h.done:
			return fmt.Errorf("sshd exited at start (%v):\n%s", cmd.ProcessState, h.SSHDLog())
		default:
		}
		if c, err := net.DialTimeout("tcp", h.Addr(), 200*time.Millisecond); err == nil {
			c.Close()
			t.Cleanup(h.Stop)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("simhost %s sshd log:\n%s", h.Name, tail(h.SSHDLog(), 4000))
				}
			})
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.stopSSHD()
	return fmt.Errorf("sshd did not accept connections on %s within 10s:\n%s", h.Addr(), h.SSHDLog())
}

// checkStubsFirst proves, over SSH, that the session finds the stand-ins and not the
// machine's own apt-get: a test must never install packages on the machine it runs on.
func (h *Host) checkStubsFirst() error {
	out, err := h.exec("command -v apt-get apt-cache dpkg-query sudo")
	if err != nil {
		return fmt.Errorf("checking the session PATH: %w", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != 4 {
		return fmt.Errorf("session PATH check: unexpected output %q", out)
	}
	for _, l := range lines {
		if filepath.Dir(l) != h.path("bin") {
			return fmt.Errorf("the SSH session runs %s, not the simhost stand-in: refusing to go on", l)
		}
	}
	return nil
}

// exec runs a raw command line as root over SSH, checking the host key. It is for the
// harness' own checks; tests exercise pkg/sshexec instead.
func (h *Host) exec(cmd string) ([]byte, error) {
	client, err := ssh.Dial("tcp", h.Addr(), &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(h.cluster.clientSigner)},
		HostKeyCallback: ssh.FixedHostKey(h.hostKey),
		Timeout:         10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	s, err := client.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var stderr bytes.Buffer
	s.Stderr = &stderr
	out, err := s.Output(cmd)
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// Addr is the host's ip:port.
func (h *Host) Addr() string { return net.JoinHostPort(h.IP, strconv.Itoa(h.Port)) }

// HostKey is the host's public key.
func (h *Host) HostKey() ssh.PublicKey { return h.hostKey }

// KnownHostsLine is the host's known_hosts line ([ip]:port ssh-ed25519 ...).
func (h *Host) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(h.Addr())}, h.hostKey)
}

// ClientKeyPath is the private key the host accepts.
func (h *Host) ClientKeyPath() string { return h.cluster.clientKeyPath }

// KnownHostsPath is the cluster's known_hosts file.
func (h *Host) KnownHostsPath() string { return h.cluster.knownHostsPath }

// NetNS is the file of the running host's network namespace (StartOn), or "" for a host on
// loopback.
func (h *Host) NetNS() string {
	if h.network == nil || h.cmd == nil || h.cmd.Process == nil {
		return ""
	}
	return fmt.Sprintf("/proc/%d/ns/net", h.cmd.Process.Pid)
}

// Dir is the host's state directory.
func (h *Host) Dir() string { return h.dir }

// hostMounts are the per-host directories (under the host's own) and where the host sees them.
var hostMounts = map[string]string{
	"kubernetes": "/etc/kubernetes", "etcd-ssl": "/etc/ssl/etcd", "bpa": "/etc/bpa", "local-ca-certificates": "/usr/local/share/ca-certificates",
	"ssl-certs": "/etc/ssl/certs", "ca-hooks": "/etc/ca-certificates/update.d",
	"apt-keyrings": "/etc/apt/keyrings", "apt-sources": "/etc/apt/sources.list.d", "apt-preferences": "/etc/apt/preferences.d",
	"kubelet-pki": "/var/lib/kubelet/pki",
	// kubespray's etcd_data_dir, and its bin_dir, where its etcd role installs etcdctl and
	// etcdutl. The machine's /usr/local/bin is not on a host's session PATH, and no
	// stand-in reads it: the hosts need none of its programs.
	"etcd-data": "/var/lib/etcd", "local-bin": "/usr/local/bin",
}

// File is where the test reads the file the host sees at path, under one of its own
// directories (hostMounts: /etc/kubernetes, /etc/ssl/etcd, /etc/bpa,
// /usr/local/share/ca-certificates, /etc/ssl/certs, /etc/apt/keyrings,
// /etc/apt/sources.list.d, /etc/apt/preferences.d, /var/lib/kubelet/pki, /var/lib/etcd,
// /usr/local/bin), or elsewhere in /etc, where what the host wrote is its own (an overlay
// of the machine's /etc: a file the host has not written is the machine's).
func (h *Host) File(path string) string {
	p, err := h.OwnPath(path)
	if err != nil {
		h.cluster.t.Fatalf("simhost: %v", err)
	}
	return p
}

// OwnPath is File, with an error for a path outside the host's own directories.
func (h *Host) OwnPath(path string) (string, error) {
	best, at := "", ""
	path = filepath.Clean(path)
	in := func(mount string) bool { return path == mount || strings.HasPrefix(path, mount+"/") }
	for dir, mount := range hostMounts {
		if in(mount) && len(mount) > len(at) {
			best, at = dir, mount
		}
	}
	if best == "" && in("/etc") && path != "/etc" {
		best, at = "etc-upper", "/etc"
	}
	if best == "" {
		return "", fmt.Errorf("%s is not in one of the host's own directories", path)
	}
	return h.path(best, strings.TrimPrefix(path, at)), nil
}

// KubernetesDir is the directory the host sees as /etc/kubernetes.
func (h *Host) KubernetesDir() string { return h.path("kubernetes") }

func (h *Host) path(elem ...string) string { return filepath.Join(append([]string{h.dir}, elem...)...) }

// SSHDLog is what sshd logged (it runs with -e).
func (h *Host) SSHDLog() string {
	b, _ := os.ReadFile(h.path("sshd.log"))
	return string(b)
}

// Stop removes the host's veth, if it has one, then stops sshd and every process it
// started, and waits for them (its network namespace ends with them). It is also registered
// with t.Cleanup; calling it again does nothing.
func (h *Host) Stop() {
	h.unitsMu.Lock()
	listeners := h.listeners
	h.unitsMu.Unlock()
	for _, l := range listeners {
		_ = l.Close()
	}
	if h.network != nil {
		if err := h.network.detach(); err != nil {
			h.cluster.t.Errorf("simhost %s: %v", h.Name, err)
		}
	}
	h.stopSSHD()
}

func (h *Host) stopSSHD() {
	if h.cmd == nil || h.cmd.Process == nil {
		return
	}
	h.stop.Do(func() { killTree(h.cmd.Process.Pid, h.done) })
}

// Alive reports whether sshd is still running.
func (h *Host) Alive() bool {
	select {
	case <-h.done:
		return false
	default:
		return true
	}
}

// Call is one recorded invocation of a stand-in.
type Call struct {
	Tool           string   // apt-get, apt-cache, dpkg-query, sudo, df, systemctl or crictl
	Args           []string // argv[1:], exactly as received
	DebianFrontend string   // $DEBIAN_FRONTEND in the stand-in's environment
}

// String renders the call for test messages.
func (c Call) String() string {
	s := c.Tool
	if c.DebianFrontend != "" {
		s = "DEBIAN_FRONTEND=" + c.DebianFrontend + " " + s
	}
	for _, a := range c.Args {
		s += " " + strconv.Quote(a)
	}
	return s
}

// Calls returns the stand-ins' invocations so far, oldest first.
func (h *Host) Calls() []Call {
	data, err := os.ReadFile(h.path("calls.log"))
	if err != nil {
		h.cluster.t.Fatalf("simhost %s: %v", h.Name, err)
	}
	var calls []Call
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 2 {
			h.cluster.t.Fatalf("simhost %s: malformed call log line %q", h.Name, line)
		}
		c := Call{Tool: f[0], DebianFrontend: unhex(h.cluster.t, f[1]), Args: []string{}}
		for _, a := range f[2:] {
			c.Args = append(c.Args, unhex(h.cluster.t, a))
		}
		calls = append(calls, c)
	}
	return calls
}

// CallsTo returns the recorded invocations of one tool.
func (h *Host) CallsTo(tool string) []Call {
	var out []Call
	for _, c := range h.Calls() {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls empties the call log.
func (h *Host) ResetCalls() { writeFile(h.cluster.t, h.path("calls.log"), nil, 0o644) }

// SetMachine makes the host answer `uname -m` with machine (aarch64, say), as a host of that
// architecture would.
func (h *Host) SetMachine(machine string) {
	writeFile(h.cluster.t, h.path("machine"), []byte(machine+"\n"), 0o644)
}

// SetFreeDisk makes df report free bytes available on every filesystem of the host (rounded
// down to KiB), as a host with a full disk would; a negative value gives df back its real
// answer.
func (h *Host) SetFreeDisk(free int64) {
	p := h.path("free-kb")
	if free < 0 {
		_ = os.Remove(p)
		return
	}
	writeFile(h.cluster.t, p, []byte(strconv.FormatInt(free/1024, 10)+"\n"), 0o644)
}

// SetPackages replaces the installed packages (name → version).
func (h *Host) SetPackages(pkgs map[string]string) {
	var b strings.Builder
	for _, n := range sortedKeys(pkgs) {
		fmt.Fprintf(&b, "%s\t%s\tii\n", n, pkgs[n])
	}
	writeFile(h.cluster.t, h.path("packages"), []byte(b.String()), 0o644)
}

// Packages returns the installed packages (name → version); removed ones are left out.
func (h *Host) Packages() map[string]string {
	data, err := os.ReadFile(h.path("packages"))
	if err != nil {
		h.cluster.t.Fatalf("simhost %s: %v", h.Name, err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Split(line, "\t"); len(f) == 3 && f[2] == "ii" {
			out[f[0]] = f[1]
		}
	}
	return out
}

// SetAvailable sets the repository's candidate versions (name → version), which apt-get
// installs when no version is pinned. A package neither available nor installed makes
// `apt-get install` fail with "Unable to locate package".
func (h *Host) SetAvailable(pkgs map[string]string) {
	var b strings.Builder
	for _, n := range sortedKeys(pkgs) {
		fmt.Fprintf(&b, "%s\t%s\n", n, pkgs[n])
	}
	writeFile(h.cluster.t, h.path("available"), []byte(b.String()), 0o644)
}

// Hold makes apt-get leave the packages unchanged while still exiting 0, so a test can show
// that a step trusts dpkg's answer after installing, not apt-get's exit code.
func (h *Host) Hold(pkgs ...string) {
	writeFile(h.cluster.t, h.path("held"), []byte(strings.Join(pkgs, "\n")+"\n"), 0o644)
}

// Fail makes every later call of tool (apt-get, dpkg-query) fail with message on stderr;
// an empty message clears it.
func (h *Host) Fail(tool, message string) {
	p := h.path("fail." + tool)
	if message == "" {
		_ = os.Remove(p)
		return
	}
	writeFile(h.cluster.t, p, []byte(message+"\n"), 0o644)
}

// WriteAdminConf puts data at /etc/kubernetes/admin.conf as this host's sessions see it.
func (h *Host) WriteAdminConf(data []byte) {
	writeFile(h.cluster.t, h.path("kubernetes", "admin.conf"), data, 0o600)
}

// FakeAdminConf is a kubeadm-style admin.conf pointing at server, with made-up credentials.
// The CA and client certificate are random bytes: the file is for reading and rewriting,
// not for connecting.
func FakeAdminConf(server string) []byte {
	junk := func() string {
		b := make([]byte, 48)
		_, _ = rand.Read(b)
		return fmt.Sprintf("%x", b)
	}
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: %s
    server: %s
  name: cluster.local
contexts:
- context:
    cluster: cluster.local
    user: kubernetes-admin
  name: kubernetes-admin@cluster.local
current-context: kubernetes-admin@cluster.local
preferences: {}
users:
- name: kubernetes-admin
  user:
    client-certificate-data: %s
    client-key-data: %s
`, junk(), server, junk(), junk()))
}

// requireSSHD fails the test when OpenSSH's server is missing: skipping would let a CI
// machine without it report green for tests that never ran.
func requireSSHD(t framework.T) {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		t.Fatalf("simhost needs OpenSSH's server at %s (Debian: apt-get install -y openssh-server): %v", SSHD, err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("simhost needs root: it runs sshd for root logins and unshare --mount/--pid")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatalf("simhost needs unshare (util-linux): %v", err)
	}
}

func newKey(t framework.T) (privPEM []byte, signer ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("%v", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatalf("%v", err)
	}
	signer, err = ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pem.EncodeToMemory(block), signer
}

func freePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// killTree stops root and all its descendants. sshd puts each session in a session (and
// process group) of its own, so signalling root's process group is not enough: the
// descendants are collected from /proc first and signalled one by one. (The PID namespace
// would take them down with sshd anyway; this also waits until they are gone.)
func killTree(root int, done <-chan struct{}) {
	procs := descendants(root)
	signalAll := func(sig syscall.Signal) {
		_ = syscall.Kill(-root, sig)
		for _, p := range procs {
			if p.alive() {
				_ = syscall.Kill(p.pid, sig)
			}
		}
	}
	signalAll(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
	signalAll(syscall.SIGKILL)
	<-done
	// Children are reaped by init, not by us; wait until they are gone from /proc.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		alive := false
		for _, p := range procs {
			if p.pid != root && p.alive() {
				alive = true
			}
		}
		if !alive {
			return
		}
	}
}

// proc identifies a process by pid and start time, so a recycled pid is never signalled.
type proc struct {
	pid   int
	start string
}

func (p proc) alive() bool {
	_, start, state, ok := readStat(p.pid)
	return ok && start == p.start && state != "Z"
}

// descendants returns root and every process below it.
func descendants(root int) []proc {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]proc{}
	var rootProc *proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, start, _, ok := readStat(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], proc{pid, start})
		if pid == root {
			rootProc = &proc{pid, start}
		}
	}
	if rootProc == nil {
		return nil
	}
	out := []proc{*rootProc}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i].pid]...)
	}
	return out
}

// readStat returns a process's parent, start time and state from /proc/PID/stat.
func readStat(pid int) (ppid int, start, state string, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", "", false
	}
	// The command name is in parentheses and may contain anything, so split after the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", "", false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, "", "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[19], f[0], true // fields 3 (state), 4 (ppid) and 22 (starttime) of proc(5)
}

// Processes lists the pids of sshd and everything it started (for tests of the harness).
func (h *Host) Processes() []int {
	if h.cmd == nil || h.cmd.Process == nil {
		return nil
	}
	var pids []int
	for _, p := range descendants(h.cmd.Process.Pid) {
		if p.alive() {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

func writeFile(t framework.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatalf("simhost: %v", err)
	}
	// WriteFile keeps the mode of an existing file; sshd insists on 0600 host keys.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatalf("simhost: %v", err)
	}
}

func unhex(t framework.T, s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("simhost: malformed call log field %q: %v", s, err)
	}
	return string(b)
}

// shQuote quotes a path for the harness' own sh scripts.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
