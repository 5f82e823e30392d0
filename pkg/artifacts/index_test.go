package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

// TestArtifactIndex: the server records its apt repository in ArtifactIndex bpa-artifacts as
// config/serve's ServiceAccount, with config/serve's role and nothing else: the newest
// version of each package and the digest of the Packages nodes download, one revision per
// change of the set of packages. A restart records nothing again, and a change the last
// server never recorded (a crash between publishing and recording) is recorded at start.
func TestArtifactIndex(t *testing.T) {
	e, server := indexEnv(t)
	ctx := context.Background()
	signing, _ := artifactstest.AptKey(t)
	dir := t.TempDir()
	opts := artifacts.Options{Dir: dir, AptSigningKey: signing, Index: "bpa-artifacts", IndexClient: server}
	s := e.serveOpts(t, "", true, opts)
	up, _ := s.client(t, e.uploader)

	// Nothing uploaded: an empty repository is a revision too (Softwares then wait for one).
	idx := waitIndex(t, e, 1)
	assert.Empty(t, idx.Status.Packages)

	push := func(name, version string) {
		t.Helper()
		_, err := up.Push(ctx, debPackage(t, name, version, "xz"), "deb.example.org/pool/"+name+"_"+version+"_all.deb")
		require.NoError(t, err)
	}
	push("htop", "3.2.2-2")
	idx = waitIndex(t, e, 2)
	assert.Equal(t, []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-2"}}, idx.Status.Packages)
	push("htop", "3.2.2-10")
	push("htop", "3.2.2-3") // older than -10 by dpkg's order, though later and sorting after it
	push("jq", "1.7.1-3")
	idx = waitPackages(t, e, []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-10"}, {Name: "jq", Version: "1.7.1-3"}})
	status, packages := get(t, s.URL+"/apt/Packages", "")
	require.Equal(t, http.StatusOK, status)
	sum := sha256.Sum256(packages)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), idx.Status.Digest, "the digest of what nodes download")
	assert.LessOrEqual(t, idx.Status.Revision, int64(5), "one revision per change at most: uploads in a row may share one")

	// A restart on the same store: the same digest, nothing written.
	again := e.serveOpts(t, "", true, opts)
	require.NoError(t, again.srv.RecordIndex(ctx))
	after := &bpav1.ArtifactIndex{}
	require.NoError(t, e.kube.Get(ctx, client.ObjectKey{Name: "bpa-artifacts"}, after))
	assert.Equal(t, idx.ResourceVersion, after.ResourceVersion, "a restart writes nothing")
	assert.Equal(t, idx.Status.Revision, after.Status.Revision)

	// A server that did not record (as one that crashed before it could) publishes a newer
	// htop; the next server on the store records it at start, as the next revision.
	quiet := opts
	quiet.Index, quiet.IndexClient = "", nil
	q := e.serveOpts(t, "", true, quiet)
	qup, _ := q.client(t, e.uploader)
	_, err := qup.Push(ctx, debPackage(t, "htop", "3.2.2-11", "xz"), "deb.example.org/pool/htop_3.2.2-11_all.deb")
	require.NoError(t, err)
	e.serveOpts(t, "", true, opts)
	idx = waitPackages(t, e, []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-11"}, {Name: "jq", Version: "1.7.1-3"}})
	assert.Equal(t, after.Status.Revision+1, idx.Status.Revision)
}

// The server's own account may write the status of its ArtifactIndex and nothing else of
// the kind: not another server's index, not its own spec or metadata, not a new index (it
// would otherwise speak for a server the BPAPolicy names, until that one wrote).
func TestArtifactIndexRBAC(t *testing.T) {
	e, server := indexEnv(t)
	ctx := context.Background()
	own := &bpav1.ArtifactIndex{}
	require.NoError(t, server.Get(ctx, client.ObjectKey{Name: "bpa-artifacts"}, own))
	own.Status.Revision = 1
	require.NoError(t, server.Status().Update(ctx, own), "its own status")

	forbidden := func(what string, err error) {
		t.Helper()
		assert.True(t, apierrors.IsForbidden(err), "%s: want Forbidden, got %v", what, err)
	}
	other := &bpav1.ArtifactIndex{}
	require.NoError(t, e.kube.Get(ctx, client.ObjectKey{Name: "other"}, other))
	other.Status = bpav1.ArtifactIndexStatus{Revision: 7, Packages: []bpav1.PackageVersion{{Name: "htop", Version: "99"}}}
	forbidden("another index's status", server.Status().Update(ctx, other))
	forbidden("reading another index", server.Get(ctx, client.ObjectKey{Name: "other"}, &bpav1.ArtifactIndex{}))
	own.Labels = map[string]string{"x": "y"}
	forbidden("its own metadata", server.Update(ctx, own))
	forbidden("a new index", server.Create(ctx, &bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: "third"}}))
	forbidden("deleting its index", server.Delete(ctx, own))
}

