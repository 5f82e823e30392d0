// Package sshexec runs commands on a cluster's hosts over SSH, for the steps that must reach
// a host rather than the Kubernetes API: verify (which fetches admin.conf) and
// install-software.
//
// It is deliberately narrow, because it handles a cluster's root credentials:
//
//   - The host key is checked against a known_hosts file. Turning that off
//     (InsecureIgnoreHostKey) is an explicit, loudly logged choice, because without it anyone
//     on the path can impersonate the host and be handed admin credentials or run packages.
//   - Commands are argv lists, never shell text. SSH only carries one command string, so
//     every argument is single-quoted (see Quote); nothing is ever spliced in unquoted.
//   - A non-root user runs the command through `sudo -n --`, which fails instead of
//     prompting.
//   - Every network wait is bounded: the TCP connect and the SSH handshake by
//     Config.ConnectTimeout, and everything by the caller's context: connecting, opening a
//     session, starting the command, waiting for its output and exit. A host that
//     authenticates and then never answers must not hold a step (and its cluster's lock)
//     until the Workflow's deadline. A command whose context ends is abandoned, not killed;
//     see Run.
//   - Neither the private key nor command output is ever logged here.
package sshexec

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DefaultConnectTimeout bounds the TCP connect plus the SSH handshake. An unreachable host
// should fail its step quickly so Argo's retryStrategy, not a hung pod, deals with it.
const DefaultConnectTimeout = 15 * time.Second

// maxOutput caps what is kept of a command's stdout or stderr. The commands BPA runs print
// kilobytes; the cap keeps a runaway remote from exhausting the step pod's memory.
const maxOutput = 16 << 20

// Config says how to reach and authenticate to a host.
type Config struct {
	// User is the login user; empty means root.
	User string
	// Port is the SSH port; 0 means 22.
	Port int
	// KeyFile is the path of the private key (OpenSSH or PEM format, without passphrase).
	KeyFile string
	// KnownHostsFile is the path of the known_hosts file the host key is checked against.
	KnownHostsFile string
	// InsecureIgnoreHostKey accepts any host key. Only for labs; it is logged loudly.
	InsecureIgnoreHostKey bool
	// ConnectTimeout bounds connecting and the SSH handshake; 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Logf receives warnings; nil means the standard logger (stderr).
	Logf func(format string, args ...any)
}

func (c Config) user() string {
	if c.User == "" {
		return "root"
	}
	return c.User
}

func (c Config) port() int {
	if c.Port == 0 {
		return 22
	}
	return c.Port
}

func (c Config) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

// Client is an SSH connection to one host.
type Client struct {
	conn *ssh.Client
	user string
	addr string
}

// Addr is the host:port the client is connected to.
func (c *Client) Addr() string { return c.addr }

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// DialContext opens a TCP connection from the host to addr (host:port as the host sees it:
// 127.0.0.1:2379 is the host's own loopback) through the SSH connection, a direct-tcpip
// channel as `ssh -L` opens: for a service that listens on the host only, such as
// kubespray's etcd on an etcd host. network must be "tcp" (or "tcp4", "tcp6"). The host's
// sshd must allow it (AllowTcpForwarding yes, OpenSSH's default, or local); ctx bounds the
// opening only, and the connection ends with the client.
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := c.conn.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: connecting to %s from the host: %w", c.addr, addr, orCtxErr(ctx, err))
	}
	return conn, nil
}

// Dial connects to host (an IP address or name) and authenticates with the key file.
func Dial(ctx context.Context, host string, cfg Config) (*Client, error) {
	if host == "" {
		return nil, errors.New("ssh: no host address")
	}
	addr := net.JoinHostPort(host, strconv.Itoa(cfg.port()))
	signer, err := LoadSigner(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	hostKey, algorithms, err := hostKeyCheck(cfg, addr)
	if err != nil {
		return nil, err
	}
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	dialer := net.Dialer{Deadline: deadline, KeepAlive: 30 * time.Second}
	tcp, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: connecting: %w", addr, orCtxErr(ctx, err))
	}
	// The handshake has no context of its own: a deadline on the socket bounds it (a host
	// that accepts TCP but never speaks SSH must not hang the step), and closing the socket
	// when ctx ends aborts it. Both are lifted once the connection is up.
	_ = tcp.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { tcp.Close() })
	conn, chans, reqs, err := ssh.NewClientConn(tcp, addr, &ssh.ClientConfig{
		User:              cfg.user(),
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   hostKey,
		HostKeyAlgorithms: algorithms,
	})
	if !stop() || err != nil {
		tcp.Close()
		return nil, fmt.Errorf("ssh %s@%s: %w", cfg.user(), addr, orCtxErr(ctx, err))
	}
	_ = tcp.SetDeadline(time.Time{})
	return &Client{conn: ssh.NewClient(conn, chans, reqs), user: cfg.user(), addr: addr}, nil
}

