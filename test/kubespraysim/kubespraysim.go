// Package kubespraysim is a SIMULATED kubespray: a stand-in for `ansible-playbook cluster.yml`
// inside the kubespray image, for the test rig and `make demo`. Everything else in a run is
// real; only kubespray's own work is faked, here and nowhere else.
//
// It does what a kubespray run is observed from outside to do:
//   - it checks the inventory it was given with the real `ansible-inventory`;
//   - it logs in to every inventory host over real SSH with the key and known_hosts the step
//     mounted (as Ansible would);
//   - it leaves an admin.conf on the first control-plane host, which the verify step fetches
//     over SSH;
//   - it registers every host as a Ready Node, and a running kube-system pod, in the
//     "application" apiserver that admin.conf points at.
//
// The binary that embeds it runs Main when invoked under the name ansible-playbook.
package kubespraysim

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// Environment the stand-in kubelet passes to the simulated kubespray.
const (
	// EnvAppKubeconfig is the admin kubeconfig of the application apiserver; it is what the
	// simulation installs as /etc/kubernetes/admin.conf on the first master.
	EnvAppKubeconfig = "BPA_SIM_APP_KUBECONFIG"
	// EnvKubeDirs is a JSON object mapping host IP to the directory that host sees as
	// /etc/kubernetes.
	EnvKubeDirs = "BPA_SIM_KUBE_DIRS"
	// EnvFailFile makes the run fail while the named file exists (failure injection).
	EnvFailFile = "BPA_SIM_FAIL_FILE"
)

// Main runs the simulation with ansible-playbook's arguments and returns the exit code.
func Main(args []string) int {
	if err := run(context.Background(), args, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kubespray (simulated):", err)
		return 2
	}
	return 0
}

type playbookArgs struct {
	inventory, privateKey, user, playbook string
	extraVars                             []string
	become                                bool
}

func parseArgs(args []string) (playbookArgs, error) {
	var a playbookArgs
	fs := flag.NewFlagSet("ansible-playbook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.inventory, "i", "", "")
	fs.StringVar(&a.privateKey, "private-key", "", "")
	fs.StringVar(&a.user, "u", "root", "")
	fs.BoolVar(&a.become, "b", false, "")
	fs.Func("e", "", func(v string) error { a.extraVars = append(a.extraVars, v); return nil })
	if err := fs.Parse(args); err != nil {
		return a, err
	}
	if fs.NArg() != 1 {
		return a, fmt.Errorf("want one playbook, got %q", fs.Args())
	}
	a.playbook = fs.Arg(0)
	if a.inventory == "" || a.privateKey == "" {
		return a, errors.New("-i and --private-key are required")
	}
	return a, nil
}

type inventory struct {
	hosts   map[string]string // name -> ansible_host
	masters []string
}

// readInventory asks the real ansible-inventory what the inventory means.
func readInventory(path string) (*inventory, error) {
	out, err := exec.Command("ansible-inventory", "-i", path, "--list").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("ansible-inventory rejected %s: %s", path, ee.Stderr)
		}
		return nil, fmt.Errorf("running ansible-inventory: %w", err)
	}
	var list map[string]json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, err
	}
	var meta struct {
		HostVars map[string]map[string]any `json:"hostvars"`
	}
	_ = json.Unmarshal(list["_meta"], &meta)
	inv := &inventory{hosts: map[string]string{}}
	for name, vars := range meta.HostVars {
		ip, _ := vars["ansible_host"].(string)
		inv.hosts[name] = ip
	}
	for _, group := range []string{"kube_control_plane", "kube-master"} {
		var g struct {
			Hosts []string `json:"hosts"`
		}
		if raw, ok := list[group]; ok && json.Unmarshal(raw, &g) == nil && len(g.Hosts) > 0 {
			inv.masters = g.Hosts
			sort.Strings(inv.masters)
			break
		}
	}
	if len(inv.hosts) == 0 || len(inv.masters) == 0 {
		return nil, fmt.Errorf("inventory %s has no hosts or no control-plane group", path)
	}
	return inv, nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	a, err := parseArgs(args)
	if err != nil {
		return fmt.Errorf("ansible-playbook arguments: %w", err)
	}
	inv, err := readInventory(a.inventory)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "SIMULATED kubespray %s: %d hosts, control plane %v\n", a.playbook, len(inv.hosts), inv.masters)
	pl := &play{out: out, recap: map[string]*[4]int{}}
	fmt.Fprintf(out, "\nPLAY [k8s_cluster] %s\n", stars(""))
	defer pl.printRecap(inv.names())

	pl.task("Gathering Facts")
	if err := loginEverywhere(ctx, a, inv, pl); err != nil {
		return err
	}
	first := inv.masters[0]
	pl.task("kubernetes/control-plane : kubeadm init")
	if f := os.Getenv(EnvFailFile); f != "" {
		if _, err := os.Stat(f); err == nil {
			msg := fmt.Sprintf("injected failure (%s exists)", f)
			pl.fatal(first, "FAILED!", msg)
			return fmt.Errorf("TASK [kubernetes/control-plane : kubeadm init] fatal: %s", msg)
		}
	}
	appKubeconfig, err := os.ReadFile(os.Getenv(EnvAppKubeconfig))
	if err != nil {
		return fmt.Errorf("reading the application cluster's kubeconfig: %w", err)
	}
	var dirs map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(EnvKubeDirs)), &dirs); err != nil {
		return fmt.Errorf("%s: %w", EnvKubeDirs, err)
	}
	dir, ok := dirs[inv.hosts[first]]
	if !ok {
		return fmt.Errorf("no simulated host at %s (%s)", inv.hosts[first], first)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.conf"), appKubeconfig, 0o600); err != nil {
		return err
	}
	pl.result(first, true)
	pl.task("kubernetes/kubeadm : Join to cluster")
	if err := registerNodes(ctx, appKubeconfig, inv); err != nil {
		return err
	}
	for _, n := range inv.names() {
		pl.result(n, true)
	}
	return nil
}

