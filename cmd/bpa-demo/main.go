// The demo program: `make demo`, BPA's main job on an embedded control plane, live, with
// Argo's web UI served by `argo server`.
//
// It runs the test rig (real etcd, kube-apiserver, Argo workflow-controller, sshd) and the
// simulated site the e2e tests use (test/framework); runT below is the framework.T a program
// gives them. Everything the control plane and the controller log goes to
// files under bin/demo-logs; on a failure the demo names them and shows the last lines of
// the one that matters, not the logs themselves.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
)

const (
	provisioningExample = "examples/provisioning-mac-and-resources.yaml"
	hostsExample        = "examples/bmh/provisioning-mac-and-resources.yaml"
	softwareExample     = "examples/software.yaml"
	clusterExample      = "examples/cluster.yaml"
	demoTimeout         = 5 * time.Minute
)

func say(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func main() {
	root, err := rig.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	logDir := filepath.Join(root, "bin", "demo-logs")
	_ = os.RemoveAll(logDir) // the last run's logs only
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	t := newRunT(logDir)
	defer t.finish(0)
	run(t, root, logDir)
}

func run(t *runT, root, logDir string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the demo at once (its children die with it)
	}()
	oneshot := os.Getenv("DEMO_ONESHOT") != ""

	say("BPA demo: real etcd, kube-apiserver, a real node (kubelet, containerd, runc), Argo's")
	say("workflow-controller and executor, the BPA controller, and each step in its image.")
	say("SIMULATED: the bare-metal machines (an sshd each, in a network namespace of its own on the")
	say("node's bridge) and what kubespray's roles do to a machine: the real ansible-playbook runs")
	say("stand-in playbooks in the stand-in kubespray image over real OpenSSH.")
	say("starting the embedded control plane and simulated site (logs in %s)...", rel(root, logDir))
	start := time.Now()
	site := sim.New(t, sim.Options{LogDir: logDir})
	t.site = site
	say("control plane up in %s: apiserver %s, namespace %s", time.Since(start).Round(time.Second), site.Rig.URL, site.Namespace)
	if ctx.Err() != nil {
		return
	}

	ui, err := site.Rig.StartArgoServer(ctx, 2746)
	if err != nil {
		t.Fatalf("starting argo server (Argo's web UI): %v", err)
	}
	if why := rig.ArgoUIMissing(site.Rig.BinDir); why != "" {
		say("no Argo web UI: %s", why)
		say("argo server (its API only, loopback only, acting as the demo's admin): %s; `argo list` and `kubectl bpa describe` work", ui)
	} else {
		say("Argo UI (argo server, loopback only, acting as the demo's admin): %s/workflows/%s", ui, site.Namespace)
	}

	kubeconfig := filepath.Join(root, "bin", "demo.kubeconfig")
	data, err := os.ReadFile(site.Rig.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(kubeconfig) })
	say("kubectl and argo work against the demo: export KUBECONFIG=%s ARGO_NAMESPACE=%s", kubeconfig, site.Namespace)

	hosts, err := hostmatch.ReadBareMetalHostsFile(filepath.Join(root, hostsExample))
	if err != nil {
		t.Fatal(err)
	}
	site.AddHosts(ctx, hosts)
	say("created %d BareMetalHosts from %s, each a simulated machine with a real sshd", len(hosts), hostsExample)

	objs := readCRs(t, filepath.Join(root, provisioningExample), filepath.Join(root, softwareExample), filepath.Join(root, clusterExample))
	prov := objs[0].(*bpav1.Provisioning)
	site.CreateSSHSecret(ctx, prov.Labels["cluster"])
	say("created Secret %s-ssh (SSH key and known_hosts)", prov.Labels["cluster"])
	for _, o := range objs {
		o.SetNamespace(site.Namespace)
		switch cr := o.(type) {
		case *bpav1.Provisioning:
			cr.Spec.SSH = &bpav1.SSHConfig{Port: int32(site.SSH.Port)}
		case *bpav1.Software:
			cr.Spec.SSH = &bpav1.SSHConfig{Port: int32(site.SSH.Port)}
		}
		if err := site.Client.Create(ctx, o); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		say("applied %T %s", o, o.GetName())
	}

	runs, err := watch(ctx, site, prov.Name, objs[1].GetName(), objs[2].GetName())
	if err != nil {
		if errors.Is(err, context.Canceled) {
			say("interrupted; stopping everything.")
			return
		}
		t.Fatal(err)
	}
	if err := showLogs(ctx, site, runs); err != nil {
		t.Fatal(err)
	}
	if oneshot {
		say("DEMO_ONESHOT: the examples succeeded; stopping everything.")
		return
	}
	say("running until Ctrl-C (then everything the demo started stops)")
	<-ctx.Done()
	say("stopping...")
}

