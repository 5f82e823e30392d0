// Package sim starts a whole simulated bare-metal site for the e2e tests and `make demo`:
// a real etcd, kube-apiserver and Argo workflow-controller (test/rig); BPA's CRDs, admission
// policies and step RBAC; the real BPA controller binary; BareMetalHosts whose machines are
// real sshd processes on loopback addresses (test/simhost); an "application" apiserver for
// the clusters being built; and a stand-in kubelet (test/kubelet) that runs the step pods as
// local processes.
//
// SIMULATED, and only these: pod execution (the stand-in kubelet) and what kubespray's
// roles do to a machine (test/framework/kubespraysim: real Ansible playbooks, run by the real
// ansible-playbook over real OpenSSH). Every BPA step runs its real code against real
// components.
package sim

import (
	"context"
	"errors"
	"fmt"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/hostfixture"
	"github.com/akraino-edge-stack/bpa/test/framework/kubelet"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// KubesprayImage is the repository of the default kubespray image, which the stand-in
// kubelet answers with the simulated kubespray.
const KubesprayImage = "quay.io/kubespray/kubespray"

// Options configure a Site.
type Options struct {
	// Log receives the rig's process output and the stand-in kubelet's lines (default: none;
	// everything also goes to files under the rig's directory).
	Log io.Writer
	// LogDir is where the control plane and the BPA controller log (rig.Options.LogDir).
	LogDir string
}

// Site is a running simulated site.
type Site struct {
	T         framework.T
	Rig       *rig.Rig
	App       *rig.AppAPIServer
	Client    client.Client
	Kubelet   *kubelet.Kubelet
	SSH       *simhost.Cluster
	Namespace string
	// BPA is the bpa binary the controller and the steps run.
	BPA string
	// FailFile makes the simulated kubespray fail while it exists.
	FailFile string
	// UnmatchedFile, while it exists, makes the simulated kubespray's removals match no
	// host: they remove nothing and succeed (kubespraysim.EnvUnmatchedFile).
	UnmatchedFile string
	// KubesprayRuns receives every run of the simulated kubespray, in the layout of
	// `bpa plan --output-dir` (kubespraysim.EnvRecordDir).
	KubesprayRuns string

	mu    sync.Mutex
	hosts map[string]*simhost.Host // by IP
	// kubesprayEnv is added to the kubespray container's environment (SetKubesprayEnv).
	kubesprayEnv []string
	ctrl         *exec.Cmd
	dir          string
}

// New starts a site for t; everything stops in t.Cleanup.
func New(t framework.T, opts Options) *Site {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &Site{T: t, hosts: map[string]*simhost.Host{}, dir: t.TempDir()}
	s.BPA = buildBPA(t)
	s.Rig = rig.ForTest(t, rig.Options{WorkflowController: true, MinimalArgoCRDs: true, Log: opts.Log, LogDir: opts.LogDir})
	s.Namespace = s.Rig.Namespace
	cfg := s.Rig.RESTConfig

	must(t, bpatest.InstallCRDs(ctx, cfg), "installing BPA CRDs")
	must(t, bpatest.InstallBareMetalHostCRD(ctx, cfg), "installing the BareMetalHost CRD")
	must(t, bpatest.InstallAdmissionPolicy(ctx, cfg), "installing the admission policies")
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	must(t, err, "client")
	s.Client = c
	must(t, bpatest.InstallStepRBAC(ctx, c, s.Namespace), "installing the step accounts and roles")

	s.App, err = s.Rig.StartAppAPIServer(ctx)
	must(t, err, "starting the application apiserver")

	s.SSH = simhost.NewCluster(t)
	s.SSH.Port = freeLoopbackPort(t)
	s.FailFile = filepath.Join(s.dir, "kubespray-fails")
	s.UnmatchedFile = filepath.Join(s.dir, "kubespray-removals-match-nothing")
	s.KubesprayRuns = filepath.Join(s.dir, "kubespray-runs")

	logf := func(format string, args ...any) {}
	if opts.Log != nil {
		logf = func(format string, args ...any) { fmt.Fprintf(opts.Log, "[kubelet] "+format+"\n", args...) }
	}
	kubeletTLS, err := s.Rig.KubeletTLSConfig()
	must(t, err, "the stand-in kubelet's certificate")
	s.Kubelet, err = kubelet.Start(context.Background(), kubelet.Options{
		TLSConfig:        kubeletTLS,
		Config:           cfg,
		Kubeconfig:       s.Rig.Kubeconfig,
		AsServiceAccount: true,
		Namespace:        s.Namespace,
		Executables:      map[string]string{"bpa": s.BPA},
		Runners:          map[string]kubelet.Runner{KubesprayImage: s.runKubespray},
		// The bpa image's user (hack/images.NonRoot): the steps run as it, reading the SSH key through fsGroup.
		ImageUsers:  map[string]kubelet.ImageUser{"ghcr.io/akraino-edge-stack/bpa": {UID: 65532, GID: 65532}},
		Concurrency: 6,
		Logf:        logf,
	})
	must(t, err, "starting the stand-in kubelet")
	t.Cleanup(s.Kubelet.Stop)

	s.StartController()
	t.Cleanup(func() { s.StopController(false) })
	return s
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

func freeLoopbackPort(t framework.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err, "finding a free port")
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runKubespray runs the run-kubespray step pod: the real `bpa step run-kubespray` (the
// init container's copy of bpa is this build) in the stand-in kubespray checkout
// (kubespraysim.Tree), where it runs Debian's real ansible-playbook on the SIMULATED
// playbooks, over real OpenSSH to the simulated hosts.
func (s *Site) runKubespray(ctx context.Context, e *kubelet.Exec) (int, error) {
	tree, err := kubespraysim.Tree()
	if err != nil {
		return 0, err
	}
	agent, err := kubespraysim.BuildAgent()
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	dirs := map[string]string{}
	for ip, h := range s.hosts {
		dirs[ip] = h.KubernetesDir()
	}
	extra := append([]string(nil), s.kubesprayEnv...)
	s.mu.Unlock()
	// The container's own /tmp (the stand-in kubelet's $TMPDIR for the pod), where
	// kubespray's ansible.cfg caches facts: gone with it.
	tmp := envOf(e.Env, "TMPDIR")
	if tmp == "" {
		return 0, errors.New("the stand-in kubelet gave the kubespray container no TMPDIR")
	}
	control, err := kubespraysim.NewControlDir()
	if err != nil {
		return 0, err
	}
	// A container's processes end with it: Ansible's ssh masters too.
	defer kubespraysim.StopSSHMasters(control)
	env, err := kubespraysim.Container{
		Image: e.Image, AppKubeconfig: s.App.Kubeconfig, KubeDirs: dirs, FailFile: s.FailFile,
		UnmatchedFile: s.UnmatchedFile, RecordDir: s.KubesprayRuns, Agent: agent, Tmp: tmp, ControlDir: control,
	}.Env()
	if err != nil {
		return 0, err
	}
	e.Dir = tree
	e.Command = append([]string{s.BPA}, e.Command[1:]...)
	if !hasPath(e.Env) {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	e.Env = append(append(e.Env, env...), extra...)
	fmt.Fprintln(e.Stderr, "SIMULATED: kubespray's playbooks are the stand-in tree test/framework/kubespraysim/kubespray, run by the real ansible-playbook; the run-kubespray step itself is real")
	return kubelet.ExecRunner(ctx, e)
}

func envOf(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

func hasPath(env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			return true
		}
	}
	return false
}

// StartController starts the real `bpa controller` binary against the rig.
func (s *Site) StartController() {
	s.mu.Lock()
	defer s.mu.Unlock()
	logFile, err := os.OpenFile(filepath.Join(s.Rig.LogDir, "bpa-controller.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	must(s.T, err, "controller log")
	cmd := exec.Command(s.BPA, "controller", "--namespaces="+s.Namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.Rig.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	must(s.T, cmd.Start(), "starting bpa controller")
	s.ctrl = cmd
	go func() { _ = cmd.Wait(); logFile.Close() }()
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
	b, _ := os.ReadFile(filepath.Join(s.Rig.LogDir, "bpa-controller.log"))
	return string(b)
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
		key := client.ObjectKey{Namespace: s.Namespace, Name: name}
		h := &metal3v1.BareMetalHost{}
		must(t, s.Client.Get(ctx, key, h), "reading BareMetalHost "+name)
		if h.Spec.ConsumerRef != nil || h.Spec.Image != nil {
			t.Fatalf("BareMetalHost %s was not released for deprovisioning: consumerRef %v, image %v", name, h.Spec.ConsumerRef, h.Spec.Image)
		}
		start := metav1.NewTime(time.Now().Add(time.Second)) // after the release, to metal3's second
		h.Status.OperationHistory.Deprovision = metal3v1.OperationMetric{Start: start, End: metav1.NewTime(start.Add(time.Second))}
		h.Status.Provisioning.State, h.Status.Provisioning.Image = metal3v1.StateAvailable, metal3v1.Image{}
		must(t, s.Client.Status().Update(ctx, h), "metal3 deprovisioning BareMetalHost "+name)
		h.Spec.Image = &hostfixture.Image
		must(t, s.Client.Update(ctx, h), "the admin provisioning BareMetalHost "+name+" again")
		status := hostfixture.Provisioned(h.DeepCopy()).Status
		h.Status = status
		must(t, s.Client.Status().Update(ctx, h), "metal3 provisioning BareMetalHost "+name)
	}
}

// StartMachine starts a simulated machine at ip, unless one runs there.
func (s *Site) StartMachine(name, ip string) *simhost.Host {
	s.mu.Lock()
	h, ok := s.hosts[ip]
	s.mu.Unlock()
	if ok {
		return h
	}
	h = s.SSH.Start(name, ip)
	h.SetAvailable(Repository)
	s.mu.Lock()
	s.hosts[ip] = h
	s.mu.Unlock()
	return h
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

// SSHPortString is the port every simulated machine listens on, for spec.ssh.port.
func (s *Site) SSHPortString() string { return strconv.Itoa(s.SSH.Port) }
