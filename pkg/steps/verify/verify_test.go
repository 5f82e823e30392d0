package verify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

func node(name, ip string, ready corev1.ConditionStatus, reason string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: reason}},
		},
	}
}

func pod(name string, phase corev1.PodPhase, waiting string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name}, Status: corev1.PodStatus{Phase: phase}}
	if waiting != "" {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}}}
	}
	return p
}

var hosts = []bpav1.HostStatus{
	{Name: "master-1", IP: "10.0.0.1", Roles: []string{"master"}},
	{Name: "worker-1", IP: "10.0.0.2", Roles: []string{"worker"}},
	{Name: "worker-2", IP: "10.0.0.3", Roles: []string{"worker"}},
}

func healthy() []runtime.Object {
	return []runtime.Object{
		node("master-1", "10.0.0.1", corev1.ConditionTrue, ""),
		node("worker-1", "10.0.0.2", corev1.ConditionTrue, ""),
		node("worker-2", "10.0.0.3", corev1.ConditionTrue, ""),
		pod("kube-apiserver-master-1", corev1.PodRunning, ""),
		pod("coredns-1", corev1.PodRunning, ""),
		pod("kube-proxy-xyz", corev1.PodRunning, ""),
		pod("job-done", corev1.PodSucceeded, ""),
	}
}

// withKubelet sets the kubelet version a node reports.
func withKubelet(n *corev1.Node, version string) *corev1.Node {
	n.Status.NodeInfo.KubeletVersion = version
	return n
}

