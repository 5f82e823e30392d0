package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/pkg/etcdbackup"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/restoreetcd"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// TestEtcdRestoreOnHost: after the stand-in's cluster.yml, the restore contract of a BPA
// step works on the etcd host m1 as on a kubespray v2.28 etcd host, against the site's
// real application etcd: a key written through m1's 127.0.0.1:2379 and a namespace written
// through the application apiserver, then a snapshot, then the key deleted and another
// namespace made; the contract's commands, run over SSH exactly as the step runs them, bring
// the key back through m1; the etcd process, restarted, still has it (it runs from m1's
// /var/lib/etcd now); the application apiserver, restarted, serves the namespace from before
// the snapshot and not the one after. Done twice, so the second restore moves the first's
// member aside; a stopped host serves no etcd. systemctl acts on etcd only, on an etcd host
// only, and etcdutl is only on etcd hosts. etcd starts only as the member /etc/etcd.env
// names (the one the data dir was restored for).
func TestEtcdRestoreOnHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEtcdSite(t, ctx)
	m1, w1 := e.hosts["m1"], e.hosts["w1"]
	c := sshClient(t, ctx, m1)

	t.Run("what kubespray leaves on the host", func(t *testing.T) {
		fi, err := os.Stat(m1.File(kubespraysim.EtcdDataDir))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "the data dir")
		fi, err = os.Stat(m1.File(kubespraysim.EtcdBinDir + "/etcdutl"))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "etcdutl")
		env := readEtcdEnv(t, ctx, c)
		assert.Equal(t, map[string]string{
			"ETCD_DATA_DIR": "/var/lib/etcd", "ETCD_NAME": e.app.Etcd.MemberName,
			"ETCD_INITIAL_ADVERTISE_PEER_URLS": e.app.Etcd.PeerURL, "ETCD_INITIAL_CLUSTER_TOKEN": "k8s_etcd",
			"ETCD_INITIAL_CLUSTER": e.app.Etcd.MemberName + "=" + e.app.Etcd.PeerURL,
		}, pick(env, "ETCD_DATA_DIR", "ETCD_NAME", "ETCD_INITIAL_ADVERTISE_PEER_URLS", "ETCD_INITIAL_CLUSTER_TOKEN", "ETCD_INITIAL_CLUSTER"))
		for _, m := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			data, err := os.ReadFile(m1.File("/etc/kubernetes/manifests/" + m + ".yaml"))
			if assert.NoError(t, err, "kubeadm's static pod of %s", m) {
				assert.Contains(t, string(data), "name: "+m)
			}
		}
		assert.NoFileExists(t, w1.File("/etc/kubernetes/manifests/kube-apiserver.yaml"), "w1 runs no control plane")
		_, err = os.Stat("/etc/etcd.env")
		assert.True(t, os.IsNotExist(err), "the machine's own /etc has no etcd.env: the host's /etc is an overlay")
	})

	apps := kubernetes.NewForConfigOrDie(e.app.RESTConfig).CoreV1().Namespaces()
	for round := 1; round <= 2; round++ {
		key, before, after := fmt.Sprintf("/bpa-restore/k%d", round), fmt.Sprintf("before-%d", round), fmt.Sprintf("after-%d", round)
		etcd := etcdThroughSSH(t, ctx, c, m1)
		_, err := etcd.Put(ctx, key, "v")
		require.NoError(t, err)
		_, err = apps.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: before}}, metav1.CreateOptions{})
		require.NoError(t, err)
		snap := filepath.Join(t.TempDir(), "snapshot.db")
		_, err = etcdbackup.Save(ctx, etcd, snap)
		require.NoError(t, err)
		_, err = etcd.Delete(ctx, key)
		require.NoError(t, err)
		_, err = apps.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: after}}, metav1.CreateOptions{})
		require.NoError(t, err)
		resp, err := etcd.Get(ctx, key)
		require.NoError(t, err)
		require.Empty(t, resp.Kvs, "the key is deleted before the restore")

		m1.ResetCalls()
		start := time.Now()
		restoreOnHost(t, ctx, c, e, m1, snap, fmt.Sprintf("20261128T00000%dZ", round), round > 1, round == 1)
		t.Logf("round %d: the restore's commands in %s", round, time.Since(start).Round(10*time.Millisecond))
		var verbs []string
		for _, call := range m1.CallsTo("systemctl") {
			verbs = append(verbs, strings.Join(call.Args, " "))
		}
		want := []string{"stop etcd", "is-active etcd", "start etcd"}
		if round == 1 {
			want = append(want, "start etcd")
		}
		assert.Equal(t, want, verbs, "systemctl's calls are recorded")

		resp, err = etcdThroughSSH(t, ctx, c, m1).Get(ctx, key)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "round %d: the key is back, read through m1's 127.0.0.1:2379", round)
		assert.Equal(t, m1.File(kubespraysim.EtcdDataDir), e.app.Etcd.DataDir, "etcd runs from m1's data dir")

		e.app.Etcd.Stop()
		require.NoError(t, e.app.Etcd.Start(ctx))
		resp, err = etcdThroughSSH(t, ctx, c, m1).Get(ctx, key)
		require.NoError(t, err)
		assert.Len(t, resp.Kvs, 1, "round %d: the restarted etcd still has the key", round)

		e.app.Stop()
		require.NoError(t, e.app.Start(ctx))
		_, err = apps.Get(ctx, before, metav1.GetOptions{})
		require.NoError(t, err, "round %d: the restarted apiserver serves what the snapshot holds", round)
		_, err = apps.Get(ctx, after, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "round %d: what came after the snapshot is gone: %v", round, err)
	}

	t.Run("systemctl and etcdutl are an etcd host's", func(t *testing.T) {
		wc := sshClient(t, ctx, w1)
		for _, x := range []struct {
			c       *sshexec.Client
			argv    []string
			code    int
			message string
		}{
			{wc, []string{"systemctl", "stop", "etcd"}, 5, "Unit etcd.service not loaded."},
			{wc, []string{"systemctl", "start", "etcd"}, 5, "Unit etcd.service not found."},
			{c, []string{"systemctl", "stop", "docker"}, 5, "Unit docker.service not loaded."},
			{c, []string{"systemctl", "restart", "crio.service"}, 5, "Unit crio.service not found."},
			{c, []string{"systemctl", "enable", "etcd"}, 1, "Unknown command verb 'enable'."},
			{c, []string{"systemctl", "--now", "stop", "etcd"}, 1, "not simulated"},
			{wc, []string{"/usr/local/bin/etcdutl", "version"}, 127, "No such file"},
		} {
			_, stderr, code, err := x.c.Run(ctx, x.argv)
			require.NoError(t, err)
			assert.Equal(t, x.code, code, "%v: %s", x.argv, stderr)
			assert.Contains(t, string(stderr), x.message, x.argv)
		}
		out, _, code, err := wc.Run(ctx, []string{"systemctl", "is-active", "etcd"})
		require.NoError(t, err)
		assert.Equal(t, "inactive\n", string(out), "a unit a host has not is inactive, as systemctl says")
		assert.Equal(t, 3, code)
		assert.True(t, etcdAnswers(ctx, m1.IP, e.app.Etcd), "m1 still serves etcd: nothing above stopped it")
	})

	t.Run("etcd runs as the member etcd.env names", func(t *testing.T) {
		name := e.app.Etcd.MemberName
		sed := func(from, to string) {
			_, _, code, err := c.Run(ctx, []string{"sed", "-i", "s|^ETCD_NAME=" + from + "$|ETCD_NAME=" + to + "|", kubespraysim.EtcdEnvFile})
			require.NoError(t, err)
			require.Zero(t, code)
		}
		sed(name, "other")
		_, _, code, err := c.Run(ctx, []string{"systemctl", "stop", "etcd"})
		require.NoError(t, err)
		require.Zero(t, code)
		_, stderr, code, err := c.Run(ctx, []string{"systemctl", "start", "etcd"})
		require.NoError(t, err)
		assert.Equal(t, 1, code, "a member the data dir is not for does not start: %s", stderr)
		assert.Contains(t, string(stderr), "Job for etcd.service failed")
		sed("other", name)
		_, stderr, code, err = c.Run(ctx, []string{"systemctl", "start", "etcd"})
		require.NoError(t, err)
		require.Zero(t, code, "%s", stderr)
		assert.True(t, etcdAnswers(ctx, m1.IP, e.app.Etcd), "m1 serves etcd again")
	})
}

