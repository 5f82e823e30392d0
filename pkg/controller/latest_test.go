package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/observe/observetest"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

const siteURL = "https://artifacts.site:8443"

// latestSite is a provisioned cluster c1 (m1, w1, w2) whose Provisioning names an artifact
// server the policy lists with its key, CA and index "site", and a Software tracking htop on
// every host and pinning jq on masters.
type latestSite struct {
	t   *testing.T
	r   *runReconciler
	c   client.Client
	rec *record.FakeRecorder
}

// firstHtop is the htop version the index holds when the site starts.
const firstHtop = "3.2.2-2"

func newLatestSite(t *testing.T, policyIndex string) *latestSite {
	ca := string(nodetrusttest.NewCA(t, []string{"artifacts.site"}).PEM) // the policy gives nodes only a name-constrained CA
	_, public := artifactstest.AptKey(t)
	key, err := os.ReadFile(public)
	require.NoError(t, err)
	prov := newProvisioning()
	prov.Spec.Offline = &bpav1.OfflineConfig{URL: siteURL}
	prov.Status.Phase = bpav1.PhaseSucceeded
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1-configmap",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning", Name: "p", UID: "uid-p", Controller: ptr.To(true)}}},
		Data: map[string]string{"MASTER_m1": "10.0.0.1", "WORKER_w1": "10.0.0.2", "WORKER_w2": "10.0.0.3"}}
	pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName}, Spec: bpav1.BPAPolicySpec{
		ArtifactServers: []bpav1.ArtifactServer{{URL: siteURL, CABundle: ca, AptKey: string(key), Index: policyIndex}}}}
	sw := &bpav1.Software{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sw", Generation: 1, UID: "uid-sw", Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.SoftwareSpec{AptSource: bpav1.AptSourceBPA,
			MasterSoftware: []bpav1.SoftwareItem{{Name: "htop", Version: "latest"}, {Name: "jq", Version: "1.6-2.1"}},
			WorkerSoftware: []bpav1.SoftwareItem{{Name: "htop", Version: "latest"}}}}
	objs := []client.Object{prov, cm, pol, sw, sshSecret("c1-ssh", "c1"),
		&bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: "site"}, Status: bpav1.ArtifactIndexStatus{Revision: 1,
			Packages: []bpav1.PackageVersion{{Name: "htop", Version: firstHtop}, {Name: "jq", Version: "1.6-2.1"}}}},
		// What a rogue writer put in an index the policy does not name for this server.
		&bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: "rogue"}, Status: bpav1.ArtifactIndexStatus{Revision: 9,
			Packages: []bpav1.PackageVersion{{Name: "htop", Version: "99.0"}}}},
	}
	// The apiserver stamps creation times, which order a CR's Workflows; the fake does not.
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stamp := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		created = created.Add(time.Minute)
		obj.SetCreationTimestamp(metav1.NewTime(created))
		return c.Create(ctx, obj, opts...)
	}}
	b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithInterceptorFuncs(stamp).
		WithStatusSubresource(&bpav1.Provisioning{}, &bpav1.Software{}, &bpav1.ArtifactIndex{})
	for _, i := range cacheIndexes {
		b = b.WithIndex(i.obj, i.field, i.extract)
	}
	c := b.Build()
	rec := record.NewFakeRecorder(100)
	return &latestSite{t: t, c: c, rec: rec, r: &runReconciler{Client: c, Reader: c, Recorder: rec, kind: softwareKind(c, c)}}
}

func (s *latestSite) reconcile() *bpav1.Software {
	s.t.Helper()
	_, err := s.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "sw"}})
	require.NoError(s.t, err)
	sw := &bpav1.Software{}
	require.NoError(s.t, s.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "sw"}, sw))
	return sw
}

func (s *latestSite) workflows() []wfv1.Workflow {
	s.t.Helper()
	list := &wfv1.WorkflowList{}
	require.NoError(s.t, s.c.List(context.Background(), list))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) })
	return list.Items
}

