package sshexec

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

func config(h *simhost.Host) Config {
	return Config{User: "root", Port: h.Port, KeyFile: h.ClientKeyPath(), KnownHostsFile: h.KnownHostsPath(), ConnectTimeout: 5 * time.Second}
}

func dial(t *testing.T, h *simhost.Host, cfg Config) *Client {
	t.Helper()
	c, err := Dial(context.Background(), h.IP, cfg)
	if err != nil {
		t.Fatalf("Dial %s: %v", h.Addr(), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRunDeliversArgumentsVerbatim sends the hostile arguments through a real sshd and the
// remote login shell, and checks both what printf received and what the apt-get stand-in
// recorded.
func TestRunDeliversArgumentsVerbatim(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.21")
	c := dial(t, h, config(h))
	ctx := context.Background()

	// Canaries: each argument would create its file if a shell ever interpreted it.
	dir := t.TempDir()
	canaries := []string{filepath.Join(dir, "redirect"), filepath.Join(dir, "subst"), filepath.Join(dir, "semicolon")}
	args := append(append([]string(nil), hostile...),
		"> "+canaries[0], "$(touch "+canaries[1]+")", "x; touch "+canaries[2])

	stdout, stderr, code, err := c.Run(ctx, append([]string{"printf", `%s\0`}, args...))
	if err != nil || code != 0 {
		t.Fatalf("Run: code %d, err %v, stderr %s", code, err, stderr)
	}
	got := strings.Split(string(stdout), "\x00")
	if got = got[:len(got)-1]; !reflect.DeepEqual(got, args) {
		t.Errorf("printf received %q\nwant %q", got, args)
	}

	if _, _, code, err := c.Run(ctx, append([]string{"apt-get", "update"}, args...)); err != nil || code != 0 {
		t.Fatalf("apt-get stand-in: code %d, err %v", code, err)
	}
	calls := h.Calls()
	if len(calls) != 1 || !reflect.DeepEqual(calls[0].Args, append([]string{"update"}, args...)) {
		t.Errorf("apt-get stand-in recorded %v", calls)
	}
	for _, c := range canaries {
		if _, err := os.Stat(c); err == nil {
			t.Errorf("%s exists: an argument was interpreted by the remote shell", c)
		}
	}
}

func TestRunExitCodeAndStderr(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.22")
	c := dial(t, h, config(h))
	stdout, stderr, code, err := c.Run(context.Background(), []string{"sh", "-c", "echo out; echo err >&2; exit 3"})
	if err != nil || code != 3 || string(stdout) != "out\n" || string(stderr) != "err\n" {
		t.Errorf("got stdout %q stderr %q code %d err %v", stdout, stderr, code, err)
	}
	_, err = c.Output(context.Background(), []string{"sh", "-c", "echo 'E: broken' >&2; exit 100"})
	if ee, ok := err.(*ExitError); !ok || ee.Code != 100 || ee.Stderr != "E: broken" {
		t.Errorf("Output error = %#v", err)
	}
}

func TestReadFile(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.23")
	conf := simhost.FakeAdminConf("https://127.0.0.1:6443")
	h.WriteAdminConf(conf)
	c := dial(t, h, config(h))
	got, err := c.ReadFile(context.Background(), "/etc/kubernetes/admin.conf")
	if err != nil || string(got) != string(conf) {
		t.Fatalf("ReadFile = %d bytes, %v", len(got), err)
	}
	if _, err := c.ReadFile(context.Background(), "/etc/kubernetes/nope.conf"); err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Errorf("reading a missing file: %v", err)
	}
}

// TestSudoForNonRoot logs in as root (the simulated host has no other user) but builds the
// command as a non-root user would, to show the sudo stand-in receives `-n --` and the
// quoted command intact.
func TestSudoForNonRoot(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.24")
	h.WriteAdminConf([]byte("conf\n"))
	c := dial(t, h, config(h))
	c.user = "ubuntu"
	got, err := c.ReadFile(context.Background(), "/etc/kubernetes/admin.conf")
	if err != nil || string(got) != "conf\n" {
		t.Fatalf("ReadFile via sudo = %q, %v", got, err)
	}
	want := []simhost.Call{{Tool: "sudo", Args: []string{"-n", "--", "cat", "--", "/etc/kubernetes/admin.conf"}}}
	if calls := h.Calls(); !reflect.DeepEqual(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
}

func TestWrongHostKeyIsRefused(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.25")
	other := otherKey(t)
	dir := t.TempDir()

	mismatch := filepath.Join(dir, "mismatch")
	writeKnownHosts(t, mismatch, knownhosts.Line([]string{knownhosts.Normalize(h.Addr())}, other))
	cfg := config(h)
	cfg.KnownHostsFile = mismatch
	_, err := Dial(context.Background(), h.IP, cfg)
	if err == nil || !strings.Contains(err.Error(), "host key MISMATCH") {
		t.Errorf("a host presenting another key must be refused, got %v", err)
	}

	unknown := filepath.Join(dir, "unknown")
	writeKnownHosts(t, unknown, knownhosts.Line([]string{"[127.0.1.99]:22"}, h.HostKey()))
	cfg.KnownHostsFile = unknown
	_, err = Dial(context.Background(), h.IP, cfg)
	if err == nil || !strings.Contains(err.Error(), "not in known_hosts") {
		t.Errorf("a host missing from known_hosts must be refused, got %v", err)
	}

	// The host key is right but for port 22, not the port the host listens on: OpenSSH
	// records non-22 ports separately, and so must we.
	wrongPort := filepath.Join(dir, "wrongport")
	writeKnownHosts(t, wrongPort, knownhosts.Line([]string{h.IP}, h.HostKey()))
	cfg.KnownHostsFile = wrongPort
	if _, err = Dial(context.Background(), h.IP, cfg); err == nil {
		t.Error("a known_hosts entry for another port must not match")
	}

	cfg.KnownHostsFile = ""
	if _, err = Dial(context.Background(), h.IP, cfg); err == nil || !strings.Contains(err.Error(), "no known_hosts") {
		t.Errorf("no known_hosts and not insecure must be refused, got %v", err)
	}
	if calls := h.Calls(); len(calls) != 0 {
		t.Errorf("commands ran on a host whose key was refused: %v", calls)
	}
}

func TestInsecureIgnoreHostKeyWarns(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.26")
	var mu sync.Mutex
	var logged []string
	cfg := config(h)
	cfg.KnownHostsFile = ""
	cfg.InsecureIgnoreHostKey = true
	cfg.Logf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	c := dial(t, h, cfg)
	if _, err := c.Output(context.Background(), []string{"true"}); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(logged, "\n")
	if !strings.Contains(all, "WARNING: NOT checking the SSH host key of "+h.Addr()) || !strings.Contains(all, ssh.FingerprintSHA256(h.HostKey())) {
		t.Errorf("expected a loud warning naming the host and the key accepted, got:\n%s", all)
	}
}

func TestWrongClientKeyIsRejected(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.27")
	cfg := config(h)
	cfg.KeyFile = filepath.Join(t.TempDir(), "key")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	if err := os.WriteFile(cfg.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), h.IP, cfg); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("an unknown client key must be rejected, got %v", err)
	}
}

func TestUnreachableHostFailsFast(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.28")
	key, kh := h.ClientKeyPath(), h.KnownHostsPath()

	// Nothing listens: connection refused at once.
	closed := Config{Port: freePort(t, "127.0.1.29"), KeyFile: key, KnownHostsFile: kh, ConnectTimeout: 2 * time.Second}
	start := time.Now()
	_, err := Dial(context.Background(), "127.0.1.29", closed)
	if err == nil || time.Since(start) > time.Second {
		t.Errorf("closed port: err %v after %v", err, time.Since(start))
	}

	// Something accepts TCP but never speaks SSH: the handshake must time out.
	l, err := net.Listen("tcp", "127.0.1.29:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	silent := closed
	silent.Port = l.Addr().(*net.TCPAddr).Port
	silent.ConnectTimeout = 500 * time.Millisecond
	start = time.Now()
	_, err = Dial(context.Background(), "127.0.1.29", silent)
	if took := time.Since(start); err == nil || took > 2*time.Second {
		t.Errorf("silent host: err %v after %v", err, took)
	}
	t.Logf("silent host failed after %v: %v", time.Since(start), err)

	// The context ends the handshake too.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	silent.ConnectTimeout = time.Minute
	start = time.Now()
	if _, err = Dial(ctx, "127.0.1.29", silent); err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("cancelled dial: err %v after %v", err, time.Since(start))
	}
}

func TestRunHonoursContext(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.30")
	c := dial(t, h, config(h))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, _, err := c.Run(ctx, []string{"sleep", "30"})
	if err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("Run past its context: err %v after %v", err, time.Since(start))
	}
}

func TestLoadSignerErrorsNeverShowTheKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	secret := "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END OPENSSH PRIVATE KEY-----\n"
	if err := os.WriteFile(p, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSigner(p)
	if err == nil || strings.Contains(err.Error(), "c2VjcmV0") {
		t.Errorf("error must name the file, not its content: %v", err)
	}
}

func TestKnownAlgorithmsFollowKnownHosts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "known_hosts")
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, err := ssh.NewPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaLine := knownhosts.Line([]string{"[10.0.0.1]:2222"}, rsaPub)
	writeKnownHosts(t, p, rsaLine+"\n"+knownhosts.Line([]string{"[10.0.0.1]:2222"}, otherKey(t)))
	cb, err := knownhosts.New(p)
	if err != nil {
		t.Fatal(err)
	}
	got := knownAlgorithms(cb, "10.0.0.1:2222")
	want := []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA, ssh.KeyAlgoED25519}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := knownAlgorithms(cb, "10.0.0.2:22"); got != nil {
		t.Errorf("an unknown host should leave the algorithms to the defaults, got %v", got)
	}
}

func otherKey(t *testing.T) ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeKnownHosts(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T, ip string) int {
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// stallingServer is an SSH server (x/crypto/ssh, host key in the returned known_hosts) that
// stalls at one point and closes reached when a client gets there:
//
//   - "handshake": accepts TCP and never speaks SSH;
//   - "auth": completes the key exchange and never answers the public key;
//   - "open": authenticates and never answers a session's channel open;
//   - "exec": opens the channel and never replies to the exec request;
//   - "output": replies to exec and then sends nothing, neither output nor exit status.
func stallingServer(t *testing.T, ip, stallAt string) (Config, <-chan struct{}) {
	t.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	arrive := func() { once.Do(func() { close(reached) }) }
	srv := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
		if stallAt == "auth" {
			arrive()
			<-release
		}
		return nil, nil
	}}
	srv.AddHostKey(hostKey)
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		close(release)
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			if stallAt == "handshake" {
				arrive()
				continue
			}
			go serveStalling(conn, srv, stallAt, arrive)
		}
	}()

	dir := t.TempDir()
	cfg := Config{Port: l.Addr().(*net.TCPAddr).Port, KeyFile: filepath.Join(dir, "key"), KnownHostsFile: filepath.Join(dir, "known_hosts"), ConnectTimeout: time.Minute}
	_, clientPriv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(clientPriv, "")
	if err := os.WriteFile(cfg.KeyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	writeKnownHosts(t, cfg.KnownHostsFile, knownhosts.Line([]string{knownhosts.Normalize(l.Addr().String())}, hostKey.PublicKey()))
	return cfg, reached
}

