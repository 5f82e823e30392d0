// Package sim starts a whole simulated bare-metal site for the e2e tests, the benchmarks,
// the UI test and `make demo`, on a real node (test/framework/node): a real etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager, kubelet, containerd and runc, and
// Argo's workflow-controller with its real executor; BPA's CRDs, admission policies and step
// RBAC from config/; the real BPA controller binary; the images hack/images builds (bpa from
// this tree, Argo's executor, the stand-in kubespray), pulled through the node's registry
// mirror; BareMetalHosts whose machines are real sshd processes in network namespaces of
// their own on the node's bridge (test/framework/simhost); and an "application" apiserver for
// the clusters being built, on a TLS etcd of its own, which each machine fronts on its
// address as a control-plane machine would (and the etcd at port 2379, on its address and
// its 127.0.0.1, once the stand-in's etcd role has run there, as an etcd host would, whose
// systemctl stops and starts it, and from whose /var/lib/etcd it runs after a restore).
//
// SIMULATED, and only this: what kubespray's roles do to a machine
// (test/framework/kubespraysim: real Ansible playbooks in the stand-in kubespray image, run
// by the real ansible-playbook over real OpenSSH). For that the run-kubespray container gets
// the stand-in's settings and the site's folder (see kubesprayInjector). Every BPA step runs
// its real code in its real image.
package sim

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/akraino-edge-stack/bpa/hack/images"
	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/hostfixture"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/node"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// KubesprayImage is the repository of the default kubespray image: the stand-in kubespray
// image (hack/images) holds it at every release pkg/kubespray knows.
const KubesprayImage = images.KubesprayRepo

// StepImage is the bpa image the site's steps run: this tree's bpa, built by the site.
const StepImage = images.BPARepo + ":" + stepTag

const stepTag = "sim"

// SSHPort is the port the site's machines' sshd listens on: not 22, so every CR names it in
// spec.ssh.port and the port travels through BPA as a site's own would.
const SSHPort = 2222

// Options configure a Base.
type Options struct {
	// Log receives the rig's process output (default: none; everything also goes to files
	// under the rig's directory).
	Log io.Writer
	// LogDir is where the control plane and the BPA controllers log (rig.Options.LogDir).
	LogDir string
}

// Base is what the sites on one node share: the node with its control plane and Argo's
// workflow-controller (every namespace), the images in the node's registry, and BPA's CRDs
// and admission policies (cluster-wide). Each Site on it has a namespace, an application
// apiserver, a BPA controller, machines and folders of its own, so sites run side by side
// (the e2e scenarios do). What stays shared is cluster-scoped: BPAPolicy default and the
// ArtifactIndexes.
type Base struct {
	T      framework.T
	Node   *node.Node
	Rig    *rig.Rig
	Client client.Client
	// Reader reads from a cache of the node's apiserver (one watch per kind, cluster-wide,
	// started on the kind's first read): for what polls, the tests' waits and the stand-in
	// baremetal-operator. Every lane polling the apiserver itself ten times a second was a
	// third of the apiserver's CPU and most of etcd's, and starved the runs it waited for.
	// A cache may be behind: never read from it that something is absent or unchanged.
	Reader client.Reader
	// BPA is the bpa binary the controllers run; the steps run the same code in StepImage.
	BPA string

	agent string // the stand-in kubespray's agent, built
	mu    sync.Mutex
	sites int
}

// Start starts a node for t with everything its sites share; everything stops in
// t.Cleanup, after the sites (which are t's or its subtests').
func Start(t framework.T, opts Options) *Base {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	b := &Base{T: t, BPA: buildBPA(t)}
	b.Node = node.ForTest(t, rig.Options{WorkflowController: true, MinimalArgoCRDs: true, Log: opts.Log, LogDir: opts.LogDir})
	b.Rig = b.Node.Rig
	cfg := b.Rig.RESTConfig
	b.pushImages(ctx, t.TempDir())

	must(t, bpatest.InstallCRDs(ctx, cfg), "installing BPA CRDs")
	must(t, bpatest.InstallBareMetalHostCRD(ctx, cfg), "installing the BareMetalHost CRD")
	must(t, bpatest.InstallAdmissionPolicy(ctx, cfg), "installing the admission policies")
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	must(t, err, "client")
	b.Client = c
	b.Reader = startCache(t, cfg)
	b.agent, err = kubespraysim.BuildAgent()
	must(t, err, "building the stand-in kubespray's agent")
	return b
}

