package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's place on the machine. Fixed names: one node runs at a time (see lock).
const (
	// Bridge is the node's bridge: its pods' veths are on it, and so are the simulated
	// hosts' (HostAddress).
	Bridge     = "bpanode0"
	bridgeCIDR = "10.213.0.1/16"
	podSubnet  = "10.213.0.0/16"
	// The pods' addresses (host-local's range): the bottom of the subnet. The HostSubnets hold the
	// simulated hosts a test names, and HostAddress hands out others from the top down.
	podRangeStart = "10.213.0.10"
	podRangeEnd   = "10.213.0.199"
	// cgroupRoot is the kubelet's cgroup root, in every hierarchy: the pods go under it,
	// not under the machine's kubepods.
	cgroupRoot = "bpa-node"
	lockFile   = "/run/lock/bpa-test-node.lock"
	cgroupFS   = "/sys/fs/cgroup"
)

// hostDirs are mount points the node binds private folders over in its mount namespace:
// containerd's shims put their sockets under /run/containerd whatever the config says, and
// libcni caches results under /var/lib/cni. They are made when missing and removed after,
// when empty.
var hostDirs = []string{"/run/containerd", "/var/lib/cni"}

// lockMachine takes the machine-wide node lock, waiting as long as ctx allows. One node at a
// time: kube-proxy owns the KUBE-* chains of the machine's iptables, and a second kube-proxy
// would rewrite the first one's rules (each syncs the whole chain). The lock goes with the
// process, however it ends.
func lockMachine(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("another test's node holds %s: %w", lockFile, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Exclusive waits, as long as ctx allows, until no node runs on the machine and none can
// start until release: for checks that the machine is as clean as before a node.
func Exclusive(ctx context.Context) (release func() error, err error) {
	f, err := lockMachine(ctx)
	if err != nil {
		return nil, err
	}
	return f.Close, nil
}

func run(name string, args ...string) error {
	_, err := runOutput(name, args...)
	return err
}

func runOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// bridgeMAC is the bridge's MAC address, set when it is made. A bridge without one set
// takes the lowest of its ports' MACs, and so changes whenever a pod's or a host's veth
// comes or goes: every neighbour that cached the old one for the bridge's address (the
// apiservers' address) then sends into the void until its entry expires, up to about a
// minute, and connections to the apiservers time out meanwhile (seen: the stand-in
// kubespray's agent, on a host, failing to reach the application apiserver in 30 s).
// Locally administered, from the bridge's address 10.213.0.1.
const bridgeMAC = "02:42:0a:d5:00:01"

func createBridge() error {
	if err := run("ip", "link", "add", Bridge, "address", bridgeMAC, "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "addr", "add", bridgeCIDR, "dev", Bridge); err != nil {
		return err
	}
	return run("ip", "link", "set", Bridge, "up")
}

func bridgeExists() bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", Bridge))
	return err == nil
}

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers, name=systemd, the
// unified one), each of which gets the node's cgroup root.
func cgroupHierarchies() []string {
	var dirs []string
	entries, _ := os.ReadDir(cgroupFS)
	for _, e := range entries {
		d := filepath.Join(cgroupFS, e.Name())
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 { // cgroup v2 only: /sys/fs/cgroup is the one hierarchy
		dirs = []string{cgroupFS}
	}
	return dirs
}

func createCgroups() error {
	for _, h := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(h, cgroupRoot), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// cgroupPIDs are the processes in the node's cgroup tree: the pods' containers.
func cgroupPIDs() []int {
	var pids []int
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// removeCgroups removes the node's cgroup tree, deepest first; a cgroup whose last process
// just died may still be busy for a moment.
func removeCgroups() error {
	var err error
	for range 50 {
		if err = removeCgroupsOnce(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func removeCgroupsOnce() error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// processes are the pids whose /proc/<pid>/<link> (ns/mnt, exe) keep accepts.
func processes(keep func(link func(name string) string) bool) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link := func(name string) string {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/%s", p, name))
			return target
		}
		if keep(link) {
			pids = append(pids, p)
		}
	}
	return pids
}

// mountNSPIDs are the processes in the mount namespace of pid (containerd, its shims,
// kubelet), pid included.
func mountNSPIDs(pid int) []int {
	want, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return nil
	}
	return processes(func(link func(string) string) bool { return link("ns/mnt") == want })
}

// leftoverShims are the running shims of the bin dir's containerd outside the machine's
// mount namespace (this process's: pid 1's may be out of reach, as in a VM's or a
// container's init): those of a node whose test was killed (the shims outlive the
// namespace's holder). One node runs at a time, and a containerd run by hand has its shims
// in the machine's namespace.
func leftoverShims(binDir string) []int {
	shim, err := filepath.EvalSymlinks(filepath.Join(binDir, "containerd-shim-runc-v2"))
	if err != nil {
		return nil
	}
	host, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return nil
	}
	return processes(func(link func(string) string) bool { return link("exe") == shim && link("ns/mnt") != host })
}

// killAll SIGKILLs what pids returns until it returns nothing (or 10 s have passed).
func killAll(pids func() []int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := pids()
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v survive SIGKILL", left)
		}
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cleanIPTables removes kube-proxy's chains from the machine's iptables and ip6tables:
// `kube-proxy --cleanup`, then the filter KUBE-FIREWALL chain and its jumps, which it
// leaves behind.
func cleanIPTables(kubeProxy string) error {
	errs := []error{run(kubeProxy, "--cleanup")}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		for _, from := range []string{"INPUT", "OUTPUT"} {
			for run(ipt, "-w", "-D", from, "-j", "KUBE-FIREWALL") == nil {
			}
		}
		if run(ipt, "-w", "-n", "-L", "KUBE-FIREWALL") == nil {
			errs = append(errs, run(ipt, "-w", "-F", "KUBE-FIREWALL"), run(ipt, "-w", "-X", "KUBE-FIREWALL"))
		}
	}
	return errors.Join(errs...)
}

// IPTablesLeftovers lists the KUBE-* and CNI-* chains in the machine's iptables and
// ip6tables: none once no node runs.
func IPTablesLeftovers() ([]string, error) {
	var left []string
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(save).Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", save, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, ":KUBE-") || strings.HasPrefix(l, ":CNI-") {
				left = append(left, save+" "+strings.Fields(l)[0])
			}
		}
	}
	return left, nil
}

// cleanHost removes what a node leaves on the machine once its processes are gone: the
// iptables rules, the cgroup tree, the bridge, the mount points. Start runs it too, for what
// a test killed before its Stop left behind.
func cleanHost(kubeProxy string) error {
	errs := []error{cleanIPTables(kubeProxy), removeCgroups()}
	if bridgeExists() {
		errs = append(errs, run("ip", "link", "del", Bridge))
	}
	for _, d := range hostDirs {
		// Not empty: a container runtime of the machine's own uses it.
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTEMPTY) {
			errs = append(errs, fmt.Errorf("rmdir %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