// restoreOnHost runs the restore contract's commands on h over c, exactly as the step runs
// them (argv; the snapshot on stdin once), with stamp; moved says whether a member must
// have been moved aside. With early, it first starts etcd before the kubelet has stopped
// the API server (as a step that does not wait would), which the host must refuse.
func restoreOnHost(t *testing.T, ctx context.Context, c *sshexec.Client, e *etcdSite, h *simhost.Host, snap, stamp string, moved, early bool) {
	t.Helper()
	run := func(argv ...string) (string, int) {
		out, stderr, code, err := c.Run(ctx, argv)
		require.NoError(t, err, "%v", argv)
		return string(out) + string(stderr), code
	}
	must := func(argv ...string) string {
		out, code := run(argv...)
		require.Zero(t, code, "%v: %s", argv, out)
		return out
	}
	if early { // the kubelet takes its time: the API server outlives the next commands
		t.Setenv(EnvKubeletStop, "1h")
	}
	must("mkdir", "-p", "-m", "0700", restoreetcd.StoppedDir)
	for _, f := range restoreetcd.ControlPlaneManifests {
		must("mv", "-f", path.Join(restoreetcd.ManifestsDir, f), path.Join(restoreetcd.StoppedDir, f))
	}
	if !early {
		awaitControlPlaneStopped(t, ctx, c)
	}
	must("systemctl", "stop", "etcd")
	out, code := run("systemctl", "is-active", "etcd")
	require.Equal(t, 3, code, "is-active after the stop: %s", out)
	require.Equal(t, "inactive\n", out)
	require.False(t, etcdAnswers(ctx, h.IP, e.app.Etcd), "a stopped etcd host serves no etcd")
	env := readEtcdEnv(t, ctx, c)
	d, name, peer, token := env["ETCD_DATA_DIR"], env["ETCD_NAME"], env["ETCD_INITIAL_ADVERTISE_PEER_URLS"], env["ETCD_INITIAL_CLUSTER_TOKEN"]
	if _, code := run("test", "-d", d+"/member"); code == 0 {
		must("mv", d+"/member", d+"/member.before-restore-"+stamp)
	}
	assert.Equal(t, moved, dirExists(h.File(d+"/member.before-restore-"+stamp)), "the member before the restore is moved aside when there is one")

	data, err := os.ReadFile(snap)
	require.NoError(t, err)
	db := d + "/restore-" + stamp + ".db"
	runWithStdin(t, h, []string{"install", "-m", "0600", "/dev/stdin", db}, data)
	must("/usr/local/bin/etcdutl", "snapshot", "restore", db, "--name", name, "--initial-cluster", name+"="+peer,
		"--initial-cluster-token", token, "--initial-advertise-peer-urls", peer, "--data-dir", d+"/restore-"+stamp)
	must("mv", d+"/restore-"+stamp+"/member", d+"/member")
	must("rmdir", d+"/restore-"+stamp)
	must("rm", db)
	owner := strings.TrimSpace(must("stat", "-c", "%U", d))
	must("chown", "-R", owner, d+"/member")
	must("sed", "-i", "s|^ETCD_INITIAL_CLUSTER=.*|ETCD_INITIAL_CLUSTER="+name+"="+peer+"|", "/etc/etcd.env")
	if early {
		out, code := run("systemctl", "start", "etcd")
		assert.NotZero(t, code, "etcd started from restored data under a running API server")
		assert.Contains(t, out, "Job for etcd.service failed")
		t.Setenv(EnvKubeletStop, "0s")
		awaitControlPlaneStopped(t, ctx, c)
		t.Setenv(EnvKubeletStop, "") // the default again
	}
	must("systemctl", "start", "etcd")
	for _, f := range restoreetcd.ControlPlaneManifests {
		must("mv", "-f", path.Join(restoreetcd.StoppedDir, f), path.Join(restoreetcd.ManifestsDir, f))
	}
}

