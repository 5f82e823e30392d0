package rig

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a child gets between SIGTERM and SIGKILL.
const stopGrace = 5 * time.Second

// Process is one child of the rig: etcd, a kube-apiserver, the
// workflow-controller, or one of a real node's (test/framework/node).
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed once the process has exited
	err     error         // exit status, valid after done
}

// spawn starts bin with args, logging to <logDir>/<name>.log (and to extra,
// line by line with a "[name] " prefix, when it is non-nil).
func spawn(logDir, name string, extra io.Writer, env []string, bin string, args ...string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	var out io.Writer = f
	if extra != nil {
		out = io.MultiWriter(f, &prefixWriter{prefix: "[" + name + "] ", w: extra})
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so Stop can signal the child and anything it forks.
		Setpgid: true,
		// Nothing must outlive a test binary killed by `go test -timeout` or ^C,
		// when no Stop ever runs. (Pdeathsig follows the OS thread that forked,
		// and Go keeps its threads alive unless a locked goroutine exits.)
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file the process logs to.
func (p *Process) LogPath() string { return p.logPath }

// WaitReady polls ready until it succeeds, the process exits, or timeout; its error
// carries the last lines of the process log.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	return waitFor(ctx, p, timeout, ready)
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and
// waits for the process to be reaped.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
	// Reap stragglers of the group too (none of our children fork, but be sure).
	_ = syscall.Kill(pgid, syscall.SIGKILL)
}

// tail returns the last n lines of the process log.
func (p *Process) tail(n int) string {
	return TailFile(p.logPath, n)
}

// failure wraps err with the exit status and the last log lines, so a failed
// start explains itself without digging in the rig directory.
func (p *Process) failure(err error) error {
	status := "still running"
	if p.Exited() {
		status = fmt.Sprintf("exited: %v", p.err)
	}
	return fmt.Errorf("%s (%s): %w\n--- last lines of %s ---\n%s", p.name, status, err, p.logPath, p.tail(30))
}

// TailFile returns the last n lines of a log file, or why it cannot.
func TailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// prefixWriter prefixes every line written through it; writers from several
// processes share one underlying writer, hence the lock.
type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    bytes.Buffer
}

var prefixMu sync.Mutex

func (p *prefixWriter) Write(b []byte) (int, error) {
	prefixMu.Lock()
	defer prefixMu.Unlock()
	p.buf.Write(b)
	for {
		line, err := p.buf.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// Keep the partial line for the next write.
			p.buf.Reset()
			p.buf.Write(line)
			return len(b), nil
		}
		if _, err := io.WriteString(p.w, p.prefix+string(line)); err != nil {
			return len(b), err
		}
	}
}

// grepFile reports whether the file contains a line with substr.
func grepFile(path, substr string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		if strings.Contains(s.Text(), substr) {
			return true
		}
	}
	return false
}