// startCache starts a cache of cfg's apiserver for t's lifetime (Base.Reader).
func startCache(t framework.T, cfg *rest.Config) client.Reader {
	t.Helper()
	// The cache's informers log through controller-runtime's root logger, which nothing in a
	// test or the demo sets: without this, it prints a warning with a goroutine's stack.
	ctrllog.SetLogger(logr.Discard())
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	must(t, err, "the tests' cache")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(ctx); err != nil {
			t.Logf("the tests' cache stopped: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// New starts a node for t with one site on it (Start, NewSite).
func New(t framework.T, opts Options) *Site {
	t.Helper()
	return Start(t, opts).NewSite(t)
}

// NewSite starts a site on b for t, which may be a subtest of b's test running in parallel
// with others; it stops in t.Cleanup. The first site is in the rig's namespace, on
// node.HostNet (where the examples' hosts are) and the rig's application apiserver; the
// k-th is in namespace <rig's>-k, on node.HostSubnet(k) and an application apiserver of
// its own. Each application apiserver has an etcd of its own (rig.AppEtcd).
func (b *Base) NewSite(t framework.T) *Site {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b.mu.Lock()
	b.sites++
	k := b.sites
	b.mu.Unlock()
	s := &Site{T: t, Base: b, index: k, hosts: map[string]*simhost.Host{}, dir: t.TempDir()}
	s.root = filepath.Dir(s.dir)
	s.Namespace, s.subnet = b.Rig.Namespace, node.HostSubnet(k)
	var err error
	if k == 1 {
		s.App, err = b.Rig.StartAppAPIServer(ctx)
	} else {
		s.Namespace = fmt.Sprintf("%s-%d", b.Rig.Namespace, k)
		must(t, b.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}), "creating namespace "+s.Namespace)
		must(t, b.Node.WaitServiceAccount(ctx, s.Namespace), "namespace "+s.Namespace+"'s service account")
		s.App, err = b.Rig.StartAppAPIServerFor(ctx, fmt.Sprintf("app-%d", k), s.subnet)
	}
	must(t, err, "starting the application apiserver")
	must(t, bpatest.InstallStepRBAC(ctx, b.Client, s.Namespace), "installing the step accounts and roles")
	s.appKubeconfig = filepath.Join(s.dir, "app.kubeconfig")
	data, err := os.ReadFile(s.App.Kubeconfig)
	must(t, err, "reading the application apiserver's kubeconfig")
	must(t, os.WriteFile(s.appKubeconfig, data, 0o600), "writing the application apiserver's kubeconfig")
	s.appEtcdDir = filepath.Join(s.dir, "app-etcd")
	must(t, writeAppEtcdFiles(s.App.Etcd, s.appEtcdDir), "copying the application etcd's certificates")

	s.SSH = simhost.NewCluster(t)
	s.SSH.Port = SSHPort
	s.FailFile = filepath.Join(s.dir, "kubespray-fails")
	s.UnmatchedFile = filepath.Join(s.dir, "kubespray-removals-match-nothing")
	s.KubesprayRuns = filepath.Join(s.dir, "kubespray-runs")
	must(t, os.Mkdir(s.KubesprayRuns, 0o755), "making the kubespray runs' folder")
	s.agent = filepath.Join(s.dir, "kubespray-sim-agent")
	must(t, copyFile(b.agent, s.agent, 0o755), "copying the stand-in kubespray's agent")
	must(t, s.injectKubesprayEnv(ctx), "the run-kubespray containers' settings")
	startKubelets(t, s.App, s.Machine)
	startRebooter(t, b.Client, b.Reader, s.Namespace, s.machineOfHost)
	_, err = s.App.StartNodeLifecycle()
	must(t, err, "the application cluster's node-lifecycle controller")

	s.StartController()
	t.Cleanup(func() { s.StopController(false) })
	return s
}

// Site is a running simulated site: a namespace of a Base's with its own BPA controller,
// application apiserver, machines and failure injection.
type Site struct {
	*Base
	T         framework.T
	App       *rig.AppAPIServer
	SSH       *simhost.Cluster
	Namespace string
	// FailFile makes the simulated kubespray fail while it exists.
	FailFile string
	// UnmatchedFile, while it exists, makes the simulated kubespray's removals match no
	// host: they remove nothing and succeed (kubespraysim.EnvUnmatchedFile).
	UnmatchedFile string
	// KubesprayRuns receives every run of the simulated kubespray, in the layout of
	// `bpa plan --output-dir` (kubespraysim.EnvRecordDir).
	KubesprayRuns string
	// MetricsAddr is where the controller serves its metrics (https://MetricsAddr/metrics).
	MetricsAddr string

	index  int        // the site's number on its Base, from 1
	subnet *net.IPNet // where its machines are (HostIP)
	mu     sync.Mutex
	hosts  map[string]*simhost.Host // by IP
	// kubesprayEnv is added to the kubespray container's environment (SetKubesprayEnv).
	kubesprayEnv []string
	ctrl         *exec.Cmd
	// dir is the site's folder; root, its parent, holds the machines' folders too, and the
	// run-kubespray containers see it at the same path.
	dir, root     string
	appKubeconfig string
	// appEtcdDir holds the application etcd's CA and admin certificate, which the stand-in's
	// etcd role copies to the etcd hosts.
	appEtcdDir string
	// agent is the stand-in kubespray's agent in the site's folder: its tasks run it on the
	// machines (whose files are the machine's, but for their own folders) and in the
	// container, and both see it there.
	agent string
}

// pushImages builds the images the steps run (bpa from this tree, the stand-in kubespray:
// cached in bin/images on their inputs), in dir, and pushes them to the node's registry.
func (b *Base) pushImages(ctx context.Context, dir string) {
	root, err := rig.RepoRoot()
	must(b.T, err, "the repository")
	o, err := images.Options{Root: root, BPATag: stepTag, Argoexec: filepath.Join(b.Rig.BinDir, "argoexec")}.Defaults()
	must(b.T, err, "image options")
	bpa := o
	bpa.Dir = filepath.Join(dir, "images") // this tree's bpa: not a cache
	var built []images.Built
	for _, x := range []struct {
		o    images.Options
		name string
	}{{bpa, "bpa"}, {o, "kubespray"}} {
		img, err := images.Build(ctx, x.o, []string{x.name}, b.T.Logf)
		must(b.T, err, "building the "+x.name+" image")
		built = append(built, img...)
	}
	must(b.T, b.Node.Push(ctx, built...), "pushing the images to the node's registry")
}

func copyFile(src, dst string, mode os.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, mode)
}

