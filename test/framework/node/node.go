// Package node runs a real Kubernetes node beside a test rig (test/framework/rig): containerd
// with runc and the CNI bridge plugin, the kubelet and kube-proxy, plus the control plane's
// kube-scheduler and kube-controller-manager. Pods run in real containers, from the images
// hack/images builds (PauseImage, ExecutorImage, and the test pods' BusyboxImage), which
// containerd pulls from `bpa serve`'s registry through hosts.toml mirrors (see registry).
//
// It is a package of its own, not a rig option, because it changes the machine where a rig
// changes nothing: a bridge with private addresses, kube-proxy's iptables rules, a cgroup
// tree. Stop removes all of it (and Start what a killed test left). The rest stays off the
// machine: containerd, its shims and the kubelet run in a private mount namespace, so their
// mounts stay private and the kubelet writes none of the machine's global sysctls.
//
// Simulated hosts (test/framework/simhost) join the pods on the node's bridge, at addresses
// HostAddress hands out, so that step pods reach them as a site's pods reach its machines.
//
// One node runs at a time on a machine (a file lock; tests of other packages wait for it):
// kube-proxy owns the KUBE-* chains of the machine's iptables, and two would rewrite each
// other's rules.
//
// Build its binaries with hack/build-tools.sh, then:
//
//	n := node.ForTest(t, rig.Options{WorkflowController: true})
//	c := kubernetes.NewForConfigOrDie(n.Rig.RESTConfig)
package node

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/hack/images"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// Name is the node's name.
const Name = "bpa-node"

// Address is the node's address on its bridge: kubelet, kube-proxy and the apiserver serve
// there, and pods route through it.
var Address = net.IPv4(10, 213, 0, 1)

// Tools are the files in the bin dir the node needs besides the rig's.
var Tools = []string{"kubelet", "kube-proxy", "kube-scheduler", "kube-controller-manager",
	"containerd", "containerd-shim-runc-v2", "ctr", "runc", "argoexec",
	"cni/bridge", "cni/host-local", "cni/loopback"}

// Node is a running node and its rig. Its exported fields are read-only.
type Node struct {
	// Rig is the control plane; its apiserver serves on Address.
	Rig *rig.Rig
	// Dir holds the node's configuration and state, under the rig's Dir.
	Dir string
	// Started is how long Start took, from nothing (once no other node ran) to a Ready node
	// with its images.
	Started time.Duration

	files                               files
	lock                                *os.File
	mountNS, containerd, kubelet, proxy *rig.Process
	registry                            *registry
	stopped                             bool

	hostsMu sync.Mutex
	hosts   int // addresses HostAddress handed out
}