// IsNetworkFailure says whether err (from Dial) means the host could not be reached (refused,
// no route, timed out), as opposed to an SSH-level refusal from a host that answered.
func IsNetworkFailure(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
}

// orCtxErr is ctx's error once ctx has ended, which is then why err happened ("use of closed
// network connection" says less), else err.
func orCtxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// LoadSigner reads a private key file. Errors name the file, never its content.
func LoadSigner(path string) (ssh.Signer, error) {
	if path == "" {
		return nil, errors.New("ssh: no private key file given")
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ssh: reading private key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("ssh: private key %s is passphrase-protected; steps need an unencrypted key from the SSH Secret", path)
	}
	if err != nil {
		return nil, fmt.Errorf("ssh: private key %s: %w", path, err)
	}
	return signer, nil
}

// hostKeyCheck returns the host key callback and the host key algorithms to offer.
func hostKeyCheck(cfg Config, addr string) (ssh.HostKeyCallback, []string, error) {
	if cfg.InsecureIgnoreHostKey {
		cfg.logf("WARNING: NOT checking the SSH host key of %s (insecure-ignore-host-key is set): "+
			"anyone on the network path can impersonate this host and capture what BPA sends it. "+
			"Put the host's key in the SSH Secret's known_hosts instead.", addr)
		return func(hostname string, _ net.Addr, key ssh.PublicKey) error {
			cfg.logf("WARNING: accepted unverified host key %s %s for %s", key.Type(), ssh.FingerprintSHA256(key), hostname)
			return nil
		}, nil, nil
	}
	if cfg.KnownHostsFile == "" {
		return nil, nil, errors.New("ssh: no known_hosts file given (host keys are checked unless insecure-ignore-host-key is set)")
	}
	cb, err := knownhosts.New(cfg.KnownHostsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh: reading known_hosts: %w", err)
	}
	return explainHostKeyErrors(cb), knownAlgorithms(cb, addr), nil
}

// explainHostKeyErrors turns knownhosts' terse errors into ones an operator can act on.
func explainHostKeyErrors(cb ssh.HostKeyCallback) ssh.HostKeyCallback {
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(hostname, remote, key)
		var keyErr *knownhosts.KeyError
		if errors.As(err, &keyErr) {
			if len(keyErr.Want) == 0 {
				return fmt.Errorf("host key of %s (%s %s) is not in known_hosts: refusing to connect; add the host's key to the SSH Secret's known_hosts",
					hostname, key.Type(), ssh.FingerprintSHA256(key))
			}
			var want []string
			for _, k := range keyErr.Want {
				want = append(want, k.Key.Type()+" "+ssh.FingerprintSHA256(k.Key))
			}
			return fmt.Errorf("host key MISMATCH for %s: it presented %s %s but known_hosts has %s: refusing to connect "+
				"(the host was reinstalled, or someone is impersonating it)",
				hostname, key.Type(), ssh.FingerprintSHA256(key), strings.Join(want, ", "))
		}
		var revoked *knownhosts.RevokedError
		if errors.As(err, &revoked) {
			return fmt.Errorf("host key of %s is marked @revoked in known_hosts: refusing to connect", hostname)
		}
		return err
	}
}

// probeKey is a key no host has; asking knownhosts about it makes it list the keys it does
// know for an address.
var probeKey, _ = ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))

