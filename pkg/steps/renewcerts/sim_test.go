package renewcerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
)

// This package's bridge for its simulated machines: one no other test uses.
const (
	simBridge     = "bpasimrenewc0"
	simBridgeCIDR = "10.216.0.1/24"
)

// outageBound is the longest a client of the cluster may go without an answer from some
// master while the step renews: a tenth of a second's probing more than nothing.
const outageBound = time.Second

// restart is how long a simulated master's API server is away when its pods restart.
const restart = 2 * time.Second

// env is a cluster of three masters (each an etcd member) and a worker, built by the
// stand-in kubespray with certificates that expire in two days, and the step's options for it.
type env struct {
	c     *sim.Cluster
	cr    client.Client
	o     *options
	mu    sync.Mutex
	logs  []string
	names []string
}

func newSimEnv(t *testing.T, ctx context.Context) *env {
	t.Helper()
	t.Setenv("BPA_SIM_CERT_VALIDITY", "48h")
	t.Setenv(sim.EnvAPIServerRestart, restart.String())
	e := &env{names: []string{"m1", "m2", "m3"}}
	hosts := []bpav1.HostStatus{{Name: "w1", Roles: []string{"worker"}}}
	for _, n := range e.names {
		hosts = append(hosts, bpav1.HostStatus{Name: n, Roles: []string{"master"}, Etcd: true})
	}
	e.c = sim.StartCluster(t, ctx, sim.ClusterOptions{Bridge: simBridge, CIDR: simBridgeCIDR, Hosts: hosts})
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov"}}
	p.Status.Applied = &bpav1.AppliedState{Hosts: e.c.Hosts}
	e.cr = crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).WithStatusSubresource(p).Build()
	fs := pflag.NewFlagSet("renew-certificates", pflag.ContinueOnError)
	e.o = &options{cr: stepio.CR{Namespace: "bpa", Name: "prov"}, workflow: "prov-renew-1", flags: fs,
		timeout: 5 * time.Minute, scriptTimeout: 2 * time.Minute, apiserverWait: 20 * time.Second, poll: 100 * time.Millisecond,
		output: t.TempDir() + "/" + stepio.RenewalFile,
		logf: func(format string, args ...any) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.logs = append(e.logs, fmt.Sprintf(format, args...))
			t.Logf(format, args...)
		}}
	e.o.ssh.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--ssh-key=" + e.c.SSH.ClientKeyPath(), "--known-hosts=" + e.c.SSH.KnownHostsPath()}))
	return e
}

// kubeadmLeaves are the expiry of each master's kubeadm leaves on disk, by master and file.
func (e *env) kubeadmLeaves(t *testing.T) map[string]map[string]time.Time {
	t.Helper()
	out := map[string]map[string]time.Time{}
	for _, n := range e.names {
		certs, err := simcerts.Check(e.c.Machines[n].File(simcerts.CertDir))
		require.NoError(t, err)
		out[n] = map[string]time.Time{}
		for _, c := range certs {
			out[n][c.Name] = c.NotAfter
		}
	}
	return out
}

// nginxProbe asks the application apiserver /readyz every 100 ms through the first master
// that answers, as kubespray's nginx-proxy on a worker tries its upstreams, until stopped;
// it returns the longest time without an answer.
type nginxProbe struct {
	stop chan struct{}
	done chan time.Duration
}

func startProbe(t *testing.T, c *sim.Cluster, masters []string) *nginxProbe {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(c.App.CAData))
	p := &nginxProbe{stop: make(chan struct{}), done: make(chan time.Duration, 1)}
	clients := map[string]*http.Client{}
	for _, n := range masters {
		clients[n] = &http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true,
			// The application apiserver's certificate holds every machine's address.
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	}
	ask := func() bool {
		for _, n := range masters {
			url := "https://" + net.JoinHostPort(c.Machines[n].IP, strconv.Itoa(c.App.Port)) + "/readyz"
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Authorization", "Bearer "+c.App.Token)
			if resp, err := clients[n].Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return true
				}
			}
		}
		return false
	}
	go func() {
		last, longest := time.Now(), time.Duration(0)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				p.done <- max(longest, time.Since(last))
				return
			case <-tick.C:
				if ask() {
					longest, last = max(longest, time.Since(last)), time.Now()
				}
			}
		}
	}()
	return p
}

func (p *nginxProbe) longestGap() time.Duration {
	close(p.stop)
	return <-p.done
}

