// Package rig runs real Kubernetes control-plane components for integration
// and end-to-end tests, and for `make demo`: etcd, kube-apiserver with Argo's
// CRDs, and optionally Argo's workflow-controller, all as local processes on
// loopback ports, with no container runtime, scheduler or kubelet.
//
// Build the binaries once with hack/build-tools.sh (into <repo>/bin), then:
//
//	r := rig.ForTest(t, rig.Options{WorkflowController: true})
//	c := kubernetes.NewForConfigOrDie(r.RESTConfig)
//
// Workflow pods stay Pending in a rig alone: start it through test/framework/node for a real
// node (Options.Node readies the apiserver for one). Several rigs can run at once (each picks
// free ports and its own temp dir); one node at a time.
package rig

import (
	"context"
	"errors"
	"fmt"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configure Start. The zero value is a usable rig without
// workflow-controller.
type Options struct {
	// BinDir holds the binaries from hack/build-tools.sh. Default: <repo>/bin,
	// the repo root being the closest parent of the working directory that
	// holds hack/build-tools.sh.
	BinDir string
	// Namespace is where Workflows run; created if absent. Default "bpa-system".
	Namespace string
	// WorkflowController starts Argo's workflow-controller, managing Namespace.
	WorkflowController bool
	// Log, when set, also receives every process's output, each line
	// prefixed with "[process] ". It always goes to <Dir>/logs/*.log too.
	Log io.Writer
	// NoArgoCRDs skips Argo's CRDs, for tests that need only the core API.
	// Incompatible with WorkflowController.
	NoArgoCRDs bool
	// MinimalArgoCRDs installs Argo's schema-less CRDs (what Argo's own
	// install manifests apply) instead of the full ones. The full schemas
	// make the apiserver validate and prune Workflows, but cost it several
	// seconds of CPU per rig (about 8 s of a 12 s start on 2 cores).
	MinimalArgoCRDs bool
	// KeepDir keeps Dir (data, certs, logs) after Stop, for debugging.
	KeepDir bool
	// LogDir is where each process logs, to <name>.log. Default <Dir>/logs. Stop leaves
	// a LogDir of the caller's in place, so `make demo` can point at the logs of a failed
	// run after it has stopped everything.
	LogDir string
	// Node, when set, readies the main apiserver for a real node (test/framework/node).
	Node *NodeOptions
	// ExecutorImage is the workflow-controller's --executor-image, the image of Argo's
	// executor in every Workflow pod. Default quay.io/argoproj/argoexec:<ArgoVersion>.
	ExecutorImage string
	// EtcdMaxRequestBytes, when set, is etcd's --max-request-bytes (1.5 MiB by default): a
	// small value lets a test meet etcd's "request is too large" with objects of test size.
	// Every object the rig itself stores must fit (the largest is a CRD of about 60 KiB).
	EtcdMaxRequestBytes int
}

// Tools are the files hack/build-tools.sh puts in the bin dir.
var Tools = []string{"etcd", "kube-apiserver", "workflow-controller", "argo", "argo-crds"}

// ArgoNamespace is where the workflow-controller runs and reads its ConfigMap.
const ArgoNamespace = "argo"

// Rig is a running control plane. Its exported fields are read-only.
type Rig struct {
	// Dir is the rig's temporary directory: etcd data, certs, kubeconfigs, logs/.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig (token auth, real CA).
	Kubeconfig string
	// RESTConfig is the same admin identity for client-go.
	RESTConfig *rest.Config
	// URL is the apiserver's https URL on 127.0.0.1.
	URL string
	// CAData is the PEM CA bundle that verifies the rig's apiservers.
	CAData []byte
	// AdminToken is a bearer token in group system:masters.
	AdminToken string
	// Namespace is Options.Namespace, defaulted.
	Namespace string
	// BinDir is Options.BinDir, defaulted.
	BinDir string
	// LogDir is Options.LogDir, defaulted.
	LogDir string

	opts    Options
	ca      *certAuthority
	etcdURL string
	// etcd, main and wfc are the rig's own etcd, apiserver and workflow-controller, kept so
	// a test can kill and restart them (faults.go).
	etcd etcdRun
	main *AppAPIServer
	wfc  restartable

	mu      sync.Mutex
	procs   []*Process
	app     *AppAPIServer
	stopped bool
}

// Start starts etcd and kube-apiserver, installs Argo's CRDs, creates
// Namespace and, if asked, starts the workflow-controller. ctx bounds the
// start-up only; the processes run until Stop. On error every process
// already started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Rig, err error) {
	if opts.Namespace == "" {
		opts.Namespace = "bpa-system"
	}
	if opts.BinDir == "" {
		if opts.BinDir, err = DefaultBinDir(); err != nil {
			return nil, err
		}
	}
	if opts.NoArgoCRDs && opts.WorkflowController {
		return nil, errors.New("rig: the workflow-controller needs Argo's CRDs (NoArgoCRDs)")
	}
	if missing := MissingTools(opts.BinDir, Tools...); len(missing) > 0 {
		return nil, fmt.Errorf("missing %s in %s: run hack/build-tools.sh", strings.Join(missing, ", "), opts.BinDir)
	}
	dir, err := os.MkdirTemp("", "bpa-rig-")
	if err != nil {
		return nil, err
	}
	r := &Rig{Dir: dir, Namespace: opts.Namespace, BinDir: opts.BinDir, LogDir: opts.LogDir, opts: opts, wfc: restartable{name: "workflow-controller"}}
	if r.LogDir == "" {
		r.LogDir = filepath.Join(dir, "logs")
	}
	defer func() {
		if err != nil {
			_ = r.Stop()
		}
	}()
	if r.ca, err = newCA("bpa-test-rig-ca"); err != nil {
		return nil, err
	}
	r.CAData = r.ca.pem
	if err = r.writeKubeletClientFiles(); err != nil {
		return nil, err
	}
	if err = r.startEtcd(ctx); err != nil {
		return nil, err
	}
	main, err := r.startAPIServer(ctx, r.mainAPIServer())
	if err != nil {
		return nil, err
	}
	r.main = main
	r.URL, r.AdminToken, r.Kubeconfig, r.RESTConfig = main.URL, main.Token, main.Kubeconfig, main.RESTConfig
	if !opts.NoArgoCRDs {
		if err = r.installArgoCRDs(ctx); err != nil {
			return nil, err
		}
	}
	if err = r.ensureNamespace(ctx, r.Namespace); err != nil {
		return nil, err
	}
	if opts.WorkflowController {
		if err = r.startWorkflowController(ctx); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ForTest starts a rig for t, stops it in t.Cleanup, and fails t (with the
// tail of the process logs) if it cannot start. When t has failed by cleanup
// time, the tail of every process log is logged too.
func ForTest(t framework.T, opts Options) *Rig {
	t.Helper()
	RequireTools(t)
	// A bound for a hung start, not a measure: a rig that starts in 15 s alone took over a
	// minute beside other suites on two cores.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start test rig: %v", err)
	}
	t.Logf("test rig up in %s (dir %s, apiserver %s)", time.Since(start).Round(time.Millisecond), r.Dir, r.URL)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", r.LogTails(40))
		}
		if err := r.Stop(); err != nil {
			t.Errorf("stop test rig: %v", err)
		}
	})
	return r
}