// awaitControlPlaneStopped polls the host's crictl as the step does until it lists none of
// the control plane's containers.
func awaitControlPlaneStopped(t *testing.T, ctx context.Context, c *sshexec.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.Output(ctx, []string{"crictl", "ps", "--name", restoreetcd.ControlPlaneContainers, "-q"})
		require.NoError(t, err)
		if len(strings.TrimSpace(string(out))) == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the kubelet still runs %q a minute after the manifests moved", out)
		time.Sleep(200 * time.Millisecond)
	}
}

// readEtcdEnv reads /etc/etcd.env over c, as the step does (cat), into its keys.
func readEtcdEnv(t *testing.T, ctx context.Context, c *sshexec.Client) map[string]string {
	t.Helper()
	data, err := c.Output(ctx, []string{"cat", kubespraysim.EtcdEnvFile})
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env
}

// runWithStdin runs argv as root on h with stdin, which sshexec.Client does not give.
func runWithStdin(t *testing.T, h *simhost.Host, argv []string, stdin []byte) {
	t.Helper()
	signer, err := sshexec.LoadSigner(h.ClientKeyPath())
	require.NoError(t, err)
	known, err := knownhosts.New(h.KnownHostsPath())
	require.NoError(t, err)
	conn, err := ssh.Dial("tcp", h.Addr(), &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: known, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer conn.Close()
	s, err := conn.NewSession()
	require.NoError(t, err)
	defer s.Close()
	cmd, err := sshexec.Command("root", argv)
	require.NoError(t, err)
	s.Stdin = bytes.NewReader(stdin)
	out, err := s.CombinedOutput(cmd)
	require.NoError(t, err, "%v: %s", argv, out)
}

func pick(m map[string]string, keys ...string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
