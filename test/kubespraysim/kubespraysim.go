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
// Then it does what a kubespray run is observed from outside to do, on the hosts the run
// covers (its --limit of host and group names, as Ansible reads it; remove-node.yml: the
// nodes of -e node) and only those:
//   - it checks the inventory it was given with the real `ansible-inventory`;
//   - it logs in to each host it covers over real SSH with the key and known_hosts the step
//     mounted (as Ansible would), and fails UNREACHABLE, before changing anything, when one
//     does not answer. remove-node.yml logs in to the first control-plane host (kubespray
//     runs kubectl there) and, unless reset_nodes=false, to the nodes it removes: a dead
//     node removed with reset_nodes=false allow_ungraceful_removal=true is never dialled;
//   - at an offline site (spec.offline), cluster.yml, scale.yml and upgrade-cluster.yml
//     fetch every file and image manifest of the release on each host they cover, with the
//     host's curl and trust (offline.go);
//   - cluster.yml leaves an admin.conf on the first control-plane host, which the verify
//     step fetches over SSH, and runs a kube-system pod there;
//   - cluster.yml and scale.yml register each host as a Ready Node in the "application"
//     apiserver that admin.conf points at, reporting kube_version (the release's newest when
//     unset) as its kubelet version; upgrade-cluster.yml raises that version;
//   - remove-node.yml cordons each node, evicts the pods bound to it, and deletes its Node
//     (a dead node's Node is deleted without draining);
//   - cluster.yml, scale.yml and upgrade-cluster.yml write the apiserver proxy of each host
//     they cover that is not a control-plane host (ProxyFile): its upstreams are the
//     control-plane hosts of the inventory the run was given;
//   - reset.yml deletes the hosts' Nodes and removes admin.conf;
//   - each host it changed gets a line in its log (HostLog), which e2e tests read to see
//     which hosts a change touched.
//
// EnvFailFile injects a failure after the logins and before any change, so a retried run
// repeats nothing a failed one did.
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
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// EnvFailFile makes runs fail while the named file exists (failure injection): when it
	// is empty, every playbook but facts.yml; when it lists playbooks (whitespace-separated,
	// by path as run, e.g. scale.yml, or by name, e.g. scale), only those.
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
	vars     map[string]any // the -e variables, merged
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
	return &Play{a: a, profile: profile, patch: patch, op: op, inv: inv, vars: vars, factsDir: factsDir}, nil
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
	p, err := Check(args)
	if err != nil {
		return err
	}
	inv, pb := p.inv, p.op.Playbook
	fmt.Fprintf(out, "SIMULATED kubespray %s.%d %s: %d hosts, control plane %v\n", p.profile.Minor, p.patch, p.a.playbook, len(inv.hosts), inv.masters)
	pl := &play{out: out, recap: map[string]*[4]int{}}
	fmt.Fprintf(out, "\nPLAY [k8s_cluster] %s\n", stars(""))
	defer pl.printRecap(inv.names())

	targets, logins, err := p.hostsOf()
	if err != nil {
		return err
	}
	pl.task("Gathering Facts")
	var fetched, bytes int64
	err = login(ctx, p.a, inv, logins, pl, func(h string, c *sshexec.Client) error {
		n, err := p.offlineFetch(ctx, h, c)
		if n > 0 {
			fetched, bytes = fetched+1, bytes+n
		}
		return err
	})
	if err != nil {
		return err
	}
	if fetched > 0 {
		repo, _ := p.vars[kubespray.FilesRepoVar].(string)
		fmt.Fprintf(out, "offline: %d hosts downloaded every file and image manifest (%d bytes) from %s\n", fetched, bytes, repo)
	}
	// Every playbook but reset.yml caches the facts of the hosts it logged in to.
	if pb != kubespray.Reset {
		for _, h := range logins {
			facts, _ := json.Marshal(map[string]any{"ansible_default_ipv4": map[string]string{"address": inv.hosts[h]}})
			if err := os.WriteFile(filepath.Join(p.factsDir, h), facts, 0o644); err != nil {
				return err
			}
		}
	}
	// An injected failure comes before any change, so a retry repeats nothing that was done.
	if msg := p.injectedFailure(); msg != "" {
		pl.task(failedTask[pb])
		pl.fatal(targets[0], "FAILED!", msg)
		return fmt.Errorf("TASK [%s] fatal: [%s]: FAILED! %s", failedTask[pb], targets[0], msg)
	}
	if pb == kubespray.Facts {
		return nil // it only reads: nothing to log
	}
	s, err := p.site(targets, pl)
	if err != nil {
		return err
	}
	switch pb {
	case kubespray.Cluster, kubespray.Scale:
		if err := s.join(ctx, targets); err != nil {
			return err
		}
		return s.proxies(targets)
	case kubespray.Upgrade:
		if err := s.upgrade(ctx, targets); err != nil {
			return err
		}
		return s.proxies(targets)
	case kubespray.Remove:
		return s.remove(ctx, targets)
	default:
		return s.reset(ctx, targets)
	}
}

