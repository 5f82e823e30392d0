package simhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Network puts a host in a network namespace of its own, on a bridge, as a site's machine is
// on the network its cluster's pods reach: test/framework/node's bridge, at an address its
// HostAddress hands out. The namespace holds a loopback and one end of a veth pair (eth0,
// with Address) whose other end is on Bridge, and no route but Address's subnet: the host
// reaches the bridge's subnet and nothing beyond it, and sshd listens only there. Stop
// removes the namespace and the veth.
type Network struct {
	// Bridge is the bridge's name (node.Bridge).
	Bridge string
	// Address is the host's address, with the bridge subnet's prefix (node.HostAddress).
	Address *net.IPNet
}

// name names the namespace and the veth's end on the bridge after the address (which is
// unique on the bridge): "bpasim-" and its 8 hex digits, 15 characters, the most a link name
// may have.
func (nw *Network) name() string { return fmt.Sprintf("bpasim-%x", []byte(nw.Address.IP.To4())) }

// path is the namespace's file, as `ip netns add` mounts it.
func (nw *Network) path() string { return filepath.Join("/run/netns", nw.name()) }

// create makes the namespace and the veth pair, after removing those a killed test left
// for the same address.
func (nw *Network) create() error {
	if err := nw.remove(); err != nil {
		return fmt.Errorf("removing what an earlier host at %s left: %w", nw.Address.IP, err)
	}
	name := nw.name()
	steps := [][]string{
		{"netns", "add", name},
		{"link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", name},
		{"link", "set", name, "master", nw.Bridge, "up"},
		{"-n", name, "addr", "add", nw.Address.String(), "dev", "eth0"},
		{"-n", name, "link", "set", "eth0", "up"},
		{"-n", name, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := ip(args...); err != nil {
			return errors.Join(err, nw.remove())
		}
	}
	return nil
}

// remove deletes the veth (both ends) and the namespace, those that exist. The veth goes
// first and by name: a namespace's devices are only destroyed some time after it is
// deleted, so deleting the namespace alone could leave the bridge's end for a moment.
func (nw *Network) remove() error {
	var errs []error
	if _, err := os.Stat(filepath.Join("/sys/class/net", nw.name())); err == nil {
		errs = append(errs, ip("link", "del", nw.name()))
	}
	if _, err := os.Stat(nw.path()); err == nil {
		errs = append(errs, ip("netns", "del", nw.name()))
	}
	return errors.Join(errs...)
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