func TestCheck(t *testing.T) {
	terminating := pod("coredns-old", corev1.PodPending, "")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	terminating.Finalizers = []string{"x"}
	removing := append(append([]bpav1.HostStatus(nil), hosts...), bpav1.HostStatus{Name: "worker-3", IP: "10.0.0.4", Roles: []string{"worker"}, Removing: true})
	for _, tc := range []struct {
		name    string
		hosts   []bpav1.HostStatus // default: hosts
		kubelet string
		objects []runtime.Object
		want    []string
	}{
		{"healthy", nil, "", healthy(), nil},
		{"terminating pods do not count", nil, "", append(healthy(), terminating), nil},
		{"node found by InternalIP when named after its hostname", nil, "", []runtime.Object{
			node("master-1", "10.0.0.1", corev1.ConditionTrue, ""),
			node("node-a.example", "10.0.0.2", corev1.ConditionTrue, ""),
			node("worker-2", "10.0.0.3", corev1.ConditionTrue, ""),
			pod("coredns-1", corev1.PodRunning, ""),
		}, nil},
		{"missing, not ready and failing", nil, "", []runtime.Object{
			node("master-1", "10.0.0.1", corev1.ConditionTrue, ""),
			node("worker-2", "10.0.0.3", corev1.ConditionFalse, "KubeletNotReady"),
			pod("coredns-1", corev1.PodPending, "ImagePullBackOff"),
			pod("kube-proxy-xyz", corev1.PodRunning, ""),
			pod("calico-node-1", corev1.PodFailed, ""),
		}, []string{
			"node worker-1 (10.0.0.2): not registered",
			"node worker-2: not Ready (KubeletNotReady)",
			"pod kube-system/calico-node-1: Failed",
			"pod kube-system/coredns-1: Pending (ImagePullBackOff)",
		}},
		{"node without a Ready condition", nil, "", []runtime.Object{
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-1"}},
			node("worker-1", "10.0.0.2", corev1.ConditionTrue, ""),
			node("worker-2", "10.0.0.3", corev1.ConditionTrue, ""),
			pod("coredns-1", corev1.PodRunning, ""),
		}, []string{"node master-1: not Ready (no Ready condition yet)"}},
		{"empty cluster", nil, "", nil, []string{
			"kube-system: no pods running yet",
			"node master-1 (10.0.0.1): not registered",
			"node worker-1 (10.0.0.2): not registered",
			"node worker-2 (10.0.0.3): not registered",
		}},
		{"a removed host's node is gone", removing, "", healthy(), nil},
		{"a removed host's node is still registered", removing, "", append(healthy(), node("worker-3", "10.0.0.4", corev1.ConditionTrue, "")),
			[]string{"node worker-3: still registered, but the run removed it"}},
		{"a removed host's node registered under its hostname", removing, "", append(healthy(), node("w3.example", "10.0.0.4", corev1.ConditionFalse, "")),
			[]string{"node w3.example: still registered, but the run removed it"}},
		{"a removed host's address is a kept host's", append(append([]bpav1.HostStatus(nil), hosts...), bpav1.HostStatus{Name: "worker-3", IP: "10.0.0.3", Roles: []string{"worker"}, Removing: true}), "",
			[]runtime.Object{node("master-1", "10.0.0.1", corev1.ConditionTrue, ""), node("worker-1", "10.0.0.2", corev1.ConditionTrue, ""),
				node("n3.example", "10.0.0.3", corev1.ConditionTrue, ""), pod("coredns-1", corev1.PodRunning, "")}, nil},
		{"a node of no host is not BPA's", nil, "", append(healthy(), node("by-hand", "10.0.0.9", corev1.ConditionFalse, "")), nil},
		{"kubelet versions", nil, "v1.32.8", []runtime.Object{
			withKubelet(node("master-1", "10.0.0.1", corev1.ConditionTrue, ""), "v1.32.8"),
			withKubelet(node("worker-1", "10.0.0.2", corev1.ConditionTrue, ""), "v1.32.5"),
			node("worker-2", "10.0.0.3", corev1.ConditionTrue, ""),
			pod("coredns-1", corev1.PodRunning, ""),
		}, []string{`node worker-1: kubelet "v1.32.5", want v1.32.8`, `node worker-2: kubelet "", want v1.32.8`}},
		{"no version expected", nil, "", []runtime.Object{
			withKubelet(node("master-1", "10.0.0.1", corev1.ConditionTrue, ""), "v1.32.8"),
			withKubelet(node("worker-1", "10.0.0.2", corev1.ConditionTrue, ""), "v1.32.5"),
			node("worker-2", "10.0.0.3", corev1.ConditionTrue, ""),
			pod("coredns-1", corev1.PodRunning, ""),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.hosts == nil {
				tc.hosts = hosts
			}
			got, err := Check(context.Background(), fake.NewClientset(tc.objects...), tc.hosts, tc.kubelet)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

func TestCheckAPIError(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("starting")
	})
	if _, err := Check(context.Background(), cs, hosts, ""); err == nil || !strings.Contains(err.Error(), "listing nodes") {
		t.Errorf("got %v", err)
	}
}

func TestKubeletVersion(t *testing.T) {
	for in, want := range map[string]string{"": "", "1.32.5": "v1.32.5", "v1.31.4": "v1.31.4"} {
		if got, err := KubeletVersion(in); err != nil || got != want {
			t.Errorf("KubeletVersion(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := KubeletVersion("1.32"); err == nil || !strings.Contains(err.Error(), "--kubernetes-version") {
		t.Errorf("got %v, want an error naming the flag", err)
	}
}

func TestSummarizeIsBounded(t *testing.T) {
	var many []string
	for i := 0; i < 50; i++ {
		many = append(many, fmt.Sprintf("node n-%02d: not registered", i))
	}
	s := Summarize(many)
	if !strings.HasSuffix(s, "; ... and 30 more") || strings.Count(s, "not registered") != maxReported {
		t.Errorf("got %s", s)
	}
}

// env is a verify run against simulated hosts: two masters and a worker behind real sshd,
// the management cluster faked with controller-runtime, the new cluster with client-go.
type env struct {
	o       *options
	c       client.Client
	sim     *simhost.Cluster
	masters []*simhost.Host
	cs      *fake.Clientset

	mu      sync.Mutex
	logs    []string
	apiHost string
}

func newEnv(t *testing.T, objects ...runtime.Object) *env {
	t.Helper()
	e := &env{sim: simhost.NewCluster(t), cs: fake.NewClientset(objects...)}
	m1 := e.sim.Start("master-1", "127.0.1.40")
	e.sim.Port = m1.Port // one port for the CR's hosts, as on a site
	m2 := e.sim.Start("master-2", "127.0.1.41")
	e.masters = []*simhost.Host{m1, m2}
	// A second, hostile user that admin.conf's context does not use: it must not travel on.
	m1.WriteAdminConf(append(simhost.FakeAdminConf("https://127.0.0.1:6443"), unusedExecUser...))
	m2.WriteAdminConf(simhost.FakeAdminConf("https://127.0.0.1:7443")) // a different file: must not be the one fetched

	hostsFile := filepath.Join(t.TempDir(), "hosts.json")
	runHosts := []bpav1.HostStatus{
		{Name: "master-2", IP: m2.IP, Roles: []string{"master"}},
		{Name: "worker-1", IP: "127.0.1.42", Roles: []string{"worker"}},
		{Name: "master-1", IP: m1.IP, Roles: []string{"master", "worker"}},
	}
	data, _ := json.Marshal(runHosts)
	if err := os.WriteFile(hostsFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov", UID: "prov-uid", Labels: map[string]string{"cluster": "c1"}}}
	p.Spec.SSH = &bpav1.SSHConfig{Port: int32(m1.Port)} // the sim hosts' port comes from the CR
	e.c = crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).Build()

	fs := pflag.NewFlagSet("verify", pflag.ContinueOnError)
	e.o = &options{
		cr: stepio.CR{Namespace: "bpa", Name: "prov"}, hostsFile: hostsFile,
		certificatesFile: filepath.Join(filepath.Dir(hostsFile), "certificates.json"),
		workflowName:     "prov-provision-1", workflowUID: "wf-uid",
		timeout: 5 * time.Second, pollInterval: 50 * time.Millisecond,
		flags: fs,
		logf: func(format string, args ...any) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.logs = append(e.logs, fmt.Sprintf(format, args...))
		},
		newClusterClient: func(rc *rest.Config) (kubernetes.Interface, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.apiHost = rc.Host
			return e.cs, nil
		},
	}
	e.o.ssh.AddFlags(fs)
	if err := fs.Parse([]string{"--ssh-key=" + e.sim.ClientKeyPath(), "--known-hosts=" + e.sim.KnownHostsPath()}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) staged(t *testing.T) (*corev1.Secret, bool) {
	t.Helper()
	s := &corev1.Secret{}
	err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "bpa", Name: "prov-provision-1-admin-conf"}, s)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

func (e *env) assertNoSecretsLogged(t *testing.T) {
	t.Helper()
	all := strings.Join(e.logs, "\n")
	if strings.Contains(all, "client-key-data") || strings.Contains(all, "certificate-authority-data") {
		t.Errorf("the kubeconfig leaked into the logs:\n%s", all)
	}
}

var healthyNodes = []runtime.Object{
	node("master-1", "127.0.1.40", corev1.ConditionTrue, ""),
	node("master-2", "127.0.1.41", corev1.ConditionTrue, ""),
	node("worker-1", "127.0.1.42", corev1.ConditionTrue, ""),
	pod("kube-apiserver-master-1", corev1.PodRunning, ""),
}

func TestRunStagesKubeconfig(t *testing.T) {
	e := newEnv(t, healthyNodes...)
	start := time.Now()
	if err := e.o.run(context.Background(), e.c); err != nil {
		t.Fatal(err)
	}
	t.Logf("verify against sshd + fake API took %v", time.Since(start))
	if e.apiHost != "https://127.0.1.40:6443" {
		t.Errorf("the new cluster was asked at %s, want master-1's IP with admin.conf's port", e.apiHost)
	}
	s, ok := e.staged(t)
	if !ok {
		t.Fatal("no staging Secret")
	}
	wantOwner := []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow", Name: "prov-provision-1", UID: "wf-uid"}}
	if !reflect.DeepEqual(s.OwnerReferences, wantOwner) {
		t.Errorf("owner references %+v", s.OwnerReferences)
	}
	if s.Labels[bpav1.ClusterNameLabel] != "c1" || s.Labels[bpav1.ProvisioningNameLabel] != "prov" {
		t.Errorf("labels %v", s.Labels)
	}
	cfg, err := clientcmd.Load(s.Data["value"])
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Clusters["cluster.local"].Server; got != "https://127.0.1.40:6443" {
		t.Errorf("staged server %s", got)
	}
	if len(cfg.AuthInfos["kubernetes-admin"].ClientKeyData) == 0 {
		t.Error("staged kubeconfig lost its credentials")
	}
	if len(cfg.AuthInfos) != 1 || strings.Contains(string(s.Data["value"]), "exec") {
		t.Errorf("the staged kubeconfig carries more than the current context's user:\n%v", cfg.AuthInfos)
	}
	// Only the first master was asked, with cat, verbatim.
	if calls := e.masters[1].Calls(); len(calls) != 0 {
		t.Errorf("master-2 was contacted: %v", calls)
	}
	e.assertNoSecretsLogged(t)
	if _, ok := s.Data[kubeconfig.NodeReaderKey]; ok {
		t.Error("a node-reader kubeconfig staged without spec.remediation")
	}
	if acts := e.cs.Actions(); slices.ContainsFunc(acts, func(a k8stesting.Action) bool {
		return a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetVerb() != "watch"
	}) {
		t.Errorf("verify wrote to the cluster without spec.remediation: %v", acts)
	}

	// A retry of the step (same Workflow) rewrites the Secret instead of failing.
	if err := e.o.run(context.Background(), e.c); err != nil {
		t.Fatalf("rerun: %v", err)
	}
}

func TestRunWaitsForNodes(t *testing.T) {
	e := newEnv(t,
		node("master-1", "127.0.1.40", corev1.ConditionTrue, ""),
		node("master-2", "127.0.1.41", corev1.ConditionTrue, ""),
		node("worker-1", "127.0.1.42", corev1.ConditionFalse, "KubeletNotReady"),
		pod("kube-apiserver-master-1", corev1.PodRunning, ""))
	go func() {
		time.Sleep(300 * time.Millisecond)
		n := node("worker-1", "127.0.1.42", corev1.ConditionTrue, "")
		_, _ = e.cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{})
	}()
	if err := e.o.run(context.Background(), e.c); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.staged(t); !ok {
		t.Error("no staging Secret")
	}
}

func TestRunFailsWithWhatIsMissing(t *testing.T) {
	e := newEnv(t, node("master-1", "127.0.1.40", corev1.ConditionTrue, ""), pod("coredns-1", corev1.PodPending, "ImagePullBackOff"))
	// The bound covers admin.conf's fetch over SSH too, which a loaded machine (make test
	// runs two lanes) has taken more than 400 ms for.
	e.o.timeout = 3 * time.Second
	start := time.Now()
	err := e.o.run(context.Background(), e.c)
	want := "cluster not healthy after 3s: node master-2 (127.0.1.41): not registered; node worker-1 (127.0.1.42): not registered; pod kube-system/coredns-1: Pending (ImagePullBackOff)"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %v with a 3s timeout", took)
	}
	if _, ok := e.staged(t); ok {
		t.Error("an unhealthy cluster's kubeconfig was staged")
	}
	e.assertNoSecretsLogged(t)
}

// The run leaves a node out (Removing) and upgrades Kubernetes: verify waits until every
// kubelet reports the version, and fails naming what is not.
func TestRunChecksNodeSetAndVersion(t *testing.T) {
	at := func(version string) []runtime.Object {
		return []runtime.Object{
			withKubelet(node("master-1", "127.0.1.40", corev1.ConditionTrue, ""), version),
			withKubelet(node("master-2", "127.0.1.41", corev1.ConditionTrue, ""), version),
			withKubelet(node("worker-1", "127.0.1.42", corev1.ConditionTrue, ""), version),
			pod("kube-apiserver-master-1", corev1.PodRunning, ""),
		}
	}
	setUp := func(t *testing.T, objects ...runtime.Object) *env {
		e := newEnv(t, objects...)
		var runHosts []bpav1.HostStatus
		data, _ := os.ReadFile(e.o.hostsFile)
		if err := json.Unmarshal(data, &runHosts); err != nil {
			t.Fatal(err)
		}
		data, _ = json.Marshal(append(runHosts, bpav1.HostStatus{Name: "worker-2", IP: "127.0.1.43", Roles: []string{"worker"}, Removing: true}))
		if err := os.WriteFile(e.o.hostsFile, data, 0o644); err != nil {
			t.Fatal(err)
		}
		e.o.kubernetesVersion = "1.32.8"
		return e
	}
	worker2 := node("worker-2", "127.0.1.43", corev1.ConditionTrue, "")

	t.Run("fails naming the nodes", func(t *testing.T) {
		e := setUp(t, at("v1.32.5")...)
		e.o.timeout = 3 * time.Second
		err := e.o.run(context.Background(), e.c)
		want := `cluster not healthy after 3s: node master-1: kubelet "v1.32.5", want v1.32.8; node master-2: kubelet "v1.32.5", want v1.32.8; ` +
			`node worker-1: kubelet "v1.32.5", want v1.32.8`
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
		if _, ok := e.staged(t); ok {
			t.Error("the kubeconfig was staged")
		}
	})
	t.Run("waits until the cluster converges", func(t *testing.T) {
		e := setUp(t, at("v1.32.5")...)
		go func() {
			time.Sleep(300 * time.Millisecond)
			for _, o := range at("v1.32.8")[:3] {
				_, _ = e.cs.CoreV1().Nodes().UpdateStatus(context.Background(), o.(*corev1.Node), metav1.UpdateOptions{})
			}
		}()
		if err := e.o.run(context.Background(), e.c); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(e.logs, "node worker-2: removed") || !slices.Contains(e.logs, "all 3 nodes Ready with kubelet v1.32.8 and kube-system pods running") {
			t.Errorf("logs: %q", e.logs)
		}
	})
	// kubespray deletes a removed node's Node within its run: one still there means the
	// removal did nothing (a name that matched no host runs no play and exits 0), and no
	// wait will change that. verify fails on its first look, not at its timeout.
	t.Run("a removed node still registered fails at once", func(t *testing.T) {
		e := setUp(t, append(at("v1.32.8"), worker2)...)
		e.o.timeout = 2 * time.Second // waiting, it would fail at this timeout, listing the nodes again and again
		lists := 0
		e.cs.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			lists++
			return false, nil, nil
		})
		err := e.o.run(context.Background(), e.c)
		want := "removal did not take effect: node worker-2: still registered, but the run removed it"
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
		if lists != 1 {
			t.Errorf("the nodes were listed %d times: verify waited for a removal that had not happened", lists)
		}
		if _, ok := e.staged(t); ok {
			t.Error("the kubeconfig was staged")
		}
	})
}

