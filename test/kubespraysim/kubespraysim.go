// Package kubespraysim is a SIMULATED kubespray: a stand-in for `ansible-playbook cluster.yml`
// inside the kubespray image, for the test rig and `make demo`. Everything else in a run is
// real; only kubespray's own work is faked, here and nowhere else.
//
// Before it "runs" anything it refuses what real kubespray refuses, in kubespray's words,
// with the rules of pkg/kubespray (the release's profile, from the image's tag): the
// inventory assertions (odd etcd, empty groups, typed booleans, version format and range,
// subnets), each playbook's required variables and confirmations, the first control-plane
// host that remove-node.yml cannot remove, and a --limit without facts cached by an earlier
// run in the same container (kubespray's ansible.cfg caches facts as JSON under /tmp).
//
// Then it does what a kubespray run is observed from outside to do:
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
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
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
	// EnvImage is the kubespray image the container runs: its tag picks the release's
	// rules (kubespray.DefaultVersion when unset).
	EnvImage = "BPA_SIM_KUBESPRAY_IMAGE"
	// EnvFactsDir is the container's facts cache (kubespray's fact_caching_connection, /tmp
	// when unset): one file per host, written by every run that gathers facts.
	EnvFactsDir = "BPA_SIM_FACTS_DIR"
	// EnvRecordDir, when set, receives each run as kubespray.OperationDir(n, op) with the
	// argv.json, hosts.ini and vars.yaml it was given: the shape `bpa plan -o` writes.
	EnvRecordDir = "BPA_SIM_RECORD_DIR"
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
	inventory, privateKey, user, playbook, limit string
	extraVars                                    []string
	become                                       bool
}

func parseArgs(args []string) (playbookArgs, error) {
	var a playbookArgs
	fs := flag.NewFlagSet("ansible-playbook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.inventory, "i", "", "")
	fs.StringVar(&a.privateKey, "private-key", "", "")
	fs.StringVar(&a.user, "u", "root", "")
	fs.StringVar(&a.limit, "limit", "", "")
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
	groups  kubespray.Inventory
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
	inv.groups = groups(list)
	inv.masters = inv.groups["kube_control_plane"]
	if len(inv.hosts) == 0 || len(inv.masters) == 0 {
		return nil, fmt.Errorf("inventory %s has no hosts or no control-plane group", path)
	}
	return inv, nil
}

// groups reads each group's hosts from `ansible-inventory --list` (children resolved), as
// kubespray's boilerplate.yml sees them: legacy names (kube-master, ...) mapped to today's.
func groups(list map[string]json.RawMessage) kubespray.Inventory {
	type group struct {
		Hosts    []string `json:"hosts"`
		Children []string `json:"children"`
	}
	var resolve func(name string, depth int) []string
	resolve = func(name string, depth int) []string {
		var g group
		if raw, ok := list[name]; !ok || depth > 8 || json.Unmarshal(raw, &g) != nil {
			return nil
		}
		hosts := append([]string(nil), g.Hosts...)
		for _, c := range g.Children {
			hosts = append(hosts, resolve(c, depth+1)...)
		}
		return hosts
	}
	inv := kubespray.Inventory{}
	for name := range list {
		if name == "_meta" {
			continue
		}
		hosts := resolve(name, 0)
		if to, legacy := kubespray.LegacyGroups[name]; legacy {
			name = to
		}
		inv[name] = uniqueSorted(append(inv[name], hosts...))
	}
	return inv
}

func uniqueSorted(l []string) []string {
	sort.Strings(l)
	return slices.Compact(l)
}

// readVars merges the play's extra variables as ansible-playbook does, later -e winning:
// @file (the YAML render-inventory writes), JSON objects and key=value pairs.
func readVars(extra []string) (map[string]any, string, error) {
	vars, file := map[string]any{}, ""
	for _, e := range extra {
		var m map[string]any
		switch {
		case strings.HasPrefix(e, "@"):
			file = e[1:]
			data, err := os.ReadFile(file)
			if err != nil {
				return nil, "", fmt.Errorf("ERROR! could not load extra vars %s: %w", file, err)
			}
			if m, err = bpainventory.ReadVars(data); err != nil {
				return nil, "", fmt.Errorf("ERROR! %s: %w", file, err)
			}
		case strings.HasPrefix(e, "{"):
			dec := json.NewDecoder(strings.NewReader(e))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				return nil, "", fmt.Errorf("ERROR! invalid extra vars %q: %w", e, err)
			}
		default:
			m = map[string]any{}
			for _, kv := range strings.Fields(e) {
				k, v, _ := strings.Cut(kv, "=")
				m[k] = v
			}
		}
		for k, v := range m {
			vars[k] = v
		}
	}
	return vars, file, nil
}

