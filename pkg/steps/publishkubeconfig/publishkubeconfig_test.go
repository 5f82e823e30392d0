package publishkubeconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

const conf = "apiVersion: v1\nkind: Config\n# credentials would be here\n"

func provisioning() *bpav1.Provisioning {
	return &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov", UID: "prov-uid", Labels: map[string]string{"cluster": "c1"}}}
}

func staging() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "wf-1-admin-conf"},
		Data:       map[string][]byte{"value": []byte(conf)},
	}
}

func setUp(t *testing.T, objs ...client.Object) (*options, client.Client, *[]string) {
	t.Helper()
	hosts := []bpav1.HostStatus{
		{Name: "master-1", IP: "10.0.0.1", Roles: []string{"master", "worker"}, MAC: "aa:bb:cc:dd:ee:01"},
		{Name: "worker-1", IP: "10.0.0.2", Roles: []string{"worker"}},
	}
	data, _ := json.Marshal(hosts)
	f := filepath.Join(t.TempDir(), "hosts.json")
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs []string
	o := &options{cr: stepio.CR{Namespace: "bpa", Name: "prov"}, hostsFile: f, workflowName: "wf-1",
		logf: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }}
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	return o, c, &logs
}

var wantOwner = []metav1.OwnerReference{{
	APIVersion: "bpa.akraino.org/v1alpha1", Kind: "Provisioning", Name: "prov", UID: "prov-uid",
	Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
}}

func get[T client.Object](t *testing.T, c client.Client, name string, obj T) (T, bool) {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "bpa", Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return obj, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj, true
}

func TestPublish(t *testing.T) {
	o, c, logs := setUp(t, provisioning(), staging())
	if err := o.run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	s, ok := get(t, c, "c1-kubeconfig", &corev1.Secret{})
	if !ok {
		t.Fatal("no c1-kubeconfig")
	}
	if string(s.Data["value"]) != conf || s.Type != "cluster.x-k8s.io/secret" || s.Labels["bpa.akraino.org/cluster"] != "c1" {
		t.Errorf("secret: type %s labels %v keys %d", s.Type, s.Labels, len(s.Data))
	}
	if !reflect.DeepEqual(s.OwnerReferences, wantOwner) {
		t.Errorf("secret owners %+v", s.OwnerReferences)
	}
	cm, ok := get(t, c, "c1-configmap", &corev1.ConfigMap{})
	if !ok {
		t.Fatal("no c1-configmap")
	}
	want := map[string]string{"MASTER_master-1": "10.0.0.1", "WORKER_master-1": "10.0.0.1", "WORKER_worker-1": "10.0.0.2"}
	if !reflect.DeepEqual(cm.Data, want) || !reflect.DeepEqual(cm.OwnerReferences, wantOwner) {
		t.Errorf("configmap data %v owners %+v", cm.Data, cm.OwnerReferences)
	}
	if _, ok := get(t, c, "wf-1-admin-conf", &corev1.Secret{}); ok {
		t.Error("the staging Secret is still there")
	}
	if strings.Contains(strings.Join(*logs, "\n"), "credentials") {
		t.Error("the kubeconfig was logged")
	}
	if _, ok := get(t, c, "c1-node-reader", &corev1.Secret{}); ok {
		t.Error("a node-reader Secret published though verify staged none")
	}

	// A retry after everything was done (staging already deleted) converges.
	if err := o.run(context.Background(), c); err != nil {
		t.Errorf("retry: %v", err)
	}
}

func TestPublishUpdatesExisting(t *testing.T) {
	oldSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-kubeconfig", Annotations: map[string]string{"bpa.akraino.org/workflow": "wf-0"}},
		Type:       "cluster.x-k8s.io/secret",
		Data:       map[string][]byte{"value": []byte("old"), "stale": []byte("x")},
	}
	oldCM := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-configmap"},
		Data:       map[string]string{"WORKER_gone": "10.0.0.9", "MASTER_master-1": "10.0.0.100", "KUD_DEBUG": "true"},
	}
	o, c, _ := setUp(t, provisioning(), staging(), oldSecret, oldCM)
	if err := o.run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	s, _ := get(t, c, "c1-kubeconfig", &corev1.Secret{})
	if !reflect.DeepEqual(s.Data, map[string][]byte{"value": []byte(conf)}) || s.Annotations["bpa.akraino.org/workflow"] != "wf-1" {
		t.Errorf("secret not replaced: %v %v", s.Annotations, s.Data)
	}
	cm, _ := get(t, c, "c1-configmap", &corev1.ConfigMap{})
	want := map[string]string{"MASTER_master-1": "10.0.0.1", "WORKER_master-1": "10.0.0.1", "WORKER_worker-1": "10.0.0.2", "KUD_DEBUG": "true"}
	if !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("configmap %v, want %v (a node that left is dropped, other keys kept)", cm.Data, want)
	}
}

