package kubespraysim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/test/rig"
	"github.com/akraino-edge-stack/bpa/test/simhost"
)

// lab is a site for the playbooks' effects: hosts behind real sshd (one port, as a CR
// names one), the rig's real apiserver as the application cluster, one facts cache.
type lab struct {
	t     *testing.T
	sim   *simhost.Cluster
	hosts map[string]*simhost.Host
	kc    kubernetes.Interface
	dir   string
	fail  string
}

func newLab(t *testing.T) *lab {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	l := &lab{t: t, sim: simhost.NewCluster(t), hosts: map[string]*simhost.Host{}, kc: kubernetes.NewForConfigOrDie(r.RESTConfig), dir: t.TempDir()}
	port, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l.sim.Port = port.Addr().(*net.TCPAddr).Port
	port.Close()
	dirs := map[string]string{}
	for i, name := range []string{"m1", "w1", "w2", "w3"} {
		h := l.sim.Start(name, fmt.Sprintf("127.0.1.%d", 131+i))
		l.hosts[name], dirs[h.IP] = h, h.KubernetesDir()
	}
	dirsJSON, _ := json.Marshal(dirs)
	l.fail = filepath.Join(l.dir, "fail")
	t.Setenv(EnvAppKubeconfig, r.Kubeconfig)
	t.Setenv(EnvKubeDirs, string(dirsJSON))
	t.Setenv(EnvFailFile, l.fail)
	t.Setenv(EnvFactsDir, t.TempDir())
	t.Setenv(EnvImage, "quay.io/kubespray/kubespray:v2.28.1")
	t.Setenv(EnvRecordDir, "")
	return l
}

// run runs a playbook, the inventory holding names (BPA's render of them) and the vars file
// kube_version, and returns the logins each host saw (sshd's log) and the printed output.
func (l *lab) run(names []string, kubeVersion string, args ...string) (map[string]int, string, error) {
	t := l.t
	t.Helper()
	var hosts []bpav1.HostStatus
	for _, n := range names {
		role := "worker"
		if n == "m1" {
			role = "master"
		}
		hosts = append(hosts, h(n, l.hosts[n].IP, n == "m1", role))
	}
	dir := writeInputs(t, hosts, map[string]any{"kube_version": kubeVersion})
	before := l.logins()
	conn, _ := json.Marshal(map[string]any{"ansible_port": l.sim.Port, "ansible_ssh_common_args": "-o UserKnownHostsFile=" + l.sim.KnownHostsPath()})
	argv := append([]string{"-i", filepath.Join(dir, "hosts.ini"), "--private-key", l.sim.ClientKeyPath(), "-u", "root", "-b",
		"-e", "@" + filepath.Join(dir, "vars.yaml"), "-e", string(conn)}, args...)
	var out bytes.Buffer
	err := run(context.Background(), argv, &out)
	after := l.logins()
	for n := range after {
		after[n] -= before[n]
	}
	return after, out.String(), err
}

func (l *lab) logins() map[string]int {
	counts := map[string]int{}
	for n, h := range l.hosts {
		counts[n] = strings.Count(h.SSHDLog(), "Accepted publickey")
	}
	return counts
}

// did lists what each host's log says, in order, for every host.
func (l *lab) did() map[string][]string {
	out := map[string][]string{}
	for n, h := range l.hosts {
		entries, err := HostLog(h.KubernetesDir())
		require.NoError(l.t, err)
		for _, e := range entries {
			out[n] = append(out[n], fmt.Sprintf("%s %v: %s", e.Playbook, e.Limit, e.Did))
		}
	}
	return out
}

// kubelets are the registered Nodes with their kubelet versions.
func (l *lab) kubelets() map[string]string {
	nodes, err := l.kc.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(l.t, err)
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Status.NodeInfo.KubeletVersion
	}
	return out
}

// proxies lists each host's apiserver proxy upstreams (ProxyFile), for hosts that have one.
func (l *lab) proxies() map[string][]string {
	out := map[string][]string{}
	for name, h := range l.hosts {
		p, err := ReadProxy(h.KubernetesDir())
		require.NoError(l.t, err)
		if p.Type != "" {
			out[name] = p.Upstreams
		}
	}
	return out
}

func logins(m1, w1, w2, w3 int) map[string]int {
	return map[string]int{"m1": m1, "w1": w1, "w2": w2, "w3": w3}
}