// knownAlgorithms lists the host key algorithms of the keys known_hosts has for addr.
//
// Without this the server picks its preferred key type, and if known_hosts holds a different
// type of key for the host (say RSA while the server prefers ed25519) the check fails as a
// mismatch although the host is genuine. OpenSSH's client does the same ordering.
func knownAlgorithms(cb ssh.HostKeyCallback, addr string) []string {
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		tcpAddr = &net.TCPAddr{}
	}
	var keyErr *knownhosts.KeyError
	if !errors.As(cb(addr, tcpAddr, probeKey), &keyErr) {
		return nil
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range keyErr.Want {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	return algos
}

// algorithmsFor maps a key type to the signature algorithms that use it: an RSA key signs
// with SHA-2 in current OpenSSH, and with SHA-1 (ssh-rsa) only in old ones.
func algorithmsFor(keyType string) []string {
	switch keyType {
	case ssh.KeyAlgoRSA:
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	case ssh.CertAlgoRSAv01:
		return []string{ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01, ssh.CertAlgoRSAv01}
	default:
		return []string{keyType}
	}
}

// ExitError is a remote command that ran and exited non-zero.
type ExitError struct {
	Command string // argv[0]
	Code    int
	Stderr  string // the end of stderr, bounded
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s exited with status %d", e.Command, e.Code)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Run runs argv on the host and returns its output and exit code. err is set only when the
// command could not be run or its exit status is unknown (connection lost, context ended);
// a command that ran and failed returns its non-zero exit code and a nil error. When ctx
// ends first, Run returns at once and the remote command is left to run to its end.
func (c *Client) Run(ctx context.Context, argv []string) (stdout, stderr []byte, exitCode int, err error) {
	cmd, err := Command(c.user, argv)
	if err != nil {
		return nil, nil, -1, err
	}
	return c.run(ctx, cmd, nil)
}

// run runs cmd with stdin (nil: none).
func (c *Client) run(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, exitCode int, err error) {
	session, err := await(ctx, c.conn.NewSession, func(s *ssh.Session) { s.Close() })
	if err != nil {
		return nil, nil, -1, fmt.Errorf("ssh %s: opening session: %w", c.addr, err)
	}
	defer session.Close()
	var out, errOut cappedBuffer
	session.Stdout, session.Stderr = &out, &errOut
	// No stdin unless given: a command that waits for input (a prompt) gets EOF and fails
	// instead of hanging.
	session.Stdin = stdin
	if stdin == nil {
		session.Stdin = bytes.NewReader(nil)
	}
	if _, err := await(ctx, func() (struct{}, error) { return struct{}{}, session.Start(cmd) }, nil); err != nil {
		return nil, nil, -1, fmt.Errorf("ssh %s: starting command: %w", c.addr, err)
	}
	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	select {
	case <-ctx.Done():
		// Return now, but leave the remote command to finish: SSH cannot reliably kill it
		// (OpenSSH refuses signal requests in some configurations, root sessions among them),
		// and killing apt-get or dpkg midway would leave the package database half
		// configured. A retry then waits on apt's lock. The output buffers still belong to
		// the session's copying goroutines, so they are not returned.
		session.Close()
		return nil, nil, -1, fmt.Errorf("ssh %s: gave up waiting for the command, left to finish on the host: %w", c.addr, ctx.Err())
	case err = <-done:
	}
	var exit *ssh.ExitError
	switch {
	case err == nil:
		return out.Bytes(), errOut.Bytes(), 0, nil
	case errors.As(err, &exit):
		if exit.Signal() != "" {
			return out.Bytes(), errOut.Bytes(), -1, fmt.Errorf("ssh %s: command killed by signal %s", c.addr, exit.Signal())
		}
		return out.Bytes(), errOut.Bytes(), exit.ExitStatus(), nil
	default:
		return out.Bytes(), errOut.Bytes(), -1, fmt.Errorf("ssh %s: %w", c.addr, err)
	}
}

// await runs f, a wait on the host that x/crypto/ssh gives no context (opening a session,
// the reply to exec), and returns its result, or ctx's error as soon as ctx ends. f is then
// left behind, blocked until the host answers or the connection closes, and undo, if any,
// releases what it obtains after all. The connection stays usable for other sessions.
func await[T any](ctx context.Context, f func() (T, error), undo func(T)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // f answered too: use it
			return r.v, r.err
		default:
		}
		go func() {
			if r := <-done; r.err == nil && undo != nil {
				undo(r.v)
			}
		}()
		var zero T
		return zero, fmt.Errorf("the host did not answer: %w", ctx.Err())
	}
}

// Output runs argv and returns its stdout; a non-zero exit is an *ExitError carrying the end
// of stderr.
func (c *Client) Output(ctx context.Context, argv []string) ([]byte, error) {
	stdout, stderr, code, err := c.Run(ctx, argv)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, &ExitError{Command: argv[0], Code: code, Stderr: Tail(stderr, 512)}
	}
	return stdout, nil
}

// ReadFile returns the content of a file on the host (via sudo for a non-root user). Its
// content is returned, never logged: this is how admin.conf is fetched.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, err := c.Output(ctx, []string{"cat", "--", path})
	if err != nil {
		return nil, fmt.Errorf("reading %s on %s: %w", path, c.addr, err)
	}
	return data, nil
}

// WriteFile writes what r holds to path on the host (via sudo for a non-root user), created
// with mode 0600, as install(1) does: the file is never readable by others on the way.
func (c *Client) WriteFile(ctx context.Context, path string, r io.Reader) error {
	argv := []string{"install", "-m", "0600", "/dev/stdin", path}
	cmd, err := Command(c.user, argv)
	if err != nil {
		return err
	}
	_, stderr, code, err := c.run(ctx, cmd, r)
	if err == nil && code != 0 {
		err = &ExitError{Command: argv[0], Code: code, Stderr: Tail(stderr, 512)}
	}
	if err != nil {
		return fmt.Errorf("writing %s on %s: %w", path, c.addr, err)
	}
	return nil
}

// Tail returns at most n bytes from the end of b as one trimmed line, for error messages
// (the end of stderr is where tools say what went wrong).
func Tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return strings.Join(strings.Fields(s), " ")
}

// cappedBuffer keeps the first maxOutput bytes and drops the rest, reporting success so the
// remote command is never blocked or failed by the cap.
type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}

var _ io.Writer = (*cappedBuffer)(nil)