func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// runT is the framework.T of the demo program. Fatal prints the reason and where the logs
// are, runs the cleanups (everything stops) and exits 1; Logf goes to the demo's own log
// file.
type runT struct {
	logDir string
	log    io.Writer
	site   *sim.Site

	mu       sync.Mutex
	cleanups []func()
	tmp      string // TempDir's parent
	failed   bool
	exiting  bool
}

func newRunT(logDir string) *runT {
	t := &runT{logDir: logDir, log: io.Discard}
	if f, err := os.Create(filepath.Join(logDir, "demo.log")); err == nil {
		t.log = f
	}
	return t
}

var _ framework.T = (*runT)(nil)

func (t *runT) Helper() {}
func (t *runT) Logf(format string, args ...any) {
	fmt.Fprintf(t.log, format+"\n", args...)
}
func (t *runT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}
func (t *runT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
func (t *runT) Errorf(format string, args ...any) {
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	fmt.Fprintf(os.Stderr, "demo: "+format+"\n", args...)
	t.Logf(format, args...)
}
func (t *runT) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *runT) Fatalf(format string, args ...any) {
	t.Errorf(format, args...)
	t.failNow()
}
func (t *runT) failNow() {
	t.mu.Lock()
	exiting := t.exiting
	t.mu.Unlock()
	if exiting {
		panic(errCleanupFailed) // a cleanup failed while stopping: finish stops the rest
	}
	t.finish(1)
}

// TempDir is a fresh folder in the demo's own folder under the system's temp dir (short
// paths: sshd and unix sockets live there), all of it removed by the cleanups. One parent
// for all: the simulated site hands it to the stand-in kubespray's containers.
func (t *runT) TempDir() string {
	t.mu.Lock()
	root := t.tmp
	t.mu.Unlock()
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "bpa-demo-"); err != nil {
			t.Fatalf("TempDir: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(root) })
		t.mu.Lock()
		t.tmp = root
		t.mu.Unlock()
	}
	dir, err := os.MkdirTemp(root, "")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	return dir
}

var errCleanupFailed = errors.New("cleanup failed")

// finish reports a failure (log paths, the tail of the log that explains it), runs the
// cleanups newest first and exits with code.
func (t *runT) finish(code int) {
	t.mu.Lock()
	if t.exiting {
		t.mu.Unlock()
		return
	}
	t.exiting = true
	failed := t.failed
	cleanups := t.cleanups
	t.mu.Unlock()
	if failed {
		code = 1
		t.report()
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		func() {
			defer func() {
				if r := recover(); r != nil && r != errCleanupFailed {
					fmt.Fprintln(os.Stderr, "demo: while stopping:", r)
				}
			}()
			cleanups[i]()
		}()
	}
	os.Exit(code)
}

// report names the log files and shows the end of the one that explains the failure: a
// process that died, else the BPA controller's.
func (t *runT) report() {
	files, _ := filepath.Glob(filepath.Join(t.logDir, "*.log"))
	fmt.Fprintf(os.Stderr, "demo: logs (kept until the next run): %s\n", strings.Join(files, " "))
	var show []string
	if t.site != nil {
		show = t.site.Rig.Exited()
		if len(show) == 0 {
			show = []string{filepath.Join(t.logDir, "bpa-controller.log")}
		}
	}
	for _, f := range show {
		fmt.Fprintf(os.Stderr, "--- last lines of %s ---\n%s\n", f, rig.TailFile(f, 15))
	}
}