// TestPlaybookEffects walks a cluster's life through each playbook: what each does to the
// application cluster, to the hosts' /etc/kubernetes and their logs, and which hosts it logs
// in to, its --limit honoured.
func TestPlaybookEffects(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	m1Conf := filepath.Join(l.hosts["m1"].KubernetesDir(), "admin.conf")
	yes := `{"node":"%s","skip_confirmation":true%s}`

	// Creation: only the inventory's hosts; w3 is not in it yet.
	seen, _, err := l.run([]string{"m1", "w1", "w2"}, "1.32.5", "cluster.yml")
	require.NoError(t, err)
	assert.Equal(t, logins(1, 1, 1, 0), seen)
	assert.FileExists(t, m1Conf)
	assert.Equal(t, map[string]string{"m1": "v1.32.5", "w1": "v1.32.5", "w2": "v1.32.5"}, l.kubelets())
	assert.Equal(t, map[string][]string{
		"m1": {"cluster.yml []: kubeadm init (admin.conf written), joined, kubelet v1.32.5"},
		"w1": {"cluster.yml []: joined, kubelet v1.32.5"},
		"w2": {"cluster.yml []: joined, kubelet v1.32.5"},
	}, l.did())
	// Each node outside the control plane got an apiserver proxy to the control plane.
	upstream := []string{"m1 " + l.hosts["m1"].IP + ":6443"}
	assert.Equal(t, map[string][]string{"w1": upstream, "w2": upstream}, l.proxies())

	all := []string{"m1", "w1", "w2", "w3"}
	t.Run("scale.yml fails as injected, changing nothing, then joins only the new node", func(t *testing.T) {
		require.NoError(t, os.WriteFile(l.fail, []byte("scale.yml\n"), 0o644))
		seen, _, err := l.run(all, "1.32.5", "playbooks/facts.yml")
		require.NoError(t, err, "the fail file names scale.yml only")
		assert.Equal(t, logins(1, 1, 1, 1), seen, "facts.yml reads every host")
		_, out, err := l.run(all, "1.32.5", "--limit", "w3", "scale.yml")
		require.ErrorContains(t, err, "injected failure")
		assert.Contains(t, out, "fatal: [w3]: FAILED!")
		assert.NotContains(t, l.kubelets(), "w3")
		require.NoError(t, os.Remove(l.fail))

		seen, _, err = l.run(all, "1.32.5", "--limit", "w3", "scale.yml")
		require.NoError(t, err)
		assert.Equal(t, logins(0, 0, 0, 1), seen)
		assert.Equal(t, "v1.32.5", l.kubelets()["w3"])
		did := l.did()
		assert.Equal(t, []string{"scale.yml [w3]: joined, kubelet v1.32.5"}, did["w3"], "facts.yml and the failed run logged nothing")
		assert.Contains(t, l.proxies(), "w3", "scale.yml configures the new node's apiserver proxy")
		assert.Len(t, did["w1"], 1)
	})

	t.Run("an empty fail file fails every playbook but facts.yml", func(t *testing.T) {
		require.NoError(t, os.WriteFile(l.fail, nil, 0o644))
		defer os.Remove(l.fail)
		_, _, err := l.run(all, "1.32.8", "upgrade-cluster.yml")
		require.ErrorContains(t, err, "injected failure")
		_, _, err = l.run(all, "1.32.8", "playbooks/facts.yml")
		require.NoError(t, err)
		assert.Equal(t, "v1.32.5", l.kubelets()["m1"])
	})

	t.Run("upgrade-cluster.yml raises the kubelets it covers", func(t *testing.T) {
		seen, _, err := l.run(all, "1.32.8", "--limit", "kube_control_plane", "upgrade-cluster.yml")
		require.NoError(t, err)
		assert.Equal(t, logins(1, 0, 0, 0), seen, "a group limit")
		assert.Equal(t, map[string]string{"m1": "v1.32.8", "w1": "v1.32.5", "w2": "v1.32.5", "w3": "v1.32.5"}, l.kubelets())
		_, _, err = l.run(all, "1.32.8", "upgrade-cluster.yml")
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"m1": "v1.32.8", "w1": "v1.32.8", "w2": "v1.32.8", "w3": "v1.32.8"}, l.kubelets())
		assert.Equal(t, "upgrade-cluster.yml []: upgraded, kubelet v1.32.5 -> v1.32.8", l.did()["w2"][1])
	})

	t.Run("remove-node.yml drains, then deletes the Node", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "w2", Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
		_, err := l.kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		seen, _, err := l.run(all, "1.32.8", "-e", fmt.Sprintf(yes, "w2", `,"drain_grace_period":30,"drain_timeout":"90s"`), "remove-node.yml")
		require.NoError(t, err)
		assert.Equal(t, logins(1, 0, 1, 0), seen, "kubectl on the first master, reset on the node")
		assert.NotContains(t, l.kubelets(), "w2")
		_, err = l.kc.CoreV1().Pods("default").Get(ctx, "app", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "the pod was evicted: %v", err)
		assert.Equal(t, `remove-node.yml []: cordoned, drained 1 pods (grace period 30, timeout 90s, retries 3), Node deleted, reset`, l.did()["w2"][2])
	})

	rest := []string{"m1", "w1", "w3"} // w2 left the inventory
	t.Run("a dead node fails the removal unless it is ungraceful", func(t *testing.T) {
		l.hosts["w3"].Stop()
		before := l.did()
		_, out, err := l.run(rest, "1.32.8", "-e", fmt.Sprintf(yes, "w3", ""), "remove-node.yml")
		require.ErrorContains(t, err, "fatal: [w3]: UNREACHABLE!")
		assert.Contains(t, out, "w3                       : ok=0 changed=0 unreachable=1 failed=0")
		assert.Contains(t, l.kubelets(), "w3")
		assert.Equal(t, before, l.did(), "nothing changed")

		ungraceful := `,"reset_nodes":false,"allow_ungraceful_removal":true`
		for _, want := range []string{"removed ungracefully, not drained, Node deleted, not reset", "not registered: nothing to drain or delete, not reset"} {
			seen, out, err := l.run(rest, "1.32.8", "-e", fmt.Sprintf(yes, "w3", ungraceful), "remove-node.yml")
			require.NoError(t, err)
			assert.Equal(t, logins(1, 0, 0, 0), seen, "the dead node is never dialled")
			assert.NotContains(t, out, "UNREACHABLE")
			assert.NotContains(t, l.kubelets(), "w3")
			did := l.did()["w3"]
			assert.Equal(t, "remove-node.yml []: "+want, did[len(did)-1])
		}
	})

	t.Run("reset.yml removes admin.conf and the Nodes", func(t *testing.T) {
		seen, _, err := l.run([]string{"m1", "w1"}, "1.32.8", "-e", `{"reset_confirmation":"yes"}`, "reset.yml")
		require.NoError(t, err)
		assert.Equal(t, logins(1, 1, 0, 0), seen)
		assert.NoFileExists(t, m1Conf)
		assert.Empty(t, l.kubelets())
		did := l.did()
		assert.Equal(t, "reset.yml []: reset, Node deleted, admin.conf removed", did["m1"][len(did["m1"])-1])
		assert.Equal(t, "reset.yml []: reset, Node deleted", did["w1"][len(did["w1"])-1])
	})
}