func TestRunRefusesWrongHostKey(t *testing.T) {
	e := newEnv(t, healthyNodes...)
	other := simhost.NewCluster(t).Start("impostor", "127.0.1.43")
	if err := e.o.flags.Set("known-hosts", other.KnownHostsPath()); err != nil {
		t.Fatal(err)
	}
	err := e.o.run(context.Background(), e.c)
	if err == nil || !strings.Contains(err.Error(), "not in known_hosts") || !strings.Contains(err.Error(), "master-1") {
		t.Errorf("got %v", err)
	}
	if _, ok := e.staged(t); ok {
		t.Error("staged a kubeconfig fetched without a verified host key")
	}
}

var unusedExecUser = []byte(`- name: other
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/false}
`)

// TestRunRefusesHostileAdminConf is the attack of a compromised first master: its admin.conf
// points at an "API server" the host runs (master-1's IP, as verify rewrites it) and asks
// client-go to send the step pod's ServiceAccount token there (tokenFile) or to run a command
// in the step (exec). verify, with the real client-go client, must refuse the file before
// any request: no command runs, the token never leaves, nothing is staged.
func TestRunRefusesHostileAdminConf(t *testing.T) {
	dir := t.TempDir()
	saToken := "step-pod-serviceaccount-token-" + filepath.Base(dir)
	tokenFile := filepath.Join(dir, "token") // stands in for /var/run/secrets/kubernetes.io/serviceaccount/token
	marker := filepath.Join(dir, "exec-ran")
	if err := os.WriteFile(tokenFile, []byte(saToken), 0o600); err != nil {
		t.Fatal(err)
	}
	execCred := `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}`
	for field, user := range map[string]string{
		"tokenFile": "    tokenFile: " + tokenFile + "\n",
		"exec": "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n" +
			"      args: [-c, 'touch " + marker + "; echo ''" + execCred + "''']\n      interactiveMode: Never\n",
	} {
		t.Run(field, func(t *testing.T) {
			e := newEnv(t, healthyNodes...)
			var mu sync.Mutex
			var seen []string
			l, err := net.Listen("tcp", e.masters[0].IP+":0")
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.URL.Path+" "+r.Header.Get("Authorization"))
				mu.Unlock()
				http.Error(w, "{}", http.StatusForbidden)
			}))
			srv.Listener = l
			cert, caPEM := selfSigned(t, e.masters[0].IP)
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			srv.StartTLS()
			defer srv.Close()
			// An admin.conf for that server whose only user entry is the hostile one. verify
			// rewrites the host to master-1's IP and keeps the port; client-go attaches
			// credentials only over https, hence the certificate.
			conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- cluster: {certificate-authority-data: %s, server: "https://127.0.0.1:%d"}
  name: cluster.local