func (inv *inventory) names() []string {
	names := make([]string, 0, len(inv.hosts))
	for n := range inv.hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// play prints what ansible-playbook prints (task headers, a line per host, the recap), so
// the step's log reads like a kubespray run's.
type play struct {
	out   io.Writer
	recap map[string]*[4]int // ok, changed, unreachable, failed
}

func stars(title string) string { return strings.Repeat("*", max(3, 72-len(title))) }

func (p *play) task(name string) { fmt.Fprintf(p.out, "\nTASK [%s] %s\n", name, stars(name)) }

func (p *play) count(host string, i int) {
	if p.recap[host] == nil {
		p.recap[host] = &[4]int{}
	}
	p.recap[host][i]++
}

func (p *play) result(host string, changed bool) {
	if changed {
		fmt.Fprintf(p.out, "changed: [%s]\n", host)
		p.count(host, 1)
	} else {
		fmt.Fprintf(p.out, "ok: [%s]\n", host)
	}
	p.count(host, 0)
}

// fatal reports a host's failure; kind is "FAILED!" or "UNREACHABLE!".
func (p *play) fatal(host, kind, msg string) {
	m, _ := json.Marshal(map[string]any{"changed": false, "msg": msg})
	fmt.Fprintf(p.out, "fatal: [%s]: %s => %s\n", host, kind, m)
	if kind == "UNREACHABLE!" {
		p.count(host, 2)
	} else {
		p.count(host, 3)
	}
}

func (p *play) printRecap(hosts []string) {
	fmt.Fprintf(p.out, "\nPLAY RECAP %s\n", stars("RECAP"))
	for _, h := range hosts {
		c := p.recap[h]
		if c == nil {
			c = &[4]int{}
		}
		fmt.Fprintf(p.out, "%-24s : ok=%d changed=%d unreachable=%d failed=%d skipped=0 rescued=0 ignored=0\n", h, c[0], c[1], c[2], c[3])
	}
}

// loginEverywhere proves the key and known_hosts work for every host, as Ansible's first
// task would.
func loginEverywhere(ctx context.Context, a playbookArgs, inv *inventory, pl *play) error {
	port := 22
	knownHosts, insecure := "", true
	for _, e := range a.extraVars {
		// run-kubespray passes its connection settings as one inline JSON object.
		var vars struct {
			Port       int    `json:"ansible_port"`
			CommonArgs string `json:"ansible_ssh_common_args"`
		}
		if !strings.HasPrefix(e, "{") || json.Unmarshal([]byte(e), &vars) != nil {
			continue
		}
		if vars.Port != 0 {
			port = vars.Port
		}
		if i := strings.Index(vars.CommonArgs, "UserKnownHostsFile="); i >= 0 {
			knownHosts = strings.Fields(vars.CommonArgs[i+len("UserKnownHostsFile="):])[0]
			insecure = knownHosts == "/dev/null"
		}
	}
	for _, n := range inv.names() {
		cfg := sshexec.Config{User: a.user, Port: port, KeyFile: a.privateKey, KnownHostsFile: knownHosts, InsecureIgnoreHostKey: insecure, ConnectTimeout: 10 * time.Second}
		c, err := sshexec.Dial(ctx, inv.hosts[n], cfg)
		if err != nil {
			pl.fatal(n, "UNREACHABLE!", err.Error())
			return fmt.Errorf("fatal: [%s]: UNREACHABLE! %v", n, err)
		}
		_, err = c.Output(ctx, []string{"true"})
		c.Close()
		if err != nil {
			pl.fatal(n, "FAILED!", err.Error())
			return fmt.Errorf("fatal: [%s]: %v", n, err)
		}
		pl.result(n, false)
	}
	return nil
}

func registerNodes(ctx context.Context, kubeconfig []byte, inv *inventory) error {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for name, ip := range inv.hosts {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if _, err := kc.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering node %s: %w", name, err)
		}
		node, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("marking node %s Ready: %w", name, err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + inv.masters[0], Namespace: "kube-system"},
		Spec:       corev1.PodSpec{NodeName: inv.masters[0], Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver"}}},
	}
	if _, err := kc.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod, err = kc.CoreV1().Pods("kube-system").Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Phase = corev1.PodRunning
	_, err = kc.CoreV1().Pods("kube-system").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}