// failedTask is the task an injected failure is reported in.
var failedTask = map[kubespray.Playbook]string{
	kubespray.Facts: "Gather minimal facts", kubespray.Cluster: "kubernetes/control-plane : kubeadm init",
	kubespray.Scale: "kubernetes/kubeadm : Join to cluster", kubespray.Upgrade: "upgrade/pre-upgrade : Drain node",
	kubespray.Remove: "remove-node/pre-remove : Drain node", kubespray.Reset: "reset : reset | kubeadm reset",
}

// hostsOf returns the hosts the run changes and the hosts it logs in to. Every playbook
// runs on its --limit (every host without one), but remove-node.yml on the nodes of -e node,
// from the first control-plane host (kubectl is delegated there) and, unless
// reset_nodes=false, on the nodes themselves, which a dead node cannot be.
func (p *Play) hostsOf() (targets, logins []string, err error) {
	if p.op.Playbook != kubespray.Remove {
		targets = p.inv.groups.Hosts(p.op.Limit)
		if len(targets) == 0 {
			return nil, nil, errors.New("ERROR! Specified inventory, host pattern and/or --limit leaves us with no hosts to target.")
		}
		return targets, targets, nil
	}
	node, _ := p.vars["node"].(string)
	for _, n := range strings.Split(node, ",") {
		if _, ok := p.inv.hosts[n]; !ok {
			// Ansible would skip it with a warning; a plan that asks for it is wrong.
			return nil, nil, fmt.Errorf("remove-node.yml: node %s is not in the inventory (kubespray removes nodes that are still in it)", n)
		}
		if len(p.op.Limit) == 0 || slices.Contains(p.inv.groups.Hosts(p.op.Limit), n) {
			targets = append(targets, n)
		}
	}
	if len(targets) == 0 {
		return nil, nil, errors.New("ERROR! Specified inventory, host pattern and/or --limit leaves us with no hosts to target.")
	}
	logins = []string{p.inv.masters[0]}
	if p.boolVar("reset_nodes", true) {
		logins = append(logins, targets...)
	}
	return targets, logins, nil
}

// boolVar reads a variable as Ansible's bool filter does, def when unset.
func (p *Play) boolVar(name string, def bool) bool {
	switch v := p.vars[name].(type) {
	case bool:
		return v
	case string:
		return slices.Contains([]string{"yes", "on", "1", "true", "y"}, strings.ToLower(v))
	}
	return def
}

// injectedFailure is the message of the failure EnvFailFile asks for, or "": while the file
// exists, an empty file fails every playbook but facts.yml, and a file that lists
// playbooks (whitespace-separated, by path as run, e.g. scale.yml, or by name, e.g. scale)
// fails only those.
func (p *Play) injectedFailure() string {
	f := os.Getenv(EnvFailFile)
	if f == "" {
		return ""
	}
	data, err := os.ReadFile(f)
	if err != nil {
		return ""
	}
	names := strings.Fields(string(data))
	switch {
	case len(names) == 0 && p.op.Playbook != kubespray.Facts:
		return fmt.Sprintf("injected failure (%s exists)", f)
	case slices.Contains(names, p.a.playbook) || slices.Contains(names, string(p.op.Playbook)):
		return fmt.Sprintf("injected failure (%s names %s)", f, p.a.playbook)
	}
	return ""
}

// kubeletVersion is what the run installs, as a Node reports it (v1.x.y): kube_version from
// the vars (with or without v, per release), or the release's default.
func (p *Play) kubeletVersion() string {
	v := p.profile.DefaultKube(p.patch)
	if s, ok := p.vars["kube_version"].(string); ok {
		if kv, err := kubespray.ParseKubeVersion(s); err == nil {
			v = kv
		}
	}
	return "v" + v.String()
}

// HostLogFile is the file, in the directory a simulated host sees as /etc/kubernetes, where
// the simulated kubespray logs what each run did to that host (see HostLog).
const HostLogFile = "kubespray.log"