func serveStalling(conn net.Conn, cfg *ssh.ServerConfig, stallAt string, arrive func()) {
	_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if stallAt == "open" {
			arrive() // and never Accept or Reject
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		defer ch.Close()
		go func() {
			for req := range chReqs {
				if req.Type != "exec" {
					_ = req.Reply(false, nil)
					continue
				}
				if stallAt == "output" {
					_ = req.Reply(true, nil)
				}
				arrive()
			}
		}()
	}
}

// TestStalledHostReturnsWhenTheContextEnds: a host that stops answering at any point of a
// ReadFile (verify's fetch of admin.conf) or Output (install-software's commands) holds the
// call only until its context is cancelled. Each case waits until the client has reached the
// stall, cancels, and then waits for the call; the bound is a guard against a hang, not a
// measurement.
func TestStalledHostReturnsWhenTheContextEnds(t *testing.T) {
	const guard = 30 * time.Second
	for _, tc := range []struct{ stall, want string }{
		{"handshake", "context canceled"},
		{"auth", "ssh root@127.0.1.31:"},
		{"open", "opening session: the host did not answer: context canceled"},
		{"exec", "starting command: the host did not answer: context canceled"},
		// The server cannot tell when the client has seen its reply to exec, so the cancel
		// may still find the client starting the command.
		{"output", "context canceled"},
	} {
		t.Run(tc.stall, func(t *testing.T) {
			cfg, reached := stallingServer(t, "127.0.1.31", tc.stall)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				c, err := Dial(ctx, "127.0.1.31", cfg)
				if err != nil {
					done <- err
					return
				}
				defer c.Close()
				_, err = c.ReadFile(ctx, "/etc/kubernetes/admin.conf")
				done <- err
			}()
			select {
			case <-reached:
			case err := <-done:
				t.Fatalf("returned before reaching the stall: %v", err)
			case <-time.After(guard):
				t.Fatal("the client never reached the stall")
			}
			cancel()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), context.Canceled.Error()) {
					t.Errorf("got %v, want an error containing %q", err, tc.want)
				}
			case <-time.After(guard):
				t.Fatalf("still waiting on a host stalled at %s %v after its context was cancelled", tc.stall, guard)
			}
		})
	}
}

// TestDialContextReachesTheHostsLoopback: a connection opened through the SSH connection
// carries bytes both ways to a server the host reaches at the address given, and ends with
// the SSH connection (a direct one would not); a port nothing listens on is an error that
// the host's sshd logged, as is a context already ended.
func TestDialContextReachesTheHostsLoopback(t *testing.T) {
	h := simhost.Start(t, "h", "127.0.1.31")
	c := dial(t, h, config(h))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				b := make([]byte, 4)
				_, _ = io.ReadFull(conn, b)
				_, _ = conn.Write(append([]byte("re:"), b...))
				_, _ = io.Copy(io.Discard, conn) // until the client's side ends
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	if _, err := c.DialContext(ctx, "tcp", addr); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("DialContext to %s, where nothing listens: %v, want an error naming it", addr, err)
	}
	if want := "connect_to 127.0.0.1 port " + strconv.Itoa(closed.Addr().(*net.TCPAddr).Port) + ": failed"; !strings.Contains(h.SSHDLog(), want) {
		t.Errorf("the host's sshd did not try the address (no %q in its log)", want)
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if _, err := c.DialContext(done, "tcp", l.Addr().String()); !errors.Is(err, context.Canceled) {
		t.Errorf("DialContext with an ended context: %v, want context.Canceled", err)
	}

	conn, err := c.DialContext(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7)
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "re:ping" {
		t.Fatalf("read %q, %v; want re:ping", got, err)
	}
	c.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(got); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection outlived the SSH connection (read: %v): it did not go through it", err)
	}
}