// Start starts a rig with opts (Node set), then the node, and waits until the Node is
// Ready and kube-proxy has written the `kubernetes` Service's rules. On error everything
// started is stopped again.
func Start(ctx context.Context, opts rig.Options) (_ *Node, err error) {
	if opts.BinDir == "" {
		if opts.BinDir, err = rig.DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if missing := rig.MissingTools(opts.BinDir, Tools...); len(missing) > 0 {
		return nil, fmt.Errorf("missing %s in %s: run hack/build-tools.sh", strings.Join(missing, ", "), opts.BinDir)
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the test node needs root: it makes a bridge, network namespaces, iptables rules and cgroups (run as root, or `sudo make ...`)")
	}
	n := &Node{}
	if n.lock, err = lockMachine(ctx); err != nil {
		return nil, err
	}
	begin := time.Now()
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
		}
	}()
	// What a test killed before its Stop left behind (it held the lock: it was a node's).
	_ = killAll(func() []int { return append(cgroupPIDs(), leftoverShims(opts.BinDir)...) })
	if err = cleanHost(filepath.Join(opts.BinDir, "kube-proxy")); err != nil {
		return nil, fmt.Errorf("clean what an earlier node left: %w", err)
	}
	if err = createBridge(); err != nil {
		return nil, err
	}
	opts.Node = &rig.NodeOptions{Name: Name, Address: Address, Hosts: HostNet}
	if n.Rig, err = rig.Start(ctx, opts); err != nil {
		return nil, err
	}
	if err = n.start(ctx); err != nil {
		return nil, err
	}
	n.Started = time.Since(begin)
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	r := n.Rig
	n.Dir = filepath.Join(r.Dir, "node")
	n.files = files{
		Dir: n.Dir, Bin: r.BinDir, CNIBin: filepath.Join(r.BinDir, "cni"),
		Address: Address.String(), Bridge: Bridge, PodSubnet: podSubnet, Name: Name,
		PodRangeStart: podRangeStart, PodRangeEnd: podRangeEnd,
		CgroupRoot: cgroupRoot, CA: r.CAFile(), Sock: filepath.Join(r.Dir, "node", "run", "containerd.sock"),
		PauseImage:  PauseImage,
		KubeletCert: filepath.Join(r.Dir, "node", "kubelet.crt"), KubeletKey: filepath.Join(r.Dir, "node", "kubelet.key"),
		KubeletKubeconfig: r.ComponentKubeconfig("kubelet"), ProxyKubeconfig: r.ComponentKubeconfig("kube-proxy"),
	}
	if err := n.files.writeConfigs(); err != nil {
		return err
	}
	if err := r.WriteKubeletCert(n.files.KubeletCert, n.files.KubeletKey, Name, Address); err != nil {
		return err
	}
	for _, step := range []func(context.Context) error{
		n.startControlPlane, n.startRegistry, n.startMountNS, n.startContainerd, n.startKubelet, n.startKubeProxy,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startControlPlane starts what a cluster runs beside the apiserver: the scheduler (Argo's
// pods name no node) and the controller-manager (ServiceAccounts, kube-root-ca.crt,
// Deployments, the not-ready taint, garbage collection of pods). Neither serves HTTPS.
func (n *Node) startControlPlane(context.Context) error {
	r := n.Rig
	if _, err := r.Spawn("kube-scheduler", nil, "kube-scheduler",
		"--kubeconfig="+r.ComponentKubeconfig("kube-scheduler"), "--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	_, err := r.Spawn("kube-controller-manager", nil, "kube-controller-manager",
		"--kubeconfig="+r.ComponentKubeconfig("kube-controller-manager"), "--leader-elect=false", "--secure-port=0",
		"--root-ca-file="+r.CAFile(), "--service-account-private-key-file="+r.ServiceAccountKeyFile(),
		// One ServiceAccount per controller, as kubeadm runs it: the controller-manager's
		// own role only lets it make those.
		"--use-service-account-credentials=true")
	return err
}

// startMountNS starts the holder of the node's private mount namespace (mountNSScript),
// creating the mount points it binds over, and the cgroup root.
func (n *Node) startMountNS(ctx context.Context) error {
	for _, d := range hostDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := createCgroups(); err != nil {
		return err
	}
	var err error
	n.mountNS, err = n.Rig.Spawn("node-mountns", nil, "/usr/bin/unshare", "--mount", "--propagation", "private", "--",
		"/bin/sh", n.files.path("mountns.sh"))
	if err != nil {
		return err
	}
	return n.mountNS.WaitReady(ctx, 10*time.Second, func(context.Context) error {
		_, err := os.Stat(n.files.path("mountns.ready"))
		return err
	})
}

// inMountNS spawns bin from the bin dir inside the node's mount namespace.
func (n *Node) inMountNS(name, bin string, args ...string) (*rig.Process, error) {
	return n.Rig.Spawn(name, nil, "/usr/bin/nsenter", append([]string{
		fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.mountNS.Pid()), "--", filepath.Join(n.Rig.BinDir, bin)}, args...)...)
}

func (n *Node) startContainerd(ctx context.Context) error { return n.runContainerd(ctx, "containerd") }

// runContainerd starts containerd, logging to <name>.log, and waits until it answers.
func (n *Node) runContainerd(ctx context.Context, name string) error {
	var err error
	if n.containerd, err = n.inMountNS(name, "containerd", "--config", n.files.path("containerd.toml")); err != nil {
		return err
	}
	return n.containerd.WaitReady(ctx, 30*time.Second, func(ctx context.Context) error {
		_, err := n.Ctr(ctx, "version")
		return err
	})
}

// startRegistry starts the node's image registry and pushes the node's images to it;
// containerd pulls them from there when a pod needs them.
func (n *Node) startRegistry(ctx context.Context) error {
	var err error
	if n.registry, err = startRegistry(ctx, n.files.path("artifacts")); err != nil {
		return err
	}
	built, err := buildImages(ctx, n.Dir, n.Rig.BinDir)
	if err != nil {
		return err
	}
	return n.Push(ctx, built...)
}

// Push pushes images to the node's registry and points containerd's mirror of each of
// their original registries at it: pods then pull them by their original names, as an
// offline site's nodes do.
func (n *Node) Push(ctx context.Context, built ...images.Built) error {
	if err := n.registry.Push(ctx, built); err != nil {
		return err
	}
	var refs []string
	for _, b := range built {
		refs = append(refs, b.Spec.Refs...)
	}
	return n.registry.writeHosts(n.files.path("certs.d"), refs)
}

func (n *Node) startKubelet(ctx context.Context) error { return n.runKubelet(ctx, "kubelet") }

// runKubelet starts the kubelet, logging to <name>.log, and waits until the Node is Ready
// and untainted.
func (n *Node) runKubelet(ctx context.Context, name string) error {
	var err error
	n.kubelet, err = n.inMountNS(name, "kubelet", "--config="+n.files.path("kubelet.yaml"),
		"--kubeconfig="+n.files.KubeletKubeconfig, "--root-dir="+n.files.path("kubelet"),
		"--hostname-override="+Name, "--node-ip="+Address.String(), "--v=2")
	if err != nil {
		return err
	}
	c, err := kubernetes.NewForConfig(n.Rig.RESTConfig)
	if err != nil {
		return err
	}
	return n.kubelet.WaitReady(ctx, 2*time.Minute, func(ctx context.Context) error {
		node, err := c.CoreV1().Nodes().Get(ctx, Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// Ready, and the controller-manager has lifted the not-ready taint the
		// TaintNodesByCondition admission plugin put on it: pods can be scheduled.
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && len(node.Spec.Taints) == 0 {
				return nil
			}
		}
		return fmt.Errorf("node not Ready or tainted: %v", node.Spec.Taints)
	})
}

func (n *Node) startKubeProxy(ctx context.Context) error {
	var err error
	if n.proxy, err = n.Rig.Spawn("kube-proxy", nil, "kube-proxy", "--config="+n.files.path("kube-proxy.yaml"), "--v=2"); err != nil {
		return err
	}
	return n.proxy.WaitReady(ctx, time.Minute, func(context.Context) error {
		out, err := runOutput("iptables", "-w", "-t", "nat", "-S", "KUBE-SERVICES")
		if err != nil || !strings.Contains(out, rig.KubernetesServiceIP.String()+"/32") {
			return fmt.Errorf("no rule for the kubernetes Service yet (%v)", err)
		}
		return nil
	})
}

// HostNet is where the simulated hosts a test places itself live (the examples'
// BareMetalHosts, the e2e sites'): 10.213.1.0/24 on the node's bridge, above the pods'
// range and below what HostAddress hands out. It is HostSubnet(1): sites that share the
// node each take a subnet of their own. HostOn gives such an address its prefix.
var HostNet = HostSubnet(1)

// HostSubnets is how many /24 subnets of simulated hosts the bridge holds (HostSubnet).
const HostSubnets = 15

// HostSubnet is the k-th subnet of simulated hosts (1..HostSubnets): 10.213.k.0/24.
func HostSubnet(k int) *net.IPNet {
	if k < 1 || k > HostSubnets {
		panic(fmt.Sprintf("node: host subnet %d is not in 1..%d", k, HostSubnets))
	}
	return &net.IPNet{IP: net.IPv4(10, 213, byte(k), 0).To4(), Mask: net.CIDRMask(24, 32)}
}

// inHostSubnets says whether ip is in one of the HostSubnets.
func inHostSubnets(ip net.IP) bool {
	for k := 1; k <= HostSubnets; k++ {
		if HostSubnet(k).Contains(ip) {
			return true
		}
	}
	return false
}

// HostOn is ip, an address in a HostSubnet, with the bridge subnet's prefix, as a simulated
// host's Network takes it.
func HostOn(ip string) (*net.IPNet, error) {
	a := net.ParseIP(ip).To4()
	if a == nil || !inHostSubnets(a) {
		return nil, fmt.Errorf("%q is not in the node's host subnets %s..%s", ip, HostSubnet(1), HostSubnet(HostSubnets))
	}
	_, subnet, _ := net.ParseCIDR(podSubnet)
	return &net.IPNet{IP: a, Mask: subnet.Mask}, nil
}

// HostAddress hands out an address on the node's bridge, with the bridge's prefix, for a
// simulated host (simhost.Network) that pods reach as they would a site's machine: from the
// top of the subnet down, far above host-local's pod range and the HostSubnets, so they never meet.
// Each call returns a new one.
func (n *Node) HostAddress() (*net.IPNet, error) {
	n.hostsMu.Lock()
	defer n.hostsMu.Unlock()
	_, subnet, _ := net.ParseCIDR(podSubnet)
	top := binary.BigEndian.Uint32(subnet.IP.To4()) | ^binary.BigEndian.Uint32(subnet.Mask)
	ip := make(net.IP, net.IPv4len)
	binary.BigEndian.PutUint32(ip, top-uint32(n.hosts+1)) // the broadcast address, less one per host so far
	if inHostSubnets(ip) || bytes.Compare(ip, net.ParseIP(podRangeEnd).To4()) <= 0 {
		return nil, fmt.Errorf("no address left for a simulated host above %s", HostSubnet(HostSubnets))
	}
	n.hosts++
	return &net.IPNet{IP: ip, Mask: subnet.Mask}, nil
}

// WaitServiceAccount waits, as long as ctx allows, until the controller-manager has made
// namespace ns's default ServiceAccount and ConfigMap kube-root-ca.crt: until then the
// apiserver refuses a pod there.
func (n *Node) WaitServiceAccount(ctx context.Context, ns string) error {
	c, err := kubernetes.NewForConfig(n.Rig.RESTConfig)
	if err != nil {
		return err
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, saErr := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		_, cmErr := c.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return saErr == nil && cmErr == nil, nil
	})
}