// Entry is one run's line in a host's log.
type Entry struct {
	// Playbook is the playbook as run: cluster.yml, scale.yml, remove-node.yml, ...
	Playbook string `json:"playbook"`
	// Limit is the run's --limit, empty for none.
	Limit []string `json:"limit,omitempty"`
	// Did says what the run did to the host, one of (versions as the Node reports them):
	//   - cluster.yml, scale.yml: "joined, kubelet v1.32.5", or "reconfigured, kubelet
	//     v1.32.5" for a host already registered; on the first control-plane host cluster.yml
	//     prefixes "kubeadm init (admin.conf written), ";
	//   - upgrade-cluster.yml: "upgraded, kubelet v1.32.5 -> v1.32.8";
	//   - remove-node.yml: "cordoned, drained 2 pods (grace period 300, timeout 360s,
	//     retries 3), Node deleted, reset" (", not reset" with reset_nodes=false); with
	//     reset_nodes=false and allow_ungraceful_removal=true (a dead host, never logged in
	//     to) "removed ungracefully, not drained, Node deleted, not reset"; a node no longer
	//     registered (a retried removal) "not registered: nothing to drain or delete, reset";
	//   - reset.yml: "reset, Node deleted", plus ", admin.conf removed" on the first
	//     control-plane host.
	Did string `json:"did"`
}

