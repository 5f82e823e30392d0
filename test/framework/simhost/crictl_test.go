package simhost

import (
	"strings"
	"sync"
	"testing"
)

// TestCrictl: a host's crictl lists the running pods the test gave it (Pod) as kubespray's
// k8s-certs-renew.sh asks (namespace, a name regular expression, -q), and `crictl rmp -f`
// removes them (the test's Removed is called; the next sandbox has a new ID); an unknown
// ID, no ID, no -f, another command and a user other than root fail; `crictl ps` lists the
// running pods' containers by name; each call is recorded.
func TestCrictl(t *testing.T) {
	h := NewCluster(t).Start("m1", "127.0.1.22")
	var mu sync.Mutex
	running := map[string]bool{"kube-apiserver-m1": true, "kube-scheduler-m1": true, "coredns-1": true}
	removed := map[string]int{}
	for _, p := range []struct{ ns, name string }{{"kube-system", "kube-apiserver-m1"}, {"kube-system", "kube-scheduler-m1"}, {"kube-system", "kube-controller-manager-m1"}, {"default", "coredns-1"}} {
		h.AddPod(Pod{Namespace: p.ns, Name: p.name, Container: strings.TrimSuffix(p.name, "-m1"),
			Running: func() bool { mu.Lock(); defer mu.Unlock(); return running[p.name] },
			Removed: func() { mu.Lock(); defer mu.Unlock(); removed[p.name]++ }})
	}
	run := func(cmd string) string {
		out, err := h.exec(cmd + " 2>&1; echo \"rc=$?\"")
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return string(out)
	}
	const pods = "crictl pods --namespace kube-system --name 'kube-scheduler-*|kube-controller-manager-*|kube-apiserver-*|etcd-*' -q"
	ids := strings.Fields(strings.TrimSuffix(run(pods), "rc=0\n"))
	if len(ids) != 2 {
		t.Fatalf("%s: %q; want the two running control-plane pods", pods, ids)
	}
	if out := run(pods + " | xargs crictl rmp -f"); !strings.HasSuffix(out, "rc=0\n") || strings.Count(out, "Removed sandbox") != 2 {
		t.Errorf("rmp -f: %q", out)
	}
	mu.Lock()
	if removed["kube-apiserver-m1"] != 1 || removed["kube-scheduler-m1"] != 1 || len(removed) != 2 {
		t.Errorf("removed: %v", removed)
	}
	mu.Unlock()
	again := strings.Fields(strings.TrimSuffix(run(pods), "rc=0\n"))
	if len(again) != 2 || again[0] == ids[0] || again[1] == ids[1] {
		t.Errorf("after rmp: %q; want new sandboxes of the same two (were %q)", again, ids)
	}
	for cmd, want := range map[string]string{
		"crictl rmp -f " + ids[0]:   "rpc error: code = NotFound",
		"crictl rmp -f":             "ID cannot be empty",
		"crictl rmp " + again[0]:    "is running, please stop it first",
		"crictl ps -a":              "crictl (simhost): ps -a is not simulated",
		"crictl pods --label a=b":   "crictl (simhost): pods --label is not simulated",
		"crictl pods --name '(' -q": "invalid --name",
	} {
		if out := run(cmd); !strings.Contains(out, want) || !strings.HasSuffix(out, "rc=1\n") {
			t.Errorf("%s: %q; want %q and exit 1", cmd, out, want)
		}
	}
	// ps lists the running containers by name: the scheduler's only once it stops.
	const ps = "crictl ps --name '^kube-(apiserver|controller-manager|scheduler)$' -q"
	if got := strings.Fields(strings.TrimSuffix(run(ps), "rc=0\n")); len(got) != 2 {
		t.Errorf("%s: %q; want the two running control-plane containers", ps, got)
	}
	mu.Lock()
	running["kube-scheduler-m1"] = false
	mu.Unlock()
	if got := run(ps); strings.Count(got, "\n") != 2 {
		t.Errorf("%s with the scheduler stopped: %q; want one", ps, got)
	}
	if a := h.crictl(1000, []string{"pods"}); a.Code != 1 || !strings.Contains(a.Stderr, "permission denied") {
		t.Errorf("crictl pods as uid 1000: %+v", a)
	}
	if n := len(h.CallsTo("crictl")); n != 12 {
		t.Errorf("%d crictl calls recorded; want 12", n)
	}
}
