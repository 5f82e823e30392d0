package simhost

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Forward makes the host, which must be on a network (StartOn), accept TCP connections on
// its address at port and pass each to the address to, dialled from the machine: the
// host then serves what runs there, as a site's control-plane machine serves its
// kube-apiserver. The listener lives in the host's network namespace (made there with
// setns), so only what reaches the host reaches it; it closes when the host stops.
func (h *Host) Forward(port int, to string) error {
	return h.forward([]string{h.IP}, port, to, nil)
}

// ForwardWhile is Forward on the host's own 127.0.0.1 too (its namespace's loopback, which
// the host's processes and SSH forwards reach), for a server that runs on the host only
// while serving reports true: a connection made when it does not is closed at once, before
// anything is dialled. nil serving is always. kubespray's etcd, say, listens on an etcd
// host's address and 127.0.0.1 once the etcd role has run there, until a reset.
func (h *Host) ForwardWhile(port int, to string, serving func() bool) error {
	return h.forward([]string{h.IP, "127.0.0.1"}, port, to, serving)
}

// Listen opens a TCP listener at addr (ip:port) in the host's network namespace, as a
// server running on the host would; it closes when the host stops, and may be closed
// earlier (a server that stops) and opened again.
func (h *Host) Listen(addr string) (net.Listener, error) {
	if h.network == nil {
		return nil, errors.New("simhost: Listen needs a host on a network (StartOn)")
	}
	l, err := listenIn(h.NetNS(), addr)
	if err != nil {
		return nil, fmt.Errorf("simhost %s: listening on %s: %w", h.Name, addr, err)
	}
	h.unitsMu.Lock()
	h.listeners = append(h.listeners, l)
	h.unitsMu.Unlock()
	return l, nil
}

func (h *Host) forward(ips []string, port int, to string, serving func() bool) error {
	if h.network == nil {
		return errors.New("simhost: Forward needs a host on a network (StartOn)")
	}
	for _, ip := range ips {
		l, err := listenIn(h.NetNS(), net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("simhost %s: forwarding %s port %d: %w", h.Name, ip, port, err)
		}
		h.listeners = append(h.listeners, l)
		go serveForward(l, to, serving)
	}
	return nil
}

// listenIn opens a TCP listener at addr inside the network namespace nsPath. A socket stays
// in the namespace it was made in: the thread enters the namespace for the listen only, and
// goes back (or, failing that, dies with the goroutine, never running other code there).
func listenIn(nsPath, addr string) (net.Listener, error) {
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	type result struct {
		l   net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, err}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{nil, fmt.Errorf("setns: %w", err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // back home: the thread may run other goroutines again
		}
		done <- result{l, err}
	}()
	r := <-done
	return r.l, r.err
}

// serveForward copies every connection l accepts to a new connection to to, both ways,
// until l is closed; while serving (when not nil) reports false, it closes each at once.
func serveForward(l net.Listener, to string, serving func() bool) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		if serving != nil && !serving() {
			_ = in.Close()
			continue
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", to)
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(out, in)
				_ = out.(*net.TCPConn).CloseWrite()
			}()
			_, _ = io.Copy(in, out)
			_ = in.(*net.TCPConn).CloseWrite()
			wg.Wait()
		}()
	}
}
