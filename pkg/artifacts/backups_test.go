package artifacts_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/s3test"
)

// backupRole grants sa the backup step's rights on etcdbackups in the rig's namespace,
// for the named clusters only (RBAC resourceNames), as config/rbac/steps.yaml grants
// bpa-step-backup-etcd all of its namespace's.
func backupRole(ctx context.Context, t *testing.T, e *env, sa string, clusters ...string) {
	kc := kubernetes.NewForConfigOrDie(e.rig.RESTConfig)
	_, err := kc.RbacV1().Roles(e.rig.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{bpav1.GroupVersion.Group}, Resources: []string{artifacts.BackupResource},
			ResourceNames: clusters, Verbs: []string{"create", "get", "list", "delete"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.RbacV1().RoleBindings(e.rig.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: e.rig.Namespace}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// TestBackups: a snapshot is stored only with its declared sha256, listed with the writer's
// record, never replaced, read back checked, deleted; and only in the namespace (and for
// the clusters) the caller's RBAC names: a snapshot holds every Secret of its cluster.
// The server keeps them on its disk.
func TestBackups(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	backupBehaviours(t, e, backupStore{
		options: artifacts.Options{Dir: dir},
		raw: func(t *testing.T, ns, cluster string) []string {
			entries, _ := os.ReadDir(filepath.Join(dir, "backups", ns, cluster))
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			return names
		},
		halfWritten: func(t *testing.T, ns, cluster, name string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "backups", ns, cluster, name), []byte("half"), 0o600))
		},
	})
}

// TestBackupsS3 runs the same behaviours with the snapshots in a real S3 service
// (versitygw, over TLS from a CA of the test's), under a prefix.
func TestBackupsS3(t *testing.T) {
	e := newEnv(t)
	gw := s3test.Start(t)
	store, err := artifacts.NewS3Backups(context.Background(), gw.Options("site-a"))
	require.NoError(t, err)
	key := func(ns, cluster string) string { return "site-a/backups/" + ns + "/" + cluster + "/" }
	backupBehaviours(t, e, backupStore{
		options: artifacts.Options{Dir: t.TempDir(), Backups: store},
		raw: func(t *testing.T, ns, cluster string) []string {
			ctx := context.Background()
			var names []string
			for o := range gw.Client.ListObjects(ctx, s3test.Bucket, minio.ListObjectsOptions{Prefix: key(ns, cluster), Recursive: true}) {
				require.NoError(t, o.Err)
				names = append(names, strings.TrimPrefix(o.Key, key(ns, cluster)))
			}
			for u := range gw.Client.ListIncompleteUploads(ctx, s3test.Bucket, key(ns, cluster), true) {
				require.NoError(t, u.Err)
				names = append(names, "incomplete upload of "+u.Key)
			}
			return names
		},
		halfWritten: func(t *testing.T, ns, cluster, name string) {
			_, err := gw.Client.PutObject(context.Background(), s3test.Bucket, key(ns, cluster)+name, strings.NewReader("half"), 4, minio.PutObjectOptions{})
			require.NoError(t, err)
		},
	})
}

// backupStore is where a server of the table below keeps its snapshots.
type backupStore struct {
	options artifacts.Options
	// raw lists what the store holds for a cluster: snapshots, records and any leftover.
	raw func(t *testing.T, ns, cluster string) []string
	// halfWritten stores a snapshot without its record, as a crash halfway would leave it.
	halfWritten func(t *testing.T, ns, cluster, name string)
}