// upload records a new revision of the index, as bpa serve does.
func (s *latestSite) upload(pkgs ...bpav1.PackageVersion) {
	s.t.Helper()
	idx := &bpav1.ArtifactIndex{}
	require.NoError(s.t, s.c.Get(context.Background(), client.ObjectKey{Name: "site"}, idx))
	idx.Status.Revision++
	idx.Status.Packages = pkgs
	require.NoError(s.t, s.c.Status().Update(context.Background(), idx))
}

// finish ends a Workflow as Argo would: Succeeded, with the hosts' install-software results.
func (s *latestSite) finish(name string, hosts map[string]string) {
	s.t.Helper()
	wf := &wfv1.Workflow{}
	require.NoError(s.t, s.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, wf))
	nodes := wfv1.Nodes{}
	var children []string
	for host, htop := range hosts {
		res, err := json.Marshal(bpav1.HostSoftwareStatus{Name: host, Phase: "Succeeded", Changed: true,
			Packages: []bpav1.PackageStatus{{Name: "htop", Wanted: "latest", Installed: htop}}})
		require.NoError(s.t, err)
		nodes[host] = observetest.WithOutput(observetest.Node(host, "install-software("+host+")", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, 1), "result", string(res))
		children = append(children, host)
	}
	nodes["g"] = observetest.Node("g", "install-software", wfv1.NodeTypeTaskGroup, wfv1.NodeSucceeded, 1, children...)
	wf.Status = wfv1.WorkflowStatus{Phase: wfv1.WorkflowSucceeded, Nodes: nodes, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}
	require.NoError(s.t, s.c.Update(context.Background(), wf))
}

func (s *latestSite) events() string {
	var out []string
	for len(s.rec.Events) > 0 {
		out = append(out, <-s.rec.Events)
	}
	return strings.Join(out, "\n")
}

func parameters(wf wfv1.Workflow) map[string]string {
	out := map[string]string{}
	for _, p := range wf.Spec.Arguments.Parameters {
		out[p.Name] = p.Value.String()
	}
	return out
}