// RequireTools fails t, rather than skipping it, when the binaries from
// hack/build-tools.sh are missing (Tools, and more): CI always builds them first, so a
// missing binary is a broken setup, not an optional test.
func RequireTools(t framework.T, more ...string) {
	t.Helper()
	bin, err := DefaultBinDir()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if missing := MissingTools(bin, append(Tools, more...)...); len(missing) > 0 {
		t.Fatalf("missing %s in %s: run hack/build-tools.sh", strings.Join(missing, ", "), bin)
	}
}

// DefaultBinDir is <repo>/bin.
func DefaultBinDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// RepoRoot finds the repository root: the closest parent of the working
// directory, else of this source file, that holds hack/build-tools.sh (the
// tool modules under hack/tools have their own go.mod, so go.mod alone is
// ambiguous).
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "hack", "build-tools.sh")); err == nil {
				if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
					return d, nil
				}
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("cannot find the repository root (a folder with go.mod and hack/build-tools.sh)")
}

// MissingTools are those of tools that bin lacks.
func MissingTools(bin string, tools ...string) []string {
	var missing []string
	for _, t := range tools {
		if _, err := os.Stat(filepath.Join(bin, t)); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}

// Stop kills every process the rig started (SIGTERM, then SIGKILL after a
// grace period), newest first, and removes Dir unless Options.KeepDir.
// It is safe to call more than once.
func (r *Rig) Stop() error {
	r.mu.Lock()
	procs := r.procs
	r.procs = nil
	already := r.stopped
	r.stopped = true
	r.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop()
	}
	if already || r.opts.KeepDir {
		return nil
	}
	return os.RemoveAll(r.Dir)
}