// Pids are the process ids of the node's kubelet and containerd, and of the containerd
// shims that run its containers (one per pod, one per container started with `ctr run`),
// for reading their memory from /proc.
func (n *Node) Pids() (kubelet, containerd int, shims []int) {
	shim, err := filepath.EvalSymlinks(filepath.Join(n.Rig.BinDir, "containerd-shim-runc-v2"))
	if err == nil {
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.mountNS.Pid()))
		shims = processes(func(link func(string) string) bool { return link("exe") == shim && link("ns/mnt") == ns })
	}
	return n.kubelet.Pid(), n.containerd.Pid(), shims
}

// Stop stops the node and its rig, and removes what the node put on the machine: its
// processes and every process in its mount namespace or cgroup tree (containers, shims),
// with them its mounts and the pods' network namespaces, then the iptables rules, the
// cgroups, the bridge. It is safe to call more than once.
func (n *Node) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	binDir := ""
	if n.Rig != nil {
		binDir = n.Rig.BinDir
		for _, p := range []*rig.Process{n.proxy, n.kubelet, n.containerd} {
			if p != nil {
				p.Stop()
			}
		}
		ours := cgroupPIDs
		if n.mountNS != nil && !n.mountNS.Exited() {
			ns := n.mountNS.Pid()
			ours = func() []int { return append(cgroupPIDs(), mountNSPIDs(ns)...) }
		}
		errs = append(errs, killAll(ours), n.registry.Stop())
	}
	if n.lock != nil {
		if binDir == "" {
			binDir, _ = rig.DefaultBinDir()
		}
		errs = append(errs, cleanHost(filepath.Join(binDir, "kube-proxy")))
	}
	if n.Rig != nil {
		errs = append(errs, n.Rig.Stop())
	}
	if n.lock != nil {
		errs = append(errs, n.lock.Close()) // releases the flock
	}
	return errors.Join(errs...)
}

// ForTest starts a node for t, stops it in t.Cleanup, and fails t if it cannot start (with
// the tails of the logs, also when t has failed by cleanup time).
func ForTest(t framework.T, opts rig.Options) *Node {
	t.Helper()
	RequireTools(t)
	// Long enough to wait for another package's node (see lockMachine) and to start.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	n, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start test node: %v", err)
	}
	t.Logf("test node up in %s (dir %s, apiserver %s)", n.Started.Round(time.Millisecond), n.Dir, n.Rig.URL)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", n.Rig.LogTails(40))
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stop test node: %v", err)
		}
	})
	return n
}

// RequireTools fails t, rather than skipping it, when the rig's or the node's binaries are
// missing: a missing binary is a broken setup (run hack/build-tools.sh), not an optional test.
func RequireTools(t framework.T) {
	t.Helper()
	rig.RequireTools(t, Tools...)
}
