package simhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Network puts a host in a network namespace of its own, on a bridge, as a site's machine is
// on the network its cluster's pods reach: test/framework/node's bridge, at an address its
// HostAddress hands out. The namespace holds a loopback and one end of a veth pair (eth0,
// with Address) whose other end is on Bridge, and no route but Address's subnet: the host
// reaches the bridge's subnet and nothing beyond it, and sshd listens only there.
//
// The namespace is sshd's own (unshare --net), not one `ip netns add` pins in /run/netns: it
// ends with sshd's last process, and takes the veth pair with it, so a test killed before
// Stop leaves nothing behind either. Stop deletes the veth itself, not to wait for that.
type Network struct {
	// Bridge is the bridge's name (node.Bridge).
	Bridge string
	// Address is the host's address, with the bridge subnet's prefix (node.HostAddress).
	Address *net.IPNet

	made bool // the veth pair is this host's: attach made it
}

// veth names the veth's end on the bridge after the address (unique on the bridge):
// "bpasim-" and its 8 hex digits, 15 characters, the most a link name may have.
func (nw *Network) veth() string { return fmt.Sprintf("bpasim-%x", []byte(nw.Address.IP.To4())) }

// setUp is what the host's script runs first, inside the namespace: wait until attach has
// configured eth0 (5 s at most). sshd can then bind the address, and the harness's first
// connection finds it: one made before would leave the machine's neighbour entry for the
// address failed, and the next ones wait a second for ARP to try again.
func (nw *Network) setUp() string {
	return fmt.Sprintf(`n=0; until ip -4 addr show dev eth0 up 2>/dev/null | grep -q ' inet %s/'; do n=$((n+1)); [ $n -lt 250 ] || exit 1; sleep 0.02; done`,
		nw.Address.IP)
}

// attach makes the veth pair once pid is in a network namespace of its own: eth0 in there,
// the other end on the bridge.
func (nw *Network) attach(pid int) error {
	ns := fmt.Sprintf("/proc/%d/ns/net", pid)
	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		theirs, err := os.Readlink(ns)
		if err != nil {
			return fmt.Errorf("sshd's network namespace: %w", err)
		}
		if theirs != ours {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d has not left the machine's network namespace after 5s", pid)
		}
	}
	name := nw.veth()
	if err := run("ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)); err != nil {
		return fmt.Errorf("%w (is another host at %s?)", err, nw.Address.IP)
	}
	nw.made = true
	for _, args := range [][]string{
		{"ip", "link", "set", name, "master", nw.Bridge, "up"},
		{"nsenter", "--net=" + ns, "ip", "addr", "add", nw.Address.String(), "dev", "eth0"},
		{"nsenter", "--net=" + ns, "ip", "link", "set", "eth0", "up"},
		{"nsenter", "--net=" + ns, "ip", "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			return errors.Join(err, nw.detach())
		}
	}
	return nil
}

// detach deletes the veth pair attach made, if it is still there.
func (nw *Network) detach() error {
	if !nw.made {
		return nil
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", nw.veth())); err != nil {
		return nil
	}
	return run("ip", "link", "del", nw.veth())
}

// run runs the command args, for its exit status.
func run(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