func TestPublishRefuses(t *testing.T) {
	other := true
	ownedElsewhere := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-kubeconfig", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Name: "c1", UID: "capi", Controller: &other}}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": []byte("capi's")},
	}
	wrongType := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-kubeconfig"}, Type: corev1.SecretTypeOpaque}
	emptyStaging := staging()
	emptyStaging.Data = nil
	for name, tc := range map[string]struct {
		objs []client.Object
		want string
	}{
		"no staging Secret":      {[]client.Object{provisioning()}, "staging Secret bpa/wf-1-admin-conf not found"},
		"empty staging Secret":   {[]client.Object{provisioning(), emptyStaging}, `has no "value" key`},
		"owned by another":       {[]client.Object{provisioning(), staging(), ownedElsewhere}, "already owned by another Cluster controller"},
		"Secret of other type":   {[]client.Object{provisioning(), staging(), wrongType}, "exists with type Opaque"},
		"no Provisioning":        {[]client.Object{staging()}, "reading Provisioning bpa/prov"},
		"published by another":   {[]client.Object{provisioning(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-kubeconfig", Annotations: map[string]string{"bpa.akraino.org/workflow": "wf-0"}}}}, "not found"},
		"Provisioning unlabeled": {[]client.Object{&bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov"}}, staging()}, "metadata.labels.cluster: required"},
	} {
		t.Run(name, func(t *testing.T) {
			o, c, _ := setUp(t, tc.objs...)
			err := o.run(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "credentials") {
				t.Error("error shows the kubeconfig")
			}
		})
	}
	// Refusing leaves the other owner's Secret untouched.
	o, c, _ := setUp(t, provisioning(), staging(), ownedElsewhere)
	_ = o.run(context.Background(), c)
	if s, _ := get(t, c, "c1-kubeconfig", &corev1.Secret{}); string(s.Data["value"]) != "capi's" {
		t.Error("overwrote a Secret controlled by another owner")
	}
	if _, ok := get(t, c, "wf-1-admin-conf", &corev1.Secret{}); !ok {
		t.Error("the staging Secret was deleted although nothing was published")
	}
}

func TestCommandFlags(t *testing.T) {
	err := Command().ParseFlags([]string{"--namespace=bpa", "--provisioning=p", "--hosts-file=/bpa/in/hosts.json", "--workflow-name=wf"})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPublishTakesOverFromAnotherProvisioningOfTheCluster: a Provisioning of the cluster that
// no longer exists published before; this run's kubeconfig is now the cluster's.
func TestPublishTakesOverFromAnotherProvisioningOfTheCluster(t *testing.T) {
	yes := true
	earlier := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-kubeconfig", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "bpa.akraino.org/v1alpha1", Kind: "Provisioning", Name: "prov-a", UID: "uid-a", Controller: &yes}}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": []byte("earlier")},
	}
	o, c, _ := setUp(t, provisioning(), staging(), earlier)
	if err := o.run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	s, _ := get(t, c, "c1-kubeconfig", &corev1.Secret{})
	if string(s.Data["value"]) != conf || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Name != "prov" {
		t.Errorf("not taken over: owners %v", s.OwnerReferences)
	}
}

// TestPublishNeverTakesOverFromALiveProvisioning: a Provisioning labelled with someone
// else's cluster must not take over that cluster's published kubeconfig while its
// Provisioning exists (the attack of a borrowed cluster label).
func TestPublishNeverTakesOverFromALiveProvisioning(t *testing.T) {
	yes := true
	victim := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov-a", UID: "uid-a", Labels: map[string]string{"cluster": "c1"}}}
	theirs := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "c1-kubeconfig", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "bpa.akraino.org/v1alpha1", Kind: "Provisioning", Name: "prov-a", UID: "uid-a", Controller: &yes}}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": []byte("theirs")},
	}
	o, c, _ := setUp(t, provisioning(), victim, staging(), theirs)
	err := o.run(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "it belongs to Provisioning prov-a, which still exists") {
		t.Fatalf("want a refusal naming the live owner, got %v", err)
	}
	s, _ := get(t, c, "c1-kubeconfig", &corev1.Secret{})
	if string(s.Data["value"]) != "theirs" || s.OwnerReferences[0].UID != "uid-a" {
		t.Errorf("the victim's kubeconfig changed: owners %v", s.OwnerReferences)
	}
}

// With spec.remediation, verify stages the node-reader kubeconfig beside the admin's: it is
// published as <cluster>-node-reader, owned by the Provisioning like the kubeconfig, and
// the admin kubeconfig is not in it.
func TestPublishNodeReader(t *testing.T) {
	st := staging()
	st.Data["node-reader"] = []byte("node reader's kubeconfig")
	o, c, _ := setUp(t, provisioning(), st)
	if err := o.run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	s, ok := get(t, c, "c1-node-reader", &corev1.Secret{})
	if !ok {
		t.Fatal("no c1-node-reader")
	}
	if !reflect.DeepEqual(s.Data, map[string][]byte{"value": []byte("node reader's kubeconfig")}) || s.Labels["app.kubernetes.io/managed-by"] != "bpa" {
		t.Errorf("node-reader Secret: data %q labels %v", s.Data, s.Labels)
	}
	if !reflect.DeepEqual(s.OwnerReferences, wantOwner) {
		t.Errorf("node-reader owners %+v", s.OwnerReferences)
	}
}