// A --limit or a node that names no host of the inventory is an error, as in Ansible.
func TestNoHostsToTarget(t *testing.T) {
	env := map[string]string{EnvFactsDir: t.TempDir()}
	err := simRun(t, env, cluster, nil, "--limit", "w9", "playbooks/facts.yml")
	require.ErrorContains(t, err, "--limit leaves us with no hosts to target")
	err = simRun(t, env, cluster, nil, "-e", `{"node":"w9","skip_confirmation":true}`, "remove-node.yml")
	require.ErrorContains(t, err, "node w9 is not in the inventory")
}

// The kubelet a run installs: kube_version in either release's form, or the release's newest.
func TestKubeletVersion(t *testing.T) {
	for _, tc := range []struct{ image, kubeVersion, want string }{
		{"quay.io/kubespray/kubespray:v2.28.1", "", "v1.32.8"},
		{"quay.io/kubespray/kubespray:v2.28.0", "1.31.2", "v1.31.2"},
		{"quay.io/kubespray/kubespray:v2.27.0", "v1.30.1", "v1.30.1"},
	} {
		vars := map[string]any{}
		if tc.kubeVersion != "" {
			vars["kube_version"] = tc.kubeVersion
		}
		dir := writeInputs(t, cluster, vars)
		t.Setenv(EnvImage, tc.image)
		t.Setenv(EnvRecordDir, "")
		p, err := Check([]string{"-i", filepath.Join(dir, "hosts.ini"), "--private-key", "/k", "-e", "@" + filepath.Join(dir, "vars.yaml"), "cluster.yml"})
		require.NoError(t, err)
		assert.Equal(t, tc.want, p.kubeletVersion(), "%s with %q", tc.image, tc.kubeVersion)
	}
}