// TestRenewalHasNoOutage: on a cluster of three masters the stand-in kubespray built with
// certificates that expire in 48 h, whose API servers are away 2 s when their pods restart,
// the step renews every master's kubeadm certificates (later NotAfter on disk and served)
// while a client asking the API server through any master that answers, every 100 ms, never
// goes more than outageBound without an answer; the output says so, master by master. The
// same client, while the same script runs on all three at once (as three timers might), goes
// longer than outageBound without an answer: the bound can fail.
func TestRenewalHasNoOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newSimEnv(t, ctx)
	before := e.kubeadmLeaves(t)
	time.Sleep(time.Second) // NotAfter has seconds: a renewal must be later

	probe := startProbe(t, e.c, e.names)
	start := time.Now()
	require.NoError(t, e.o.run(ctx, e.cr))
	took := time.Since(start)
	gap := probe.longestGap()
	t.Logf("renew-certificates on 3 masters in %s; the longest the cluster went without an answer: %s", took.Round(time.Millisecond), gap.Round(time.Millisecond))
	assert.Less(t, gap, outageBound, "one master at a time: the others answer")

	after := e.kubeadmLeaves(t)
	for _, n := range e.names {
		for file, na := range before[n] {
			assert.True(t, after[n][file].After(na), "%s: %s renewed (%s -> %s)", n, file, na, after[n][file])
		}
	}
	data, err := os.ReadFile(e.o.output)
	require.NoError(t, err)
	t.Logf("output: %s", data)
	var out stepio.Renewal
	require.NoError(t, json.Unmarshal(data, &out))
	assert.Equal(t, "prov-renew-1", out.Workflow)
	require.Len(t, out.Masters, 3)
	for i, m := range out.Masters {
		assert.Equal(t, e.names[i], m.Name, "in order")
		assert.True(t, m.NotAfterAfter.After(m.NotAfterBefore), "%s: served later", m.Name)
		assert.True(t, m.NotAfterBefore.Equal(before[m.Name]["apiserver"]), "%s: what was served is kubeadm's apiserver.crt", m.Name)
		assert.True(t, m.NotAfterAfter.Equal(after[m.Name]["apiserver"]), "%s: and after, the renewed one", m.Name)
		assert.InDelta(t, restart.Seconds(), m.AwaySeconds, 1.5, "%s: away about as long as its restart", m.Name)
	}

	t.Run("all at once, the same client sees an outage", func(t *testing.T) {
		probe := startProbe(t, e.c, e.names)
		var wg sync.WaitGroup
		for _, n := range e.names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := e.c.Machines[n]
				conn, err := sshexec.Dial(ctx, h.IP, sshexec.Config{Port: h.Port, KeyFile: h.ClientKeyPath(), KnownHostsFile: h.KnownHostsPath()})
				if !assert.NoError(t, err) {
					return
				}
				defer conn.Close()
				_, err = conn.Output(ctx, []string{Script})
				assert.NoError(t, err, n)
			}()
		}
		wg.Wait()
		time.Sleep(restart) // every API server back
		gap := probe.longestGap()
		t.Logf("the script on all three at once: the longest the cluster went without an answer: %s", gap.Round(time.Millisecond))
		assert.Greater(t, gap, outageBound)
	})
}

// TestRenewalStopsAtFailingMaster: the checks before any renewal stop the step, nothing
// changed (no crictl call anywhere), when m3 lacks kubespray's script and when m2's API
// server does not answer. Then m2's kubeadm CA key is gone, so its renewal renews nothing
// (kubespray's script goes on and exits 0, its API server restarted on the old
// certificate): the step renews m1, stops at m2 saying the served certificate was not
// renewed, and never touches m3 (its certificates as they were, its crictl never called).
func TestRenewalStopsAtFailingMaster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := newSimEnv(t, ctx)
	e.o.apiserverWait = 5 * time.Second
	before := e.kubeadmLeaves(t)
	noRestarts := func(t *testing.T) {
		t.Helper()
		for _, n := range e.names {
			assert.Empty(t, e.c.Machines[n].CallsTo("crictl"), "%s: no pod restarted", n)
		}
		assert.Equal(t, before, e.kubeadmLeaves(t), "nothing renewed")
	}

	t.Run("a master without the script", func(t *testing.T) {
		script := e.c.Machines["m3"].File(Script)
		require.NoError(t, os.Rename(script, script+".aside"))
		defer func() { require.NoError(t, os.Rename(script+".aside", script)) }()
		err := e.o.run(ctx, e.cr)
		require.Error(t, err)
		t.Logf("error: %v", err)
		assert.Regexp(t, `^CertificateRenewalFailed: m3: no /usr/local/bin/k8s-certs-renew.sh \(kubespray's control-plane role installs it\): .*; nothing was changed$`, err.Error())
		noRestarts(t)
	})

	t.Run("an API server that does not answer", func(t *testing.T) {
		t.Setenv(sim.EnvAPIServerRestart, "5s")
		m2 := e.c.Machines["m2"]
		conn, err := sshexec.Dial(ctx, m2.IP, sshexec.Config{Port: m2.Port, KeyFile: m2.ClientKeyPath(), KnownHostsFile: m2.KnownHostsPath()})
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Output(ctx, []string{"sh", "-c", "crictl pods --namespace kube-system --name kube-apiserver -q | xargs crictl rmp -f"})
		require.NoError(t, err)
		m2.ResetCalls()
		err = e.o.run(ctx, e.cr)
		require.Error(t, err)
		t.Logf("error: %v", err)
		assert.Regexp(t, `^CertificateRenewalFailed: before any renewal: m2: the API server at its 127\.0\.0\.1:\d+: .*; nothing was changed$`, err.Error())
		noRestarts(t)
		time.Sleep(5 * time.Second) // m2 serves again
	})

	require.NoError(t, os.Remove(e.c.Machines["m2"].File(simcerts.CertDir+"/ca.key")))
	time.Sleep(time.Second)
	err := e.o.run(ctx, e.cr)
	require.Error(t, err)
	t.Logf("error: %v", err)
	assert.Regexp(t, `^CertificateRenewalFailed: stopped at master m2: .*not later than before the script: it was not renewed; renewed before it: m1; not touched: m3$`, err.Error())
	after := e.kubeadmLeaves(t)
	assert.True(t, after["m1"]["apiserver"].After(before["m1"]["apiserver"]), "m1 renewed")
	assert.Equal(t, before["m2"], after["m2"], "m2: nothing renewed")
	assert.Equal(t, before["m3"], after["m3"], "m3 untouched")
	assert.Empty(t, e.c.Machines["m3"].CallsTo("crictl"), "m3's pods never restarted")
	assert.NotEmpty(t, e.c.Machines["m2"].CallsTo("crictl"), "m2's were, by its script")

	data, err := os.ReadFile(e.o.output)
	require.NoError(t, err)
	var out stepio.Renewal
	require.NoError(t, json.Unmarshal(data, &out))
	require.Len(t, out.Masters, 1, "the output lists what was renewed")
	assert.Equal(t, "m1", out.Masters[0].Name)
}