// PIDs returns the process ids of the rig's running children.
func (r *Rig) PIDs() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var pids []int
	for _, p := range r.procs {
		if !p.Exited() {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}

// Exited returns the log paths of the processes that have exited before Stop: on a
// failure, the logs worth reading first.
func (r *Rig) Exited() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.procs {
		if p.Exited() {
			out = append(out, p.logPath)
		}
	}
	return out
}

// LogTails returns the last n lines of each process log, for failure reports.
func (r *Rig) LogTails(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, p := range r.procs {
		fmt.Fprintf(&b, "--- last %d lines of %s ---\n%s\n", n, p.logPath, p.tail(n))
	}
	return b.String()
}

// Spawn starts bin (a path, or a name in BinDir) as one of the rig's processes: it logs to
// <LogDir>/<name>.log and Stop stops it, if its owner has not (Process.Stop) before.
func (r *Rig) Spawn(name string, env []string, bin string, args ...string) (*Process, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, errors.New("rig stopped")
	}
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(r.BinDir, bin)
	}
	p, err := spawn(r.LogDir, name, r.opts.Log, env, bin, args...)
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	return p, nil
}

// startEtcd runs the rig's etcd.
func (r *Rig) startEtcd(ctx context.Context) error {
	r.etcd = etcdRun{restartable: restartable{name: "etcd"}, spec: etcdSpec{dataDir: filepath.Join(r.Dir, "etcd")}}
	if n := r.opts.EtcdMaxRequestBytes; n > 0 {
		r.etcd.spec.extra = append(r.etcd.spec.extra, "--max-request-bytes="+strconv.Itoa(n))
	}
	if err := r.runEtcd(ctx); err != nil {
		return err
	}
	r.etcdURL = r.etcd.spec.url()
	return nil
}

// AppAPIServer is a kube-apiserver of the rig's: the main one, or one standing in for the
// application cluster a provisioning job creates, on an etcd of its own (Etcd).
type AppAPIServer struct {
	URL        string // https://127.0.0.1:Port
	Port       int
	CAData     []byte // PEM CA bundle that verifies it, for any 127.0.0.1 or 127.0.1.x URL
	Token      string // admin bearer token (system:masters)
	Kubeconfig string // admin kubeconfig file pointing at URL
	RESTConfig *rest.Config
	// Etcd is the application cluster's etcd; nil for the rig's main apiserver, which is on
	// the rig's own.
	Etcd *AppEtcd
	// AuditLog is an application cluster's audit log (JSON lines, every request at the
	// Metadata level: who, verb, resource, user agent), so a test can prove what a step
	// did to it; "" for the rig's main apiserver.
	AuditLog string

	rig  *Rig
	run  restartable // named as the spec
	args []string
}

// KubeconfigFor returns an admin kubeconfig (as YAML) for the app apiserver
// reached at host (e.g. a simulated node IP such as "127.0.1.5").
func (a *AppAPIServer) KubeconfigFor(host string) ([]byte, error) {
	return clientcmd.Write(*kubeconfig(fmt.Sprintf("https://%s:%d", host, a.Port), a.CAData, a.Token))
}