// TestSoftwareFollowsUploads: a new version recorded in the index the policy names starts
// one run, with no CR edit, for the hosts whose recorded version is older; uploads during a
// run coalesce into the next; the pinned item is never part of it; reconciling again, or
// after a restart, starts nothing; and a newest version older than the hosts' (a file
// deleted) starts nothing either: latest never downgrades.
func TestSoftwareFollowsUploads(t *testing.T) {
	s := newLatestSite(t, "site")
	sw := s.reconcile()
	wfs := s.workflows()
	require.Len(t, wfs, 1)
	first := wfs[0]
	assert.Equal(t, "htop=3.2.2-2", parameters(first)["latest"], "the index the policy names, not the rogue one, and not the pinned jq")
	assert.Equal(t, "all", parameters(first)["scope"])
	assert.Empty(t, first.Annotations[bpav1.TriggerAnnotation], "the first run is the spec's")
	assert.Equal(t, []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-2"}}, sw.Status.Latest)
	assert.Equal(t, int64(1), sw.Status.IndexRevision)

	// w2 got a newer htop from the OS archive meanwhile.
	s.finish(first.Name, map[string]string{"m1": "3.2.2-2", "w1": "3.2.2-2", "w2": "3.2.2-4"})
	sw = s.reconcile()
	require.Equal(t, bpav1.PhaseSucceeded, sw.Status.Phase)
	s.events()

	s.upload(bpav1.PackageVersion{Name: "htop", Version: "3.2.2-3"}, bpav1.PackageVersion{Name: "jq", Version: "1.7.1-3"})
	sw = s.reconcile()
	wfs = s.workflows()
	require.Len(t, wfs, 2, "one run for the upload")
	second := wfs[1]
	assert.Equal(t, map[string]string{"latest": "htop=3.2.2-3", "scope": "outdated"}, map[string]string{"latest": parameters(second)["latest"], "scope": parameters(second)["scope"]})
	assert.Equal(t, "htop 3.2.2-3 uploaded", second.Annotations[bpav1.TriggerAnnotation])
	assert.Contains(t, s.events(), "RunStarted Started Workflow "+second.Name+" for generation 1: htop 3.2.2-3 uploaded")
	rec := meta.FindStatusCondition(sw.Status.Conditions, bpav1.ConditionReconciling)
	require.NotNil(t, rec)
	assert.Equal(t, bpav1.ReasonPackageUploaded, rec.Reason)
	assert.True(t, strings.HasPrefix(rec.Message, "htop 3.2.2-3 uploaded: "), rec.Message)
	assert.Equal(t, "htop 3.2.2-3 uploaded", sw.Status.Trigger)
	assert.Equal(t, int64(1), sw.Generation, "no CR edit")

	// Reconciling again starts nothing more; neither do two more uploads while it runs.
	s.reconcile()
	s.upload(bpav1.PackageVersion{Name: "htop", Version: "3.2.2-4"}, bpav1.PackageVersion{Name: "jq", Version: "1.7.1-3"})
	s.upload(bpav1.PackageVersion{Name: "htop", Version: "3.2.2-5"}, bpav1.PackageVersion{Name: "jq", Version: "1.7.1-4"})
	sw = s.reconcile()
	require.Len(t, s.workflows(), 2, "the run in progress finishes first")
	assert.Contains(t, meta.FindStatusCondition(sw.Status.Conditions, bpav1.ConditionReconciling).Message, "starts when Workflow "+second.Name+" finishes")

	// It covered m1 and w1 only (w2 had 3.2.2-4); then one run takes both uploads.
	s.finish(second.Name, map[string]string{"m1": "3.2.2-3", "w1": "3.2.2-3"})
	sw = s.reconcile()
	wfs = s.workflows()
	require.Len(t, wfs, 3)
	third := wfs[2]
	assert.Equal(t, "htop=3.2.2-5", parameters(third)["latest"])
	assert.Equal(t, "htop 3.2.2-5 uploaded", third.Annotations[bpav1.TriggerAnnotation])
	require.Len(t, sw.Status.HostSoftware, 3, "w2 keeps the record of its last run")
	assert.Equal(t, "3.2.2-4", sw.Status.HostSoftware[2].Packages[0].Installed)
	assert.Equal(t, "3.2.2-3", sw.Status.HostSoftware[0].Packages[0].Installed)

	// A restarted controller starts nothing again, nor does an index written again with
	// the same newest htop (another package uploaded).
	s.finish(third.Name, map[string]string{"m1": "3.2.2-5", "w1": "3.2.2-5", "w2": "3.2.2-5"})
	s.reconcile()
	s.r = &runReconciler{Client: s.c, Reader: s.c, Recorder: s.rec, kind: softwareKind(s.c, s.c)}
	s.upload(bpav1.PackageVersion{Name: "curl", Version: "8.0"}, bpav1.PackageVersion{Name: "htop", Version: "3.2.2-5"})
	sw = s.reconcile()
	assert.Len(t, s.workflows(), 3)
	assert.Equal(t, int64(5), sw.Status.IndexRevision, "it looked at the new revision")
	s.events()

	// htop 3.2.2-5 deleted: the newest is older than what every host has. No run.
	s.upload(bpav1.PackageVersion{Name: "htop", Version: "3.2.2-4"})
	sw = s.reconcile()
	assert.Len(t, s.workflows(), 3, "latest never downgrades")
	ready := meta.FindStatusCondition(sw.Status.Conditions, bpav1.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, bpav1.ReasonUpToDate, ready.Reason)
	assert.Contains(t, ready.Message, "the artifact server's newest versions are now htop=3.2.2-4: every host has that version or a newer one; nothing to run")
	assert.Contains(t, s.events(), "UpToDate")
	assert.Equal(t, []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-4"}}, sw.Status.Latest)
	s.reconcile()
	assert.Len(t, s.workflows(), 3)
}

// An upload no host needs (each has that version or newer) starts no run, and says so.
func TestUploadNoHostNeeds(t *testing.T) {
	s := newLatestSite(t, "site")
	s.reconcile()
	s.finish(s.workflows()[0].Name, map[string]string{"m1": "3.2.2-7", "w1": "3.2.2-7", "w2": "3.2.2-7"})
	s.reconcile()
	s.upload(bpav1.PackageVersion{Name: "htop", Version: "3.2.2-3"})
	sw := s.reconcile()
	assert.Len(t, s.workflows(), 1)
	assert.Contains(t, meta.FindStatusCondition(sw.Status.Conditions, bpav1.ConditionReady).Message, "htop 3.2.2-3 uploaded: every host has that version or a newer one")
}

// Without an index named for the cluster's server, latest cannot be followed: the Software
// is Stalled naming the item, and nothing runs, whatever another index holds.
func TestLatestNeedsTheIndexThePolicyNames(t *testing.T) {
	s := newLatestSite(t, "")
	sw := s.reconcile()
	assert.Empty(t, s.workflows())
	stalled := meta.FindStatusCondition(sw.Status.Conditions, bpav1.ConditionStalled)
	require.NotNil(t, stalled)
	assert.Equal(t, bpav1.ReasonLatestUnavailable, stalled.Reason)
	assert.Equal(t, fmt.Sprintf("spec.masterSoftware[0].htop.version: BPAPolicy default names no index for artifact server %s (spec.artifactServers[].index): without one BPA cannot know which versions it holds; ask the site admin", siteURL), stalled.Message)

	// A tracked package the repository does not hold yet: Stalled until it is uploaded.
	s = newLatestSite(t, "site")
	s.upload(bpav1.PackageVersion{Name: "jq", Version: "1.6-2.1"})
	sw = s.reconcile()
	assert.Empty(t, s.workflows())
	assert.Contains(t, meta.FindStatusCondition(sw.Status.Conditions, bpav1.ConditionStalled).Message, "holds no htop (ArtifactIndex site revision 2); the run starts when one is uploaded")
	s.upload(bpav1.PackageVersion{Name: "htop", Version: "3.2.2-3"})
	s.reconcile()
	require.Len(t, s.workflows(), 1)
	assert.Equal(t, "htop=3.2.2-3", parameters(s.workflows()[0])["latest"])
}

// A cluster deleted and built again on the same addresses is a new node set: its Software
// runs again (its hosts were deprovisioned), and the old cluster's Workflow, which may still
// exist under the old revision's name, is not taken for the new one's run. The chaos soak
// found a Software left as it was after a delete and re-create.
func TestSoftwareRunsAgainOnARebuiltCluster(t *testing.T) {
	s := newLatestSite(t, "site")
	s.reconcile()
	first := s.workflows()[0].Name
	s.finish(first, map[string]string{"m1": firstHtop, "w1": firstHtop, "w2": firstHtop})
	s.reconcile()
	require.Len(t, s.workflows(), 1)

	cm := &corev1.ConfigMap{}
	require.NoError(t, s.c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c1-configmap"}, cm))
	cm.OwnerReferences[0].UID = "uid-p-rebuilt" // published again by the new Provisioning
	require.NoError(t, s.c.Update(context.Background(), cm))
	sw := s.reconcile()
	wfs := s.workflows()
	require.Len(t, wfs, 2, "the rebuilt cluster gets a run of its own")
	assert.NotEqual(t, first, wfs[1].Name)
	assert.Equal(t, wfs[1].Name, sw.Status.Workflow.Name)
}