// indexEnv is an env with two ArtifactIndexes, the server's own (bpa-artifacts) and
// another, and a client as the server (artifactstest.ServerClient).
func indexEnv(t *testing.T) (*env, client.Client) {
	e := newEnv(t)
	for _, name := range []string{"bpa-artifacts", "other"} {
		require.NoError(t, e.kube.Create(context.Background(), &bpav1.ArtifactIndex{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	}
	return e, artifactstest.ServerClient(context.Background(), t, e.rig, scheme.New())
}

func waitIndex(t *testing.T, e *env, revision int64) *bpav1.ArtifactIndex {
	t.Helper()
	idx := &bpav1.ArtifactIndex{}
	require.Eventually(t, func() bool {
		return e.kube.Get(context.Background(), client.ObjectKey{Name: "bpa-artifacts"}, idx) == nil && idx.Status.Revision >= revision
	}, time.Minute, 20*time.Millisecond, "ArtifactIndex revision %d", revision)
	return idx
}

func waitPackages(t *testing.T, e *env, want []bpav1.PackageVersion) *bpav1.ArtifactIndex {
	t.Helper()
	idx := &bpav1.ArtifactIndex{}
	require.Eventually(t, func() bool {
		return e.kube.Get(context.Background(), client.ObjectKey{Name: "bpa-artifacts"}, idx) == nil && assert.ObjectsAreEqual(want, idx.Status.Packages)
	}, time.Minute, 20*time.Millisecond, "ArtifactIndex packages %v", want)
	return idx
}

// An uploader's control file declares the version. One that is not Debian syntax (dpkg would
// refuse it) is left out of the index, so it can neither reach a node through latest nor,
// sorting above every real version, hide the newest real one.
func TestNewestVersionsLeavesOutWhatIsNotDebian(t *testing.T) {
	packages := "Package: htop\nVersion: 3.2.2-3\n\nPackage: htop\nVersion: zzz\n\nPackage: htop\nVersion: 9.0-\n\n" +
		"Package: -oAPT::Get::x\nVersion: 1.0\n\nPackage: jq\nVersion: 1:1.6\n\nPackage: jq\nVersion: 1.7\n"
	newest, skipped := artifacts.NewestVersions([]byte(packages))
	assert.Equal(t, []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-3"}, {Name: "jq", Version: "1:1.6"}}, newest)
	assert.Len(t, skipped, 3)
}

// The status endpoint's hosts: each tracked package per host, installed against the
// Software's current target; pinned and unpinned packages, and Softwares that track
// nothing, are not listed.
func TestTrackedHosts(t *testing.T) {
	sw := bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: "tools"}, Status: bpav1.SoftwareStatus{
		Latest: []bpav1.PackageVersion{{Name: "htop", Version: "3.2.2-3"}},
		HostSoftware: []bpav1.HostSoftwareStatus{
			{Name: "m1", Packages: []bpav1.PackageStatus{{Name: "htop", Wanted: "latest", Installed: "3.2.2-3", Target: "3.2.2-3"}, {Name: "jq", Wanted: "1.6-2.1", Installed: "1.6-2.1"}}},
			{Name: "w1", Packages: []bpav1.PackageStatus{{Name: "htop", Wanted: "latest", Installed: "3.2.2-2", Target: "3.2.2-2"}}},
		}}}
	pinned := bpav1.Software{ObjectMeta: metav1.ObjectMeta{Name: "pinned"}, Status: bpav1.SoftwareStatus{
		HostSoftware: []bpav1.HostSoftwareStatus{{Name: "m1", Packages: []bpav1.PackageStatus{{Name: "jq", Wanted: "1.6-2.1", Installed: "1.6-2.1"}}}}}}
	assert.Equal(t, []artifacts.HostPackages{
		{Software: "tools", Host: "m1", Packages: []artifacts.TrackedPackage{{Name: "htop", Installed: "3.2.2-3", Target: "3.2.2-3"}}},
		{Software: "tools", Host: "w1", Packages: []artifacts.TrackedPackage{{Name: "htop", Installed: "3.2.2-2", Target: "3.2.2-3", Differs: true}}},
	}, artifacts.TrackedHosts([]bpav1.Software{sw, pinned}))
}
