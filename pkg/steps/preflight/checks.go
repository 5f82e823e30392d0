package preflight

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The checks, by the names the failure message gives them.
const (
	CheckEtcd          = "etcd"
	CheckNodesReady    = "nodes-ready"
	CheckDiskSpace     = "disk-space"
	CheckOffline       = "offline-artifacts"
	CheckKubeadmConfig = "kubeadm-config"
)

// NodesReady lists the hosts the cluster keeps whose Node is missing or not Ready. An
// upgrade drains and restarts every node in turn: one already down would make the cluster
// lose two at once.
func NodesReady(ctx context.Context, cs kubernetes.Interface, hosts []bpav1.HostStatus) ([]string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	var bad []string
	for _, h := range hosts {
		n := byName[h.Name]
		if n == nil {
			bad = append(bad, "node "+h.Name+": not registered")
			continue
		}
		if !ready(n) {
			bad = append(bad, "node "+h.Name+": not Ready")
		}
	}
	sort.Strings(bad)
	return bad, nil
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// EtcdMembers are the hosts BPA applied as etcd members (status.applied), by name.
func EtcdMembers(applied []bpav1.HostStatus) []string {
	var out []string
	for _, h := range applied {
		if h.Etcd && !h.Removing {
			out = append(out, h.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Etcd judges etcd before an upgrade, which restarts each member in turn: the apiserver's
// own etcd check (/readyz/etcd: it reaches a quorum) must pass, every member's host must be a
// Ready Node, and the members must tolerate losing one (three or more). A single member
// cannot: BPA lets it through with a warning (the returned string), since a one-master
// cluster has nothing else to fall back on and kubespray upgrades it in place; the apiserver
// is down while its node restarts.
func Etcd(members []string, readyz error, notReady []string) (warning string, err error) {
	if readyz != nil {
		return "", fmt.Errorf("the apiserver's etcd check (/readyz/etcd) fails: %v; restore etcd's health (etcdctl endpoint health --cluster on a member) before upgrading", readyz)
	}
	var down []string
	for _, m := range members {
		for _, n := range notReady {
			if strings.HasPrefix(n, "node "+m+":") {
				down = append(down, m)
			}
		}
	}
	if len(down) > 0 {
		return "", fmt.Errorf("etcd member %s is on a Node that is not Ready: the upgrade restarts each of the %d members in turn and etcd could lose quorum; bring it back first",
			strings.Join(down, ", "), len(members))
	}
	switch len(members) {
	case 0:
		return "", nil // status.applied records no members (a cluster from before BPA kept it): nothing to count
	case 1:
		return fmt.Sprintf("etcd has a single member (%s): it cannot lose one, so the apiserver is unavailable while the upgrade restarts it; add masters (three etcd members) for an upgrade without downtime", members[0]), nil
	}
	return "", nil
}

// DiskCommand is what the disk check runs on each host: the free space of the filesystems
// an upgrade writes to, in POSIX format and 1 KiB blocks (kubespray downloads to /tmp and
// /usr/local/bin, containerd unpacks images under /var/lib).
var DiskCommand = []string{"df", "-Pk", "/", "/var/lib"}

// LowDisk reads DiskCommand's output from host and lists each filesystem with less than min
// available.
func LowDisk(host, out string, min resource.Quantity) ([]string, error) {
	var low []string
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		return nil, fmt.Errorf("host %s: df printed no filesystem", host)
	}
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 6 {
			return nil, fmt.Errorf("host %s: cannot read df's line %q", host, l)
		}
		kb, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("host %s: cannot read df's available %q", host, f[3])
		}
		mount := strings.Join(f[5:], " ")
		if seen[mount] {
			continue
		}
		seen[mount] = true
		if free := resource.NewQuantity(kb*1024, resource.BinarySI); free.Cmp(min) < 0 {
			low = append(low, fmt.Sprintf("host %s: %s free on %s, want %s", host, free, mount, min.String()))
		}
	}
	return low, nil
}