func must(t framework.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// buildBPA builds cmd/bpa once per process, so the tests run the code under test.
var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

func buildBPA(t framework.T) string {
	buildOnce.Do(func() {
		root, err := rig.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildPath, buildErr = framework.Build(root, "./cmd/bpa", "bpa-test")
	})
	if buildErr != nil {
		t.Fatalf("%v", buildErr)
	}
	return buildPath
}

// StartController starts the real `bpa controller` binary against the rig.
func (s *Site) StartController() {
	s.mu.Lock()
	defer s.mu.Unlock()
	logFile, err := os.OpenFile(s.controllerLog(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(s.T, err, "controller log")
	if s.MetricsAddr == "" { // once: the same port after a restart
		s.MetricsAddr = freeLoopbackAddr(s.T)
	}
	// Metrics as a Deployment serves them: HTTPS, for a token with bpa-metrics-reader.
	cmd := exec.Command(s.BPA, "controller", "--namespaces="+s.Namespace,
		"--metrics-bind-address="+s.MetricsAddr, "--health-probe-bind-address=0", "--zap-log-level=info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Rig.Kubeconfig, "BPA_STEP_IMAGE="+StepImage)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	must(s.T, cmd.Start(), "starting bpa controller")
	s.ctrl = cmd
	go func() { _ = cmd.Wait(); logFile.Close() }()
}

// freeLoopbackAddr is a loopback address with a port nothing listens on now.
func freeLoopbackAddr(t framework.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err, "finding a free port")
	defer l.Close()
	return l.Addr().String()
}

// StopController stops the controller: with kill, at once and without warning (SIGKILL),
// as a crash would.
func (s *Site) StopController(kill bool) {
	s.mu.Lock()
	cmd := s.ctrl
	s.ctrl = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && syscall.Kill(cmd.Process.Pid, 0) == nil {
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// ControllerLog is the controller's output so far.
func (s *Site) ControllerLog() string {
	b, _ := os.ReadFile(s.controllerLog())
	return string(b)
}

// controllerLog is the controller's log file: bpa-controller.log for the first site,
// bpa-controller-<namespace>.log for the others.
func (s *Site) controllerLog() string {
	name := "bpa-controller.log"
	if s.index > 1 {
		name = "bpa-controller-" + s.Namespace + ".log"
	}
	return filepath.Join(s.Rig.LogDir, name)
}

// Argo runs the real argo CLI against the rig, in the site's namespace (rig.ArgoIn).
func (s *Site) Argo(ctx context.Context, args ...string) (string, error) {
	return s.Rig.ArgoIn(ctx, s.Namespace, args...)
}

// AddHosts creates BareMetalHosts (with their status) and starts a simulated machine, with a
// real sshd, at each host's NIC IP. A host whose status names no provisioning state is
// created as metal3 leaves a host it provisioned (hostfixture.Provisioned), since BPA
// claims only hosts with an operating system installed; a test that wants another state
// sets it.
func (s *Site) AddHosts(ctx context.Context, hosts []metal3v1.BareMetalHost) {
	t := s.T
	t.Helper()
	for i := range hosts {
		h := hosts[i].DeepCopy()
		if h.Status.Provisioning.State == "" {
			hostfixture.Provisioned(h)
		}
		status := h.Status
		h.Namespace, h.ResourceVersion = s.Namespace, ""
		must(t, s.Client.Create(ctx, h), "creating BareMetalHost "+h.Name)
		h.Status = status
		must(t, s.Client.Status().Update(ctx, h), "setting BareMetalHost status "+h.Name)
		if hw := status.HardwareDetails; hw != nil {
			for _, nic := range hw.NIC {
				if nic.IP != "" {
					s.StartMachine(h.Name, nic.IP)
				}
			}
		}
	}
}

// Reprovision plays the baremetal-operator, and the admin after it, for hosts BPA released
// under the default hostRelease (Deprovision): metal3 deprovisions each host (state
// available, status.operationHistory.deprovision recorded after the release), then the admin
// gives it hostfixture.Image again and metal3 provisions it. It fails t for a host that still
// has an image or a claim: BPA must have released it first. The simulated machine keeps
// its files, since cleaning a disk is the baremetal-operator's work, which this site does
// not run.
func (s *Site) Reprovision(ctx context.Context, names ...string) {
	t := s.T
	t.Helper()
	for _, name := range names {
		must(t, s.ReprovisionHost(ctx, name), "reprovisioning BareMetalHost "+name)
	}
}

// ReprovisionHost is Reprovision for one host, returning what went wrong: an error for a
// host that still has an image or a claim. A step that failed on a conflict or an
// unavailable apiserver may be tried again.
func (s *Site) ReprovisionHost(ctx context.Context, name string) error {
	key := client.ObjectKey{Namespace: s.Namespace, Name: name}
	h := &metal3v1.BareMetalHost{}
	if err := s.Client.Get(ctx, key, h); err != nil {
		return err
	}
	if h.Spec.ConsumerRef != nil || (h.Spec.Image != nil && h.Status.Provisioning.State != metal3v1.StateAvailable) {
		return fmt.Errorf("BareMetalHost %s was not released for deprovisioning: consumerRef %v, image %v", name, h.Spec.ConsumerRef, h.Spec.Image)
	}
	if h.Spec.Image == nil { // else only the last write failed before
		start := metav1.NewTime(time.Now().Add(time.Second)) // after the release, to metal3's second
		h.Status.OperationHistory.Deprovision = metal3v1.OperationMetric{Start: start, End: metav1.NewTime(start.Add(time.Second))}
		h.Status.Provisioning.State, h.Status.Provisioning.Image = metal3v1.StateAvailable, metal3v1.Image{}
		if err := s.Client.Status().Update(ctx, h); err != nil {
			return fmt.Errorf("metal3 deprovisioning: %w", err)
		}
		h.Spec.Image = &hostfixture.Image
		if err := s.Client.Update(ctx, h); err != nil {
			return fmt.Errorf("the admin provisioning it again: %w", err)
		}
	}
	h.Status = hostfixture.Provisioned(h.DeepCopy()).Status
	if err := s.Client.Status().Update(ctx, h); err != nil {
		return fmt.Errorf("metal3 provisioning: %w", err)
	}
	return nil
}

// StartMachine starts a simulated machine at ip (in a node.HostSubnet; see HostIP), unless one
// runs there. It fronts the application apiserver on its address, at the apiserver's port,
// as a control-plane machine serves its own: a cluster's kubeconfig names its first
// control-plane machine; and on its 127.0.0.1 with its own kubeadm certificate
// (apiServerPod), restarting when its crictl removes the pod. Once the stand-in's etcd role has run on it, it serves the
// application etcd at EtcdPort too (serveAppEtcd).
func (s *Site) StartMachine(name, ip string) *simhost.Host {
	s.mu.Lock()
	h, ok := s.hosts[ip]
	s.mu.Unlock()
	if ok {
		return h
	}
	addr, err := node.HostOn(ip)
	must(s.T, err, "machine "+name)
	h = s.SSH.StartOn(name, simhost.Network{Bridge: node.Bridge, Address: addr})
	if !strings.HasPrefix(h.Dir(), s.root+string(filepath.Separator)) {
		s.T.Fatalf("machine %s's folder %s is not under the site's %s, which run-kubespray sees", name, h.Dir(), s.root)
	}
	must(s.T, serveAppAPIServer(h, s.App), "machine "+name+" fronting the application apiserver")
	must(s.T, serveAppEtcd(s.T, h, s.App.Etcd), "machine "+name+" serving the application etcd")
	addKubeletUnits(h)
	h.SetAvailable(Repository)
	s.mu.Lock()
	s.hosts[ip] = h
	s.mu.Unlock()
	return h
}

// HostIP is the address of the site's n-th machine (1..254), in its node.HostSubnet.
func (s *Site) HostIP(n int) string {
	ip := s.subnet.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], byte(n)).String()
}

// HostMAC is the MAC address of the site's n-th machine (0..65535): 52:54:00, the site's
// number less one, n. Sites on one node never share one, as a lab's machines do not.
func (s *Site) HostMAC(n int) string {
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", s.index-1, n/256, n%256)
}

// SetKubesprayEnv sets what every later kubespray container's environment gets besides the
// pod's ("NAME=value"), as an image built for a site carries it (SSL_CERT_FILE naming the
// site's CA, say); none undoes it.
func (s *Site) SetKubesprayEnv(kv ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kubesprayEnv = kv
}

// Repository is what the simulated machines' apt repository offers for unpinned installs.
var Repository = map[string]string{
	"curl": "7.88.1-10+deb12u5", "htop": "3.2.2-2", "jq": "1.6-2.1", "maven": "3.8.7-1",
	"tmux": "3.3a-3", "expect": "5.45.4-2+b1", "python": "2.7.18-3", "nautilus": "43.2-1",
}

// machineOfHost is the simulated machine at one of h's NIC addresses (AddHosts), or nil.
func (s *Site) machineOfHost(h *metal3v1.BareMetalHost) *simhost.Host {
	if hw := h.Status.HardwareDetails; hw != nil {
		for _, nic := range hw.NIC {
			if m := s.Machine(nic.IP); m != nil && nic.IP != "" {
				return m
			}
		}
	}
	return nil
}

// Machine returns the simulated machine at ip.
func (s *Site) Machine(ip string) *simhost.Host {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hosts[ip]
}

// CreateSSHSecret creates <cluster>-ssh with the site's client key and every machine's
// host key, as an operator would before applying a CR.
func (s *Site) CreateSSHSecret(ctx context.Context, cluster string) {
	key, err := os.ReadFile(s.SSH.ClientKeyPath())
	must(s.T, err, "reading the client key")
	known, err := os.ReadFile(s.SSH.KnownHostsPath())
	must(s.T, err, "reading known_hosts")
	sec := &corev1.Secret{
		// The label is the owner's consent to the cluster's runs mounting the Secret.
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-ssh", Namespace: s.Namespace, Labels: map[string]string{bpav1.ClusterNameLabel: cluster}},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{corev1.SSHAuthPrivateKey: key, "known_hosts": known},
	}
	err = s.Client.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		err = s.Client.Update(ctx, sec)
	}
	must(s.T, err, "creating the SSH Secret")
}