// watch prints each step as it changes, until the Provisioning, the Software and the
// Cluster that ties them succeed, and returns the first two's final status.
func watch(ctx context.Context, site *sim.Site, provName, swName, clusterName string) ([]*bpav1.RunStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	seen := map[string]string{}
	report := func(kind, name string, st *bpav1.RunStatus) {
		key := kind + "/" + name
		if line := fmt.Sprintf("%s %s", st.Phase, st.Progress); seen[key] != line && st.Phase != "" {
			seen[key] = line
			wf := "-"
			if st.Workflow != nil {
				wf = st.Workflow.Name
			}
			say("%-12s %-24s %-9s %-5s workflow %s", kind, name, st.Phase, st.Progress, wf)
		}
		for _, s := range st.Steps {
			k := key + "/" + s.Name
			if seen[k] != s.Phase && s.Phase != "Pending" {
				seen[k] = s.Phase
				msg := ""
				if s.Message != "" {
					msg = ": " + s.Message
				}
				say("    %-20s %s%s", s.Name, s.Phase, msg)
			}
		}
	}
	for {
		p, sw := &bpav1.Provisioning{}, &bpav1.Software{}
		key := func(n string) client.ObjectKey { return client.ObjectKey{Namespace: site.Namespace, Name: n} }
		if err := site.Client.Get(ctx, key(provName), p); err != nil {
			return nil, err
		}
		if err := site.Client.Get(ctx, key(swName), sw); err != nil {
			return nil, err
		}
		report("Provisioning", p.Name, &p.Status.RunStatus)
		report("Software", sw.Name, &sw.Status.RunStatus)
		for _, st := range []*bpav1.RunStatus{&p.Status.RunStatus, &sw.Status.RunStatus} {
			if st.Phase == bpav1.PhaseFailed || st.Phase == bpav1.PhaseError {
				return nil, fmt.Errorf("run failed: %s", st.Message)
			}
		}
		c := &bpav1.Cluster{}
		if err := site.Client.Get(ctx, key(clusterName), c); err != nil {
			return nil, err
		}
		if p.Status.Phase == bpav1.PhaseSucceeded && sw.Status.Phase == bpav1.PhaseSucceeded && c.Status.Phase == bpav1.PhaseSucceeded {
			say("Provisioning %s Succeeded: Workflow %s, kubeconfig in Secret %s (key value)", p.Name, p.Status.Workflow.Name, p.Status.KubeconfigSecretName)
			for _, h := range p.Status.Hosts {
				say("    host %-10s %-15s %-17s BareMetalHost %s roles %s", h.Name, h.IP, h.MAC, h.BareMetalHost, strings.Join(h.Roles, ","))
			}
			say("Software %s Succeeded: Workflow %s", sw.Name, sw.Status.Workflow.Name)
			for _, h := range sw.Status.HostSoftware {
				var pkgs []string
				for _, pk := range h.Packages {
					pkgs = append(pkgs, pk.Name+"="+pk.Installed)
				}
				sort.Strings(pkgs)
				say("    host %-10s %s", h.Name, strings.Join(pkgs, " "))
			}
			say("Cluster %s: %s (provisioning %s, software %s)", c.Name, c.Status.Phase, c.Status.ProvisioningPhase, c.Status.SoftwarePhase)
			return []*bpav1.RunStatus{&p.Status.RunStatus, &sw.Status.RunStatus}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the examples did not succeed in time: %w", ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// showLogs prints `argo logs` (the real CLI, as a user would run it) of the runs that just
// succeeded, and fails unless every step's output is there.
func showLogs(ctx context.Context, site *sim.Site, runs []*bpav1.RunStatus) error {
	for _, st := range runs {
		out, err := site.Rig.Argo(ctx, "logs", st.Workflow.Name, "--no-color")
		if err != nil {
			return err
		}
		say("argo logs %s (each line prefixed with its step's pod):", st.Workflow.Name)
		for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			fmt.Println("    " + line)
		}
		for _, step := range st.Steps {
			if !strings.Contains(out, st.Workflow.Name+"-"+step.Name+"-") {
				return fmt.Errorf("argo logs %s shows nothing of step %s", st.Workflow.Name, step.Name)
			}
		}
	}
	return nil
}

func readCRs(t *runT, paths ...string) []client.Object {
	var out []client.Object
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs, problems := validation.ValidateFile(context.Background(), p, data)
		if len(problems) > 0 {
			t.Fatalf("%v", problems)
		}
		for _, d := range docs {
			out = append(out, d.Object.(client.Object))
		}
	}
	return out
}