// StartAppAPIServer starts (once; later calls return the same server) the
// application-cluster apiserver, named "app", on an etcd of its own. With a node, its
// certificate holds the addresses of NodeOptions.Hosts (see StartAppAPIServerFor).
func (r *Rig) StartAppAPIServer(ctx context.Context) (*AppAPIServer, error) {
	r.mu.Lock()
	app := r.app
	r.mu.Unlock()
	if app != nil {
		return app, nil
	}
	var hosts *net.IPNet
	if n := r.opts.Node; n != nil {
		hosts = n.Hosts
	}
	app, err := r.StartAppAPIServerFor(ctx, "app", hosts)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.app = app
	r.mu.Unlock()
	return app, nil
}

// StartAppAPIServerFor starts another application-cluster apiserver, named name (its
// folder and log "<name>-apiserver"), on an etcd of its own (AppEtcd: folder and log
// "<name>-etcd"), whose certificates hold every address of hosts, the simulated hosts that
// front them: sites that share a node each build their clusters on one of their own.
//
// Test-only choice: it binds 0.0.0.0 and its certificate is valid for 127.0.0.1 and
// 127.0.1.1..127.0.1.254 too, so a kubeconfig rewritten to a simulated node IP still
// reaches it and verifies TLS. Never a production setting: it listens on every interface.
func (r *Rig) StartAppAPIServerFor(ctx context.Context, name string, hosts *net.IPNet) (*AppAPIServer, error) {
	ips := simulatedNodeIPs()
	if hosts != nil {
		ips = append(ips, addresses(hosts)...)
	}
	etcd, err := r.startAppEtcd(ctx, name, ips)
	if err != nil {
		return nil, err
	}
	// kubeadm's prefix, so keys are where an operator of the cluster's etcd finds them.
	spec := apiServerSpec{name: name + "-apiserver", etcdPrefix: "/registry", bind: "0.0.0.0", certIPs: ips, etcd: etcd, audit: true}
	if n := r.opts.Node; n != nil {
		// Pods and the simulated hosts reach it on the node's address.
		spec.host = n.Address.String()
		spec.certIPs = append(spec.certIPs, n.Address)
	}
	return r.startAPIServer(ctx, spec)
}

// apiServerSpec is what differs between the rig's apiservers.
type apiServerSpec struct {
	name, etcdPrefix string
	bind             string // --bind-address
	host             string // the URL's host and --advertise-address; default 127.0.0.1
	certIPs          []net.IP
	users            []user   // static tokens besides the admin's
	args             []string // replace defaultAPIServerArgs
	etcd             *AppEtcd // nil: the rig's etcd
	audit            bool     // keep an audit log (AppAPIServer.AuditLog)
}