func backupBehaviours(t *testing.T, e *env, store backupStore) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	step := artifactstest.Token(ctx, t, e.rig, "backup-step", "")
	backupRole(ctx, t, e, "backup-step", "c1")
	// The uploader may write any artifact, and the anonymous may read every file: neither
	// reaches a backup.
	s := e.serveOpts(t, "", true, store.options)
	c, _ := s.client(t, step)
	ns := e.rig.Namespace
	file, sum := randomFile(t, 300<<10)

	t.Run("a snapshot is stored, listed and read back", func(t *testing.T) {
		m, err := c.PutBackup(ctx, ns, "c1", "snap-1.db", file, sum, []byte(`{"revision":42}`))
		require.NoError(t, err)
		assert.Equal(t, int64(300<<10), m.Size)
		assert.Equal(t, "system:serviceaccount:"+ns+":backup-step", m.UploadedBy)
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, sum, list[0].SHA256)
		assert.JSONEq(t, `{"revision":42}`, string(list[0].Backup))
		out := filepath.Join(t.TempDir(), "back")
		require.NoError(t, c.GetBackup(ctx, ns, "c1", "snap-1.db", out, sum))
		want, _ := os.ReadFile(file)
		got, _ := os.ReadFile(out)
		assert.Equal(t, want, got)
	})
	t.Run("a wrong sha256 stores nothing", func(t *testing.T) {
		_, err := c.PutBackup(ctx, ns, "c1", "snap-bad.db", file, strings.Repeat("0", 64), nil)
		require.ErrorContains(t, err, "not the declared")
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Len(t, list, 1)
		assert.ElementsMatch(t, []string{"snap-1.db", "snap-1.db.json"}, store.raw(t, ns, "c1"), "the snapshot and its record; nothing left of the bad one")
	})
	t.Run("a snapshot is never replaced", func(t *testing.T) {
		other, otherSum := randomFile(t, 1000)
		_, err := c.PutBackup(ctx, ns, "c1", "snap-1.db", other, otherSum, nil)
		var se *artifacts.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusConflict, se.Code)
	})
	t.Run("of two writers of one name, one wins whole", func(t *testing.T) {
		files, sums := make([]string, 2), make([]string, 2)
		for i := range files {
			files[i], sums[i] = randomFile(t, 4<<20)
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range files {
			wg.Go(func() { _, errs[i] = c.PutBackup(ctx, ns, "c1", "snap-race.db", files[i], sums[i], nil) })
		}
		wg.Wait()
		won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		require.NotEqual(t, -1, won, "one of %v", errs)
		var se *artifacts.StatusError
		require.ErrorAs(t, errs[1-won], &se)
		assert.Equal(t, http.StatusConflict, se.Code)
		require.NoError(t, c.GetBackup(ctx, ns, "c1", "snap-race.db", filepath.Join(t.TempDir(), "back"), sums[won]))
		require.NoError(t, c.RemoveBackup(ctx, ns, "c1", "snap-race.db"))
	})
	t.Run("nobody else reads, writes or lists it", func(t *testing.T) {
		for who, token := range map[string]string{"anonymous": "", "an uploader of artifacts": e.uploader, "a stranger": e.stranger} {
			code, _ := get(t, s.URL+artifacts.BackupPath(ns, "c1", "snap-1.db"), token)
			assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, code, who)
			code, _ = get(t, s.URL+artifacts.BackupPath(ns, "c1", ""), token)
			assert.Contains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, code, who)
			o, _ := s.client(t, token)
			_, err := o.PutBackup(ctx, ns, "c1", "snap-x.db", file, sum, nil)
			require.Error(t, err, who)
		}
		// Its own RBAC names c1 in its namespace only.
		_, err := c.PutBackup(ctx, ns, "c2", "snap-1.db", file, sum, nil)
		require.ErrorContains(t, err, "Forbidden")
		_, err = c.PutBackup(ctx, "other-tenant", "c1", "snap-1.db", file, sum, nil)
		require.ErrorContains(t, err, "Forbidden")
		_, err = c.ListBackups(ctx, "other-tenant", "c1")
		require.ErrorContains(t, err, "Forbidden")
		code, _ := get(t, s.URL+artifacts.BackupPath("other-tenant", "c1", "snap-1.db"), step)
		assert.Equal(t, http.StatusForbidden, code)
	})
	t.Run("paths outside the layout are refused", func(t *testing.T) {
		for _, p := range []string{"/backups/" + ns + "/c1/.hidden", "/backups/" + ns + "/c1/a/b", "/backups/" + ns + "/C1/x", "/backups/../etc/x", "/backups/" + ns + "/c1", "/backups/" + ns + "/c1/snap-1.db.json"} {
			code, _ := get(t, s.URL+p, step)
			assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, code, p)
		}
	})
	t.Run("no snapshot is named as a record", func(t *testing.T) {
		// A record is <name>.json beside its snapshot: a snapshot of that name would
		// replace a record, and a delete of it would hide a snapshot from the listing.
		_, err := c.PutBackup(ctx, ns, "c1", "snap-1.db.json", file, sum, nil)
		var se *artifacts.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusBadRequest, se.Code)
		require.ErrorAs(t, c.RemoveBackup(ctx, ns, "c1", "snap-1.db.json"), &se)
		assert.Equal(t, http.StatusBadRequest, se.Code)
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Len(t, list, 1)
	})
	t.Run("a half-written snapshot is never listed", func(t *testing.T) {
		store.halfWritten(t, ns, "c1", "snap-half.db")
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Equal(t, []string{"snap-1.db"}, names(list))
	})
	t.Run("an upload cut short leaves nothing", func(t *testing.T) {
		before := store.raw(t, ns, "c1")
		// 96 MiB, cut after 72: the S3 store sends it in parts of 64 MiB, so a part was stored.
		big, bigSum := randomFile(t, 96<<20)
		code := cutShortPut(t, s.URL+artifacts.BackupPath(ns, "c1", "snap-cut.db"), step, big, bigSum)
		assert.NotEqual(t, http.StatusCreated, code)
		// The server may still be cleaning up after the client went.
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.ElementsMatch(c, before, store.raw(t, ns, "c1"))
		}, 10*time.Second, 100*time.Millisecond)
		time.Sleep(time.Second) // and nothing comes back
		assert.ElementsMatch(t, before, store.raw(t, ns, "c1"))
	})
	t.Run("listed oldest first, pruned to keep", func(t *testing.T) {
		for _, n := range []string{"snap-2.db", "snap-3.db", "snap-4.db"} {
			time.Sleep(10 * time.Millisecond) // distinct upload times
			_, err := c.PutBackup(ctx, ns, "c1", n, file, sum, nil)
			require.NoError(t, err)
		}
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Equal(t, []string{"snap-1.db", "snap-2.db", "snap-3.db", "snap-4.db"}, names(list))
		// As backup-etcd prunes with keep 2: the oldest beyond it.
		for _, m := range list[:len(list)-2] {
			require.NoError(t, c.RemoveBackup(ctx, ns, "c1", m.Name))
		}
		list, err = c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Equal(t, []string{"snap-3.db", "snap-4.db"}, names(list))
		assert.ElementsMatch(t, []string{"snap-3.db", "snap-3.db.json", "snap-4.db", "snap-4.db.json", "snap-half.db"}, store.raw(t, ns, "c1"))
	})
	t.Run("a deleted snapshot is gone", func(t *testing.T) {
		require.NoError(t, c.RemoveBackup(ctx, ns, "c1", "snap-3.db"))
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Equal(t, []string{"snap-4.db"}, names(list))
		var se *artifacts.StatusError
		require.ErrorAs(t, c.RemoveBackup(ctx, ns, "c1", "snap-3.db"), &se)
		assert.Equal(t, http.StatusNotFound, se.Code)
		code, _ := get(t, s.URL+artifacts.BackupPath(ns, "c1", "snap-3.db"), step)
		assert.Equal(t, http.StatusNotFound, code)
	})
}

func names(l []artifacts.BackupMeta) []string {
	var out []string
	for _, m := range l {
		out = append(out, m.Name)
	}
	return out
}

// cutShortPut sends a backup write declaring all of file but whose body fails halfway, as a
// step killed during its upload would: the server sees its body end early.
func cutShortPut(t *testing.T, url, token, file, sum string) int {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	st, err := f.Stat()
	require.NoError(t, err)
	body := io.MultiReader(io.LimitReader(f, st.Size()*3/4), iotest.ErrReader(errors.New("the step was killed")))
	req, err := http.NewRequest(http.MethodPut, url, body)
	require.NoError(t, err)
	req.ContentLength = st.Size()
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(artifacts.HeaderContentSHA256, sum)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0 // the client gave up on its own body
	}
	resp.Body.Close()
	return resp.StatusCode
}