contexts:
- context: {cluster: cluster.local, user: kubernetes-admin}
  name: admin
current-context: admin
users:
- name: kubernetes-admin
  user:
`, base64.StdEncoding.EncodeToString(caPEM), l.Addr().(*net.TCPAddr).Port)
			e.masters[0].WriteAdminConf([]byte(conf + user))
			e.o.newClusterClient = func(rc *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(rc) }
			e.o.timeout = 2 * time.Second

			err = e.o.run(context.Background(), e.c)
			if err == nil || !strings.Contains(err.Error(), `user "kubernetes-admin": `+field) || !strings.Contains(err.Error(), "master-1") {
				t.Errorf("got %v, want a refusal naming %s and the master", err, field)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) > 0 {
				t.Errorf("the host's API server was asked (path, Authorization): %q", seen)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the admin.conf's exec command ran in the step")
			}
			if _, ok := e.staged(t); ok {
				t.Error("a hostile kubeconfig was staged for publishing")
			}
		})
	}
}

// selfSigned is a serving certificate for ip that is its own CA.
func selfSigned(t *testing.T, ip string) (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hostile-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, IPAddresses: []net.IP{net.ParseIP(ip)},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestRunNeedsWorkflowOwner(t *testing.T) {
	o := &options{cr: stepio.CR{Namespace: "bpa", Name: "p"}, workflowName: "wf"}
	if err := o.run(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "--workflow-uid") {
		t.Errorf("got %v", err)
	}
}

// TestCommandFlags makes sure the flags the WorkflowTemplate passes parse.
func TestCommandFlags(t *testing.T) {
	cmd := Command()
	err := cmd.ParseFlags([]string{"--namespace=bpa", "--provisioning=p", "--hosts-file=/bpa/in/hosts.json",
		"--ssh-key=/etc/bpa/ssh/ssh-privatekey", "--known-hosts=/etc/bpa/ssh/known_hosts", "--ssh-user=root", "--ssh-port=22",
		"--insecure-ignore-host-key=false", "--workflow-name=wf", "--workflow-uid=123", "--timeout=10m", "--kubernetes-version="})
	if err != nil {
		t.Fatal(err)
	}
}

// After an upgrade, a node behind (not Ready, not registered, another kubelet) for the grace
// fails the step at once with NodeNotUpgraded, naming it; pods and removed hosts are not
// nodes behind, and a node that came back starts its clock again.
func TestNodesLeftBehindByAnUpgrade(t *testing.T) {
	o := &options{afterUpgrade: true}
	since := map[string]time.Time{}
	problems := []string{`node w1: kubelet "v1.30.4", want v1.31.4`, "node w2 (10.0.0.2): not registered", "node m1: not Ready (KubeletNotReady)",
		"node w9: " + stillRegistered, "pod kube-system/coredns: Pending"}
	behind := o.behind(problems, "v1.31.4", since)
	assert.Equal(t, problems[:3], behind)
	assert.Len(t, since, 3)
	start := since["w1"]
	assert.Empty(t, Late(behind, since, 2*time.Minute, start.Add(time.Minute)))
	assert.Len(t, Late(behind, since, 2*time.Minute, start.Add(2*time.Minute)), 3)

	behind = o.behind(problems[:1], "v1.31.4", since)
	assert.Len(t, since, 1, "m1 and w2 came back")
	err := NotUpgraded(Late(behind, since, 0, time.Now()), "v1.31.4")
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), bpav1.ReasonNodeNotUpgraded+": "), err.Error())
	assert.Contains(t, err.Error(), `a node did not come back Ready at kubelet v1.31.4: node w1: kubelet "v1.30.4"`)
	assert.Contains(t, err.Error(), "not retried")

	// A run that did not upgrade has no nodes behind: it waits out its timeout as before.
	assert.Nil(t, (&options{}).behind(problems, "v1.31.4", map[string]time.Time{}))
}

// With spec.remediation, verify also makes the node-reader account (Nodes only) in the new
// cluster and stages its kubeconfig, the admin's server and a token of that account, beside
// the admin kubeconfig.
func TestRunStagesNodeReader(t *testing.T) {
	e := newEnv(t, healthyNodes...)
	p := &bpav1.Provisioning{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: "bpa", Name: "prov"}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Remediation = &bpav1.Remediation{}
	if err := e.c.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	e.cs.PrependReactor("create", "serviceaccounts", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		return true, &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "nr-token"}}, nil
	})
	if err := e.o.run(context.Background(), e.c); err != nil {
		t.Fatal(err)
	}
	s, ok := e.staged(t)
	if !ok {
		t.Fatal("no staging Secret")
	}
	rc, err := kubeconfig.RESTConfig(s.Data[kubeconfig.NodeReaderKey])
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://127.0.1.40:6443" || rc.BearerToken != "nr-token" || len(rc.CAData) == 0 {
		t.Errorf("node-reader kubeconfig: server %s, token %q, CA %d bytes", rc.Host, rc.BearerToken, len(rc.CAData))
	}
	role, err := e.cs.RbacV1().ClusterRoles().Get(context.Background(), kubeconfig.NodeReader, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("node-reader rules %+v", role.Rules)
	}
	e.assertNoSecretsLogged(t)
}
