package artifacts_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
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
func TestBackups(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	step := artifactstest.Token(ctx, t, e.rig, "backup-step", "")
	backupRole(ctx, t, e, "backup-step", "c1")
	// The uploader may write any artifact, and the anonymous may read every file: neither
	// reaches a backup.
	s := e.serve(t, t.TempDir(), "", true)
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
		entries, _ := os.ReadDir(filepath.Join(s.dir, "backups", ns, "c1"))
		assert.Len(t, entries, 2, "the snapshot and its record; no temp file left")
	})
	t.Run("a snapshot is never replaced", func(t *testing.T) {
		other, otherSum := randomFile(t, 1000)
		_, err := c.PutBackup(ctx, ns, "c1", "snap-1.db", other, otherSum, nil)
		var se *artifacts.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusConflict, se.Code)
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
	t.Run("a deleted snapshot is gone", func(t *testing.T) {
		require.NoError(t, c.RemoveBackup(ctx, ns, "c1", "snap-1.db"))
		list, err := c.ListBackups(ctx, ns, "c1")
		require.NoError(t, err)
		assert.Empty(t, list)
		var se *artifacts.StatusError
		require.ErrorAs(t, c.RemoveBackup(ctx, ns, "c1", "snap-1.db"), &se)
		assert.Equal(t, http.StatusNotFound, se.Code)
	})
}
