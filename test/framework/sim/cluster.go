package sim

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// Cluster is a cluster the stand-in kubespray built with cluster.yml, run from the test
// process, on machines of a bridge of the test's own, without a node or a BPA controller:
// for tests of one step against a cluster's hosts. Its machines front an application
// apiserver (apiServerPod) and serve its etcd (serveAppEtcd) as a Site's do.
type Cluster struct {
	App *rig.AppAPIServer
	SSH *simhost.Cluster
	// Machines by name; Hosts as status.applied lists them, with their addresses.
	Machines map[string]*simhost.Host
	Hosts    []bpav1.HostStatus
	// Container is what the playbooks' runs are given; Ini their inventory.
	Container kubespraysim.Container
	Ini       string
}

// ClusterOptions say what StartCluster builds.
type ClusterOptions struct {
	// Bridge is the name of a bridge the test makes (and removes at its end) at CIDR (the
	// bridge's address and prefix, e.g. 10.215.0.1/24): one no other test on the machine
	// uses. Its machines get the addresses after the bridge's, in Hosts' order.
	Bridge, CIDR string
	// Hosts are the machines by name, with their roles and etcd membership.
	Hosts []bpav1.HostStatus
}

// StartCluster starts the machines and the application apiserver and etcd, and runs the
// stand-in's cluster.yml on them. The admin.conf it gives the control-plane hosts names the
// first master's address, as a kubeadm cluster's names an address of the control plane.
func StartCluster(t framework.T, ctx context.Context, o ClusterOptions) *Cluster {
	t.Helper()
	gw, subnet, err := net.ParseCIDR(o.CIDR)
	must(t, err, "the bridge's CIDR")
	makeBridge(t, o.Bridge, o.CIDR)
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	app, err := r.StartAppAPIServerFor(ctx, "app", subnet)
	must(t, err, "the application apiserver")
	agent, err := kubespraysim.BuildAgent()
	must(t, err, "the stand-in's agent")
	c := &Cluster{App: app, SSH: simhost.NewCluster(t), Machines: map[string]*simhost.Host{}}
	dirs := map[string]string{}
	for i, h := range o.Hosts {
		ip := slices.Clone(gw.To4())
		ip[3] += byte(1 + i)
		m := c.SSH.StartOn(h.Name, simhost.Network{Bridge: o.Bridge, Address: &net.IPNet{IP: ip, Mask: subnet.Mask}})
		must(t, serveAppAPIServer(m, app), "machine "+h.Name+" fronting the application apiserver")
		must(t, serveAppEtcd(t, m, app.Etcd), "machine "+h.Name+" serving the application etcd")
		addKubeletUnits(m)
		h.IP = m.IP
		c.Machines[h.Name], dirs[m.IP] = m, m.KubernetesDir()
		c.Hosts = append(c.Hosts, h)
	}
	c.startNodeHealth(t)
	ini, _, err := inventory.Render(c.Hosts, inventory.Options{})
	must(t, err, "the inventory")
	dir := t.TempDir()
	etcdDir := filepath.Join(dir, "app-etcd")
	must(t, writeAppEtcdFiles(app.Etcd, etcdDir), "the application etcd's files")
	kubeconfig, err := app.KubeconfigFor(firstMaster(c.Hosts))
	must(t, err, "the admin kubeconfig")
	c.Container = kubespraysim.Container{AppKubeconfig: filepath.Join(dir, "admin.conf"), AppEtcdDir: etcdDir, KubeDirs: dirs, Agent: agent}
	must(t, os.WriteFile(c.Container.AppKubeconfig, kubeconfig, 0o600), "the admin kubeconfig")
	c.Ini = string(ini)
	start := time.Now()
	runPlaybook(t, ctx, c.SSH, c.Ini, c.Container, "cluster.yml", "")
	t.Logf("cluster.yml on %d machines in %s", len(o.Hosts), time.Since(start).Round(100*time.Millisecond))
	return c
}

// startNodeHealth starts the machines' simulated kubelets and the application cluster's
// node-lifecycle controller (startKubelets, rig.AppAPIServer.StartNodeLifecycle).
func (c *Cluster) startNodeHealth(t framework.T) {
	byIP := map[string]*simhost.Host{}
	for _, m := range c.Machines {
		byIP[m.IP] = m
	}
	startKubelets(t, c.App, func(ip string) *simhost.Host { return byIP[ip] })
	_, err := c.App.StartNodeLifecycle()
	must(t, err, "the application cluster's node-lifecycle controller")
}

func firstMaster(hosts []bpav1.HostStatus) string {
	for _, h := range hosts {
		if slices.Contains(h.Roles, "master") {
			return h.IP
		}
	}
	return ""
}

// makeBridge makes the bridge name at cidr, removed when t ends.
func makeBridge(t framework.T, name, cidr string) {
	t.Helper()
	for _, args := range [][]string{
		{"link", "add", name, "type", "bridge"},
		{"addr", "add", cidr, "dev", name},
		{"link", "set", name, "up"},
	} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s (a bridge left by an earlier run? ip link del %s)", args, err, out, name)
		}
		if args[1] == "add" && args[0] == "link" {
			t.Cleanup(func() { _ = exec.Command("ip", "link", "del", name).Run() })
		}
	}
}

// runPlaybook runs the stand-in's playbook with BPA's argv for ini on the hosts, as a
// run-kubespray container of a site would (kubespraysim.Container), from the test process.
func runPlaybook(t framework.T, ctx context.Context, sim *simhost.Cluster, ini string, c kubespraysim.Container, playbook, playbookVars string) {
	t.Helper()
	dir := t.TempDir()
	varsYAML, err := inventory.MarshalVars(map[string]any{})
	must(t, err, "vars")
	o := kubespray.DefaultRunOptions()
	o.Inventory, o.ExtraVars = filepath.Join(dir, "hosts.ini"), filepath.Join(dir, "vars.yaml")
	must(t, os.WriteFile(o.Inventory, []byte(ini), 0o644), "hosts.ini")
	must(t, os.WriteFile(o.ExtraVars, varsYAML, 0o644), "vars.yaml")
	o.SSHKey, o.KnownHosts, o.SSHPort, o.Playbook = sim.ClientKeyPath(), sim.KnownHostsPath(), sim.Hosts()[0].Port, playbook
	o.PlaybookVars = playbookVars
	inv, err := kubespray.Build(o, "ansible-playbook", os.Environ())
	must(t, err, "kubespray's argv")
	control, err := kubespraysim.NewControlDir()
	must(t, err, "ssh's control dir")
	t.Cleanup(func() { kubespraysim.StopSSHMasters(control) })
	c.Image, c.Tmp, c.ControlDir = o.KubesprayImage, t.TempDir(), control
	env, err := c.Env()
	must(t, err, "the container's environment")
	tree, err := kubespraysim.Tree()
	must(t, err, "the stand-in's tree")
	cmd := exec.CommandContext(ctx, "ansible-playbook", inv.Args[1:]...)
	cmd.Dir, cmd.Env = tree, slices.Concat(inv.Env, env, []string{"ANSIBLE_NOCOLOR=1"})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", playbook, err, out)
	}
}

// RunPlaybook runs the stand-in's playbook (with its -e JSON, or "") on the cluster.
func (c *Cluster) RunPlaybook(t framework.T, ctx context.Context, playbook, vars string) {
	t.Helper()
	runPlaybook(t, ctx, c.SSH, c.Ini, c.Container, playbook, vars)
}