// Play is a run that passed kubespray's checks.
type Play struct {
	a        playbookArgs
	profile  *kubespray.Profile
	patch    int
	op       kubespray.Operation
	inv      *inventory
	factsDir string
}

// Check does what happens before kubespray touches a host: it reads the arguments, the
// vars and (with the real ansible-inventory) the inventory, records the run when asked, and
// refuses what kubespray refuses. Tests of `bpa plan`'s output use it alone.
func Check(args []string) (*Play, error) {
	a, err := parseArgs(args)
	if err != nil {
		return nil, fmt.Errorf("ansible-playbook arguments: %w", err)
	}
	image := os.Getenv(EnvImage)
	if image == "" {
		image = "quay.io/kubespray/kubespray:" + kubespray.DefaultVersion
	}
	profile, patch, err := kubespray.ProfileForImage(image)
	if err != nil {
		return nil, err
	}
	op := kubespray.Operation{}
	pb, ok := profile.PlaybookOf(a.playbook)
	if !ok {
		return nil, fmt.Errorf("ERROR! the playbook: %s could not be found (kubespray %s)", a.playbook, profile.Minor)
	}
	op.Playbook = pb
	if a.limit != "" {
		op.Limit = strings.Split(a.limit, ",")
	}
	vars, varsFile, err := readVars(a.extraVars)
	if err != nil {
		return nil, err
	}
	if err := record(args, op, a.inventory, varsFile); err != nil {
		return nil, err
	}
	inv, err := readInventory(a.inventory)
	if err != nil {
		return nil, err
	}
	factsDir := os.Getenv(EnvFactsDir)
	if factsDir == "" {
		factsDir = "/tmp"
	}
	cached := func(h string) bool {
		data, err := os.ReadFile(filepath.Join(factsDir, h))
		var facts map[string]any
		return err == nil && json.Unmarshal(data, &facts) == nil && facts["ansible_default_ipv4"] != nil
	}
	if errs := profile.CheckPlaybook(op, inv.groups, vars, patch, cached); len(errs) > 0 {
		return nil, fmt.Errorf("SIMULATED kubespray %s.%d refuses what kubespray refuses: %w", profile.Minor, patch, errs[0])
	}
	return &Play{a: a, profile: profile, patch: patch, op: op, inv: inv, factsDir: factsDir}, nil
}

// CacheFacts stores the facts of the hosts the play runs on in the container's facts cache,
// as every playbook but reset.yml gathers them (facts.yml).
func (pl *Play) CacheFacts() error {
	if pl.op.Playbook == kubespray.Reset {
		return nil
	}
	for _, h := range pl.inv.groups.Hosts(pl.op.Limit) {
		facts, _ := json.Marshal(map[string]any{"ansible_default_ipv4": map[string]string{"address": pl.inv.hosts[h]}})
		if err := os.WriteFile(filepath.Join(pl.factsDir, h), facts, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, args []string, out io.Writer) error {
	checked, err := Check(args)
	if err != nil {
		return err
	}
	a, inv, pb := checked.a, checked.inv, checked.op.Playbook
	profile, patch := checked.profile, checked.patch
	fmt.Fprintf(out, "SIMULATED kubespray %s.%d %s: %d hosts, control plane %v\n", profile.Minor, patch, a.playbook, len(inv.hosts), inv.masters)
	pl := &play{out: out, recap: map[string]*[4]int{}}
	fmt.Fprintf(out, "\nPLAY [k8s_cluster] %s\n", stars(""))
	defer pl.printRecap(inv.names())

	pl.task("Gathering Facts")
	if err := loginEverywhere(ctx, a, inv, pl); err != nil {
		return err
	}
	if err := checked.CacheFacts(); err != nil {
		return err
	}
	if pb != kubespray.Cluster && pb != kubespray.Scale && pb != kubespray.Upgrade {
		return nil
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

// record keeps what the run was given, when EnvRecordDir asks, in the layout of `bpa plan -o`.
func record(args []string, op kubespray.Operation, inventoryFile, varsFile string) error {
	dir := os.Getenv(EnvRecordDir)
	if dir == "" {
		return nil
	}
	done, err := filepath.Glob(filepath.Join(dir, "[0-9][0-9]-*"))
	if err != nil {
		return err
	}
	dir = filepath.Join(dir, kubespray.OperationDir(len(done), op))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	argv, _ := json.MarshalIndent(append([]string{"ansible-playbook"}, args...), "", "  ")
	files := map[string][]byte{"argv.json": append(argv, '\n')}
	for name, src := range map[string]string{"hosts.ini": inventoryFile, "vars.yaml": varsFile} {
		if src == "" {
			continue
		}
		if files[name], err = os.ReadFile(src); err != nil {
			return err
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
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