// HostLog reads the log of the simulated host whose /etc/kubernetes is dir: a line per run
// that changed the host, oldest first. The simulation writes it from outside the host, so a
// dead host's log records its removal too. playbooks/facts.yml only reads, so it logs nothing; a
// run that failed logs nothing for the hosts it had not changed yet, and an injected
// failure comes before any change. No log yet is an empty one.
func HostLog(dir string) ([]Entry, error) {
	data, err := os.ReadFile(filepath.Join(dir, HostLogFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, HostLogFile), err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// site is what a run changes: the application cluster, and each host's /etc/kubernetes.
type site struct {
	p          *Play
	pl         *play
	kubeconfig []byte
	kc         kubernetes.Interface
	dirs       map[string]string // host name -> its /etc/kubernetes
}

// site reads the simulation's environment and finds every target's directory, before any
// change.
func (p *Play) site(targets []string, pl *play) (*site, error) {
	s := &site{p: p, pl: pl, dirs: map[string]string{}}
	var err error
	if s.kubeconfig, err = os.ReadFile(os.Getenv(EnvAppKubeconfig)); err != nil {
		return nil, fmt.Errorf("reading the application cluster's kubeconfig: %w", err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	if s.kc, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	var byIP map[string]string
	if err := json.Unmarshal([]byte(os.Getenv(EnvKubeDirs)), &byIP); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvKubeDirs, err)
	}
	for _, h := range targets {
		ip := p.inv.hosts[h]
		if s.dirs[h] = byIP[ip]; s.dirs[h] == "" {
			return nil, fmt.Errorf("no simulated host at %s (%s)", ip, h)
		}
	}
	return s, nil
}

// done logs what the run did to host, in its log and as Ansible's "changed".
func (s *site) done(host, did string) error {
	line, _ := json.Marshal(Entry{Playbook: s.p.a.playbook, Limit: s.p.op.Limit, Did: did})
	f, err := os.OpenFile(filepath.Join(s.dirs[host], HostLogFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	s.pl.result(host, true)
	return err
}

// join is cluster.yml and scale.yml: cluster.yml leaves admin.conf on the first
// control-plane host when it runs there; both register each host as a Ready Node running
// the vars' Kubernetes.
func (s *site) join(ctx context.Context, targets []string) error {
	first, version := s.p.inv.masters[0], s.p.kubeletVersion()
	initialised := s.p.op.Playbook == kubespray.Cluster && slices.Contains(targets, first)
	if initialised {
		s.pl.task("kubernetes/control-plane : kubeadm init")
		if err := os.WriteFile(filepath.Join(s.dirs[first], "admin.conf"), s.kubeconfig, 0o600); err != nil {
			return err
		}
		if err := s.controlPlanePod(ctx, first); err != nil {
			return err
		}
	}
	s.pl.task("kubernetes/kubeadm : Join to cluster")
	for _, h := range targets {
		created, err := s.registerNode(ctx, h, version)
		if err != nil {
			return err
		}
		did := "reconfigured, kubelet " + version
		if created {
			did = "joined, kubelet " + version
		}
		if initialised && h == first {
			did = "kubeadm init (admin.conf written), " + did
		}
		if err := s.done(h, did); err != nil {
			return err
		}
	}
	return nil
}

// ProxyFile is the file, in the directory a simulated host sees as /etc/kubernetes, that
// stands for the apiserver proxy kubespray runs on a node (roles/kubernetes/node/tasks/
// main.yml, "Install nginx-proxy" / "Install haproxy": on hosts outside kube_control_plane,
// with the default kube_apiserver_bind_address, when loadbalancer_apiserver_localhost, the
// default without loadbalancer_apiserver). Its upstreams are written as nginx.conf.j2 does:
// every host of groups['kube_control_plane'] at port 6443. The static pod carries the
// config's checksum (nginx-cfg-checksum), so the kubelet restarts the proxy when they
// change; that is why no separate restart is modelled (or needed).
const ProxyFile = "manifests/apiserver-proxy.json"

// Proxy is a host's apiserver proxy: its kind (nginx or haproxy) and upstreams, each
// "<host> <address>:6443".
type Proxy struct {
	Type      string   `json:"type"`
	Upstreams []string `json:"upstreams"`
}

// ReadProxy reads the proxy of the simulated host whose /etc/kubernetes is dir; none yet is
// the zero Proxy.
func ReadProxy(dir string) (Proxy, error) {
	var p Proxy
	data, err := os.ReadFile(filepath.Join(dir, ProxyFile))
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	return p, err
}

// proxies writes the apiserver proxy of each target that runs one (see ProxyFile).
func (s *site) proxies(targets []string) error {
	_, external := s.p.vars["loadbalancer_apiserver"]
	kind, _ := s.p.varOr("loadbalancer_apiserver_type", "nginx").(string)
	if external || !s.p.boolVar("loadbalancer_apiserver_localhost", true) || (kind != "nginx" && kind != "haproxy") {
		return nil
	}
	proxy := Proxy{Type: kind}
	for _, m := range s.p.inv.masters {
		proxy.Upstreams = append(proxy.Upstreams, fmt.Sprintf("%s %s:6443", m, s.p.inv.hosts[m]))
	}
	data, err := json.Marshal(proxy)
	if err != nil {
		return err
	}
	s.pl.task("kubernetes/node : " + map[string]string{"nginx": "Nginx-proxy", "haproxy": "Haproxy"}[kind] + " | Write static pod")
	for _, h := range targets {
		if slices.Contains(s.p.inv.masters, h) {
			continue
		}
		if err := os.MkdirAll(filepath.Join(s.dirs[h], filepath.Dir(ProxyFile)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(s.dirs[h], ProxyFile), data, 0o644); err != nil {
			return err
		}
		s.pl.result(h, true)
	}
	return nil
}

// upgrade is upgrade-cluster.yml: every Node it covers reports the new kubelet.
func (s *site) upgrade(ctx context.Context, targets []string) error {
	version := s.p.kubeletVersion()
	nodes := map[string]*corev1.Node{}
	for _, h := range targets {
		n, err := s.kc.CoreV1().Nodes().Get(ctx, h, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("upgrade-cluster.yml: node %s: %w", h, err)
		}
		nodes[h] = n
	}
	s.pl.task("upgrade/post-upgrade : Upgrade kubelet")
	for _, h := range targets {
		n := nodes[h]
		was := n.Status.NodeInfo.KubeletVersion
		n.Status.NodeInfo.KubeletVersion = version
		if _, err := s.kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("upgrading node %s: %w", h, err)
		}
		if err := s.done(h, fmt.Sprintf("upgraded, kubelet %s -> %s", was, version)); err != nil {
			return err
		}
	}
	return nil
}

// remove is remove-node.yml: each node is cordoned and drained (its pods evicted), then its
// Node deleted and, unless reset_nodes=false, the host reset. A dead node
// (reset_nodes=false, allow_ungraceful_removal=true) is removed without draining.
func (s *site) remove(ctx context.Context, targets []string) error {
	reset := s.p.boolVar("reset_nodes", true)
	ungraceful := !reset && s.p.boolVar("allow_ungraceful_removal", false)
	drain := fmt.Sprintf("grace period %v, timeout %v, retries %v", s.p.varOr("drain_grace_period", 300), s.p.varOr("drain_timeout", "360s"), s.p.varOr("drain_retries", 3))
	s.pl.task("remove-node/pre-remove : Drain node except daemonsets resource")
	for _, h := range targets {
		nodes := s.kc.CoreV1().Nodes()
		_, err := nodes.Get(ctx, h, metav1.GetOptions{})
		registered := err == nil
		var did string
		switch {
		case apierrors.IsNotFound(err):
			did = "not registered: nothing to drain or delete"
		case err != nil:
			return fmt.Errorf("remove-node.yml: node %s: %w", h, err)
		case ungraceful:
			if _, err := s.deletePods(ctx, h, false); err != nil {
				return err
			}
			did = "removed ungracefully, not drained, Node deleted"
		default:
			if _, err := nodes.Patch(ctx, h, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("cordoning node %s: %w", h, err)
			}
			n, err := s.deletePods(ctx, h, true)
			if err != nil {
				return err
			}
			did = fmt.Sprintf("cordoned, drained %d pods (%s), Node deleted", n, drain)
		}
		if registered {
			if err := nodes.Delete(ctx, h, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting node %s: %w", h, err)
			}
		}
		if reset {
			did += ", reset"
		} else {
			did += ", not reset"
		}
		if err := s.done(h, did); err != nil {
			return err
		}
	}
	return nil
}

// varOr is a variable's value, def when unset.
func (p *Play) varOr(name string, def any) any {
	if v, ok := p.vars[name]; ok {
		return v
	}
	return def
}

// reset is reset.yml: each host is reset, its Node deleted, and the first control-plane
// host loses admin.conf.
func (s *site) reset(ctx context.Context, targets []string) error {
	s.pl.task("reset : reset | kubeadm reset")
	for _, h := range targets {
		if _, err := s.deletePods(ctx, h, false); err != nil {
			return err
		}
		if err := s.kc.CoreV1().Nodes().Delete(ctx, h, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %s: %w", h, err)
		}
		did := "reset, Node deleted"
		if h == s.p.inv.masters[0] {
			if err := os.Remove(filepath.Join(s.dirs[h], "admin.conf")); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			did += ", admin.conf removed"
		}
		if err := s.done(h, did); err != nil {
			return err
		}
	}
	return nil
}

// deletePods removes the pods bound to node: evicted, as kubectl drain does (a disruption
// budget can refuse), or deleted outright, as the pod garbage collector does once the Node
// is gone. Grace period 0 in both: no kubelet runs them, so none would confirm their end.
func (s *site) deletePods(ctx context.Context, node string, evict bool) (int, error) {
	pods, err := s.kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	for _, pod := range pods.Items {
		c := s.kc.CoreV1().Pods(pod.Namespace)
		if evict {
			err = c.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, DeleteOptions: &now})
		} else {
			err = c.Delete(ctx, pod.Name, now)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("draining node %s: pod %s/%s: %w", node, pod.Namespace, pod.Name, err)
		}
	}
	return len(pods.Items), nil
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

// login proves the key and known_hosts work for each host, as Ansible's first task would,
// then runs each on the host's connection.
func login(ctx context.Context, a playbookArgs, inv *inventory, hosts []string, pl *play, each func(host string, c *sshexec.Client) error) error {
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
	for _, n := range hosts {
		cfg := sshexec.Config{User: a.user, Port: port, KeyFile: a.privateKey, KnownHostsFile: knownHosts, InsecureIgnoreHostKey: insecure, ConnectTimeout: 10 * time.Second}
		c, err := sshexec.Dial(ctx, inv.hosts[n], cfg)
		if err != nil {
			pl.fatal(n, "UNREACHABLE!", err.Error())
			return fmt.Errorf("fatal: [%s]: UNREACHABLE! %v", n, err)
		}
		_, err = c.Output(ctx, []string{"true"})
		if err == nil {
			err = each(n, c)
		}
		c.Close()
		if err != nil {
			pl.fatal(n, "FAILED!", err.Error())
			return fmt.Errorf("fatal: [%s]: %v", n, err)
		}
		pl.result(n, false)
	}
	return nil
}

// registerNode registers host as a Ready Node at its inventory address, running version,
// and says whether it was new.
func (s *site) registerNode(ctx context.Context, host, version string) (bool, error) {
	nodes := s.kc.CoreV1().Nodes()
	_, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: host}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("registering node %s: %w", host, err)
	}
	created := err == nil
	node, err := nodes.Get(ctx, host, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: s.p.inv.hosts[host]}}
	node.Status.NodeInfo.KubeletVersion = version
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return false, fmt.Errorf("marking node %s Ready: %w", host, err)
	}
	return created, nil
}

// controlPlanePod runs the kube-apiserver pod on the first control-plane host: a control
// plane always has a running kube-system pod, which verify looks for.
func (s *site) controlPlanePod(ctx context.Context, master string) error {
	pods := s.kc.CoreV1().Pods(metav1.NamespaceSystem)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + master, Namespace: metav1.NamespaceSystem},
		Spec:       corev1.PodSpec{NodeName: master, Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver"}}},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Phase = corev1.PodRunning
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}