// auditPolicy records every request at the Metadata level, once (at ResponseComplete).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
`

// defaultAPIServerArgs are the flags of an apiserver without a real node.
var defaultAPIServerArgs = []string{
	"--authorization-mode=RBAC",
	// Without a controller-manager no token controller runs, and pods
	// name service accounts that may not exist yet.
	"--disable-admission-plugins=ServiceAccount",
	// The "kubernetes" Service endpoints cannot be a loopback address
	// (the reconciler logs an error every 10 s); nothing here uses them.
	"--endpoint-reconciler-type=none",
}

// startAPIServer runs a kube-apiserver on the rig's etcd, or spec's, and waits for /readyz.
func (r *Rig) startAPIServer(ctx context.Context, spec apiServerSpec) (*AppAPIServer, error) {
	dir := filepath.Join(r.Dir, spec.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f := func(n string) string { return filepath.Join(dir, n) }
	if spec.host == "" {
		spec.host = "127.0.0.1"
	}
	if spec.args == nil {
		spec.args = defaultAPIServerArgs
	}
	if err := r.ca.issueServing(f("serving.crt"), f("serving.key"), spec.certIPs); err != nil {
		return nil, err
	}
	if err := writeServiceAccountKeys(f("sa.key"), f("sa.pub")); err != nil {
		return nil, err
	}
	token := randomToken()
	if err := writeTokens(f("tokens.csv"), append([]user{{name: "admin", groups: "system:masters", token: token}}, spec.users...)); err != nil {
		return nil, err
	}
	etcdArgs := []string{"--etcd-servers=" + r.etcdURL}
	if spec.etcd != nil {
		etcdArgs = spec.etcd.apiServerArgs()
	}
	var auditLog string
	var auditArgs []string
	if spec.audit {
		auditLog = f("audit.log")
		if err := os.WriteFile(f("audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
			return nil, err
		}
		auditArgs = []string{"--audit-policy-file=" + f("audit-policy.yaml"), "--audit-log-path=" + auditLog,
			"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=100"}
	}
	var srv *AppAPIServer
	err := retryPorts(func() error {
		port := freePort()
		url := fmt.Sprintf("https://%s:%d", spec.host, port)
		args := slices.Concat(etcdArgs, auditArgs, []string{
			"--etcd-prefix=" + spec.etcdPrefix,
			"--bind-address=" + spec.bind,
			"--advertise-address=" + spec.host,
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + dir,
			"--tls-cert-file=" + f("serving.crt"),
			"--tls-private-key-file=" + f("serving.key"),
			"--service-account-key-file=" + f("sa.pub"),
			"--service-account-signing-key-file=" + f("sa.key"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--token-auth-file=" + f("tokens.csv"),
			"--service-cluster-ip-range=" + serviceCIDR,
			// One client per test: fairness queuing only adds start-up work.
			"--enable-priority-and-fairness=false",
			// Logs, exec and port-forward go to the kubelet's API over TLS verified both
			// ways, at the address its Node reports.
			"--kubelet-certificate-authority=" + r.file(caFile),
			"--kubelet-client-certificate=" + r.file(kubeletClientCert),
			"--kubelet-client-key=" + r.file(kubeletClientKey),
			"--kubelet-preferred-address-types=InternalIP",
		}, spec.args)
		s := &AppAPIServer{URL: url, Port: port, CAData: r.CAData, Token: token, Kubeconfig: f("kubeconfig"), Etcd: spec.etcd, AuditLog: auditLog,
			rig: r, run: restartable{name: spec.name}, args: args}
		if err := s.Start(ctx); err != nil {
			return err
		}
		srv = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, u := range spec.users {
		if err := clientcmd.WriteToFile(*kubeconfig(srv.URL, srv.CAData, u.token), f(u.component+".kubeconfig")); err != nil {
			return nil, err
		}
	}
	cfg := kubeconfig(srv.URL, srv.CAData, srv.Token)
	if err := clientcmd.WriteToFile(*cfg, srv.Kubeconfig); err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	// Tests create objects in bursts; client-side throttling only slows them.
	rc.QPS, rc.Burst = 200, 400
	srv.RESTConfig = rc
	return srv, nil
}

// Start starts the apiserver again after Stop, with the same flags (port, etcd, certificates,
// tokens), and waits for its /readyz. (The rig starts it first.)
func (a *AppAPIServer) Start(ctx context.Context) error {
	return a.run.start(func(name string) (*Process, error) {
		p, err := a.rig.Spawn(name, nil, "kube-apiserver", a.args...)
		if err != nil {
			return nil, err
		}
		return p, waitFor(ctx, p, 60*time.Second, func(ctx context.Context) error {
			return httpGetOK(ctx, a.CAData, a.URL+"/readyz", a.Token)
		})
	})
}

// Stop stops the apiserver (SIGTERM, then SIGKILL after a grace period) and waits for it to
// exit: before its etcd is stopped for a restore, say.
func (a *AppAPIServer) Stop() { a.run.stop() }

func kubeconfig(server string, ca []byte, token string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["rig"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["rig"] = &clientcmdapi.Context{Cluster: "rig", AuthInfo: "admin"}
	cfg.CurrentContext = "rig"
	return cfg
}

func (r *Rig) ensureNamespace(ctx context.Context, name string) error {
	c, err := kubernetes.NewForConfig(r.RESTConfig)
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
