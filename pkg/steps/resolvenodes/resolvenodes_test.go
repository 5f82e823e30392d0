package resolvenodes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

func sw(master, worker []bpav1.SoftwareItem) *bpav1.Software {
	return &bpav1.Software{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "sw", Labels: map[string]string{"cluster": "c1"}, Generation: 3},
		Spec:       bpav1.SoftwareSpec{MasterSoftware: master, WorkerSoftware: worker},
	}
}

var (
	master = []bpav1.SoftwareItem{{Name: "htop"}, {Name: "jq", Version: "1.6-2"}}
	worker = []bpav1.SoftwareItem{{Name: "curl"}, {Name: "jq"}, {Name: "telnet", State: bpav1.PackageAbsent}}
)

// publisher is the Provisioning that published c1-configmap.
func publisher() *bpav1.Provisioning {
	return &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov", UID: "prov-uid", Labels: map[string]string{"cluster": "c1"}}}
}

func configMap(data map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-configmap"}, Data: data}
	yes := true
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "bpa.akraino.org/v1alpha1", Kind: "Provisioning", Name: "prov", UID: "prov-uid", Controller: &yes}}
	return cm
}

func run(t *testing.T, objs ...client.Object) (nodes, hash string, err error) {
	return runWith(t, nil, objs...)
}

// runWith is run with some options changed (--latest, --scope).
func runWith(t *testing.T, change func(*options), objs ...client.Object) (nodes, hash string, err error) {
	t.Helper()
	dir := t.TempDir()
	o := &options{namespace: "bpa", software: "sw", generation: 3,
		output: filepath.Join(dir, "out", "nodes.json"), outputHash: filepath.Join(dir, "out", "nodes-hash"),
		outputNames: filepath.Join(dir, "out", "names.json"),
		logf:        t.Logf}
	if change != nil {
		change(o)
	}
	if !slices.ContainsFunc(objs, func(o client.Object) bool { return o.GetName() == "prov" }) {
		objs = append(objs, publisher())
	}
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	if err := o.run(context.Background(), c); err != nil {
		return "", "", err
	}
	n, err := os.ReadFile(o.output)
	if err != nil {
		t.Fatal(err)
	}
	h, err := os.ReadFile(o.outputHash)
	if err != nil {
		t.Fatal(err)
	}
	// The fan-out's items are the nodes' names, in the nodes' order.
	var list []struct{ Name string }
	var names []string
	if err := json.Unmarshal(n, &list); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(o.outputNames); err != nil || json.Unmarshal(b, &names) != nil {
		t.Fatalf("names: %v %s", err, b)
	}
	want := []string{}
	for _, x := range list {
		want = append(want, x.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	return string(n), string(h), nil
}

const wantNodes = `[` +
	`{"name":"master-1","ip":"10.0.0.1","roles":["master","worker"],"packages":["curl","htop",{"jq":{"version":"1.6-2"}},{"telnet":{"state":"absent"}}]},` +
	`{"name":"master-2","ip":"10.0.0.2","roles":["master"],"packages":["htop",{"jq":{"version":"1.6-2"}}]},` +
	`{"name":"worker-1","ip":"10.0.0.3","roles":["worker"],"packages":["curl","jq",{"telnet":{"state":"absent"}}]}]`

func TestFromConfigMap(t *testing.T) {
	cm := configMap(map[string]string{
		"WORKER_worker-1": "10.0.0.3", "MASTER_master-2": "10.0.0.2", "MASTER_master-1": "10.0.0.1", "WORKER_master-1": "10.0.0.1",
		"KUD_DEBUG": "true",
	})
	nodes, hash, err := run(t, sw(master, worker), cm)
	if err != nil {
		t.Fatal(err)
	}
	if nodes != wantNodes {
		t.Errorf("got\n%s\nwant\n%s", nodes, wantNodes)
	}
	if len(hash) != 12 {
		t.Errorf("hash %q", hash)
	}

	// A node joining changes the hash and adds exactly that node.
	cm.Data["WORKER_worker-2"] = "10.0.0.4"
	nodes2, hash2, err := run(t, sw(master, worker), cm)
	if err != nil {
		t.Fatal(err)
	}
	if hash2 == hash || !strings.HasPrefix(nodes2, strings.TrimSuffix(wantNodes, "]")+`,{"name":"worker-2"`) {
		t.Errorf("after a node joined: hash %s→%s\n%s", hash, hash2, nodes2)
	}
}

// TestFallBackToProvisioning: with no ConfigMap, the Provisioning's hosts give the same
// nodes and the same hash the ConfigMap would.
func TestFallBackToProvisioning(t *testing.T) {
	hosts := []bpav1.HostStatus{
		{Name: "worker-1", IP: "10.0.0.3", Roles: []string{"worker"}, MAC: "aa:bb:cc:dd:ee:03"},
		{Name: "master-1", IP: "10.0.0.1", Roles: []string{"master", "worker"}},
		{Name: "master-2", IP: "10.0.0.2", Roles: []string{"master"}},
	}
	failed := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "a-failed", Labels: map[string]string{"cluster": "c1"}}}
	failed.Status.Phase = bpav1.PhaseFailed
	failed.Status.Hosts = []bpav1.HostStatus{{Name: "old", IP: "10.9.9.9", Roles: []string{"master"}}}
	good := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "b-good", Labels: map[string]string{"cluster": "c1"}}}
	good.Status.Phase = bpav1.PhaseSucceeded
	good.Status.Hosts = hosts
	otherCluster := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "0-other", Labels: map[string]string{"cluster": "c2"}}}
	otherCluster.Status.Phase = bpav1.PhaseSucceeded
	otherCluster.Status.Hosts = []bpav1.HostStatus{{Name: "x", IP: "10.8.8.8", Roles: []string{"master"}}}

	nodes, hash, err := run(t, sw(master, worker), failed, good, otherCluster)
	if err != nil {
		t.Fatal(err)
	}
	if nodes != wantNodes {
		t.Errorf("got\n%s\nwant\n%s", nodes, wantNodes)
	}
	_, cmHash, err := run(t, sw(master, worker), configMap(map[string]string{
		"WORKER_worker-1": "10.0.0.3", "MASTER_master-2": "10.0.0.2", "MASTER_master-1": "10.0.0.1", "WORKER_master-1": "10.0.0.1"}))
	if err != nil || cmHash != hash {
		t.Errorf("hash from Provisioning %s, from ConfigMap %s (%v)", hash, cmHash, err)
	}
}

func TestErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		objs []client.Object
		want string
	}{
		"no nodes anywhere":    {[]client.Object{sw(master, worker)}, "cluster c1 has no nodes yet"},
		"empty ConfigMap":      {[]client.Object{sw(master, worker), configMap(map[string]string{"X": "y"})}, "has no MASTER_<node> or WORKER_<node> keys"},
		"bad IP":               {[]client.Object{sw(master, worker), configMap(map[string]string{"MASTER_m": "10.0.0.1; id"})}, `"10.0.0.1; id" is not an IP address`},
		"injection in name":    {[]client.Object{sw([]bpav1.SoftwareItem{{Name: "curl;reboot"}}, nil), configMap(map[string]string{"MASTER_m": "10.0.0.1"})}, `spec.masterSoftware: invalid software items: package name "curl;reboot"`},
		"injection in version": {[]client.Object{sw(nil, []bpav1.SoftwareItem{{Name: "jq", Version: "1.6 $(id)"}}), configMap(map[string]string{"MASTER_m": "10.0.0.1"})}, `spec.workerSoftware: invalid software items: version "1.6 $(id)"`},
		"role conflict":        {[]client.Object{sw([]bpav1.SoftwareItem{{Name: "jq", Version: "1.5"}}, []bpav1.SoftwareItem{{Name: "jq", Version: "1.6"}}), configMap(map[string]string{"MASTER_m": "10.0.0.1", "WORKER_m": "10.0.0.1"})}, "host m (master+worker)"},
		"no Software":          {nil, "reading Software bpa/sw"},
		// A Software acts only on nodes a live Provisioning of its cluster, in its namespace,
		// published: never on a hand-made list, a deleted CR's or another cluster's.
		"hand-made ConfigMap": {[]client.Object{sw(master, worker), func() client.Object {
			cm := configMap(map[string]string{"MASTER_m": "10.9.9.9"})
			cm.OwnerReferences = nil
			return cm
		}()}, "it was not published by a Provisioning"},
		"publisher gone": {[]client.Object{sw(master, worker), configMap(map[string]string{"MASTER_m": "10.9.9.9"}),
			&bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov", UID: "new-uid", Labels: map[string]string{"cluster": "c1"}}}},
			"its Provisioning prov is not the one of cluster c1 that published it"},
		"publisher of another cluster": {[]client.Object{sw(master, worker), configMap(map[string]string{"MASTER_m": "10.9.9.9"}),
			&bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov", UID: "prov-uid", Labels: map[string]string{"cluster": "c2"}}}},
			"its Provisioning prov is not the one of cluster c1"},
		"no cluster label": {[]client.Object{&bpav1.Software{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "sw"}}}, "metadata.labels.cluster"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := run(t, tc.objs...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCommandFlags(t *testing.T) {
	err := Command().ParseFlags([]string{"--namespace=bpa", "--software=sw", "--generation=3", "--output=/tmp/bpa/out/nodes.json", "--output-hash=/tmp/bpa/out/nodes-hash"})
	if err != nil {
		t.Fatal(err)
	}
}
