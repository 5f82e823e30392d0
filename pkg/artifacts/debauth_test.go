package artifacts_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

// scopedRole is a ClusterRole reading all artifacts and holding each of verbs on the
// artifacts named by its key; the token is of a new ServiceAccount bound to it.
func scopedRole(ctx context.Context, t *testing.T, e *env, sa string, grants map[string][]string) string {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{bpav1.GroupVersion.Group}, Resources: []string{artifacts.Resource}, Verbs: []string{"get"}}}
	for verbs, names := range grants {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{bpav1.GroupVersion.Group}, Resources: []string{artifacts.Resource},
			Verbs: strings.Split(verbs, ","), ResourceNames: names})
	}
	_, err := kubernetes.NewForConfigOrDie(e.rig.RESTConfig).RbacV1().ClusterRoles().Create(ctx,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	return artifactstest.Token(ctx, t, e.rig, sa, sa)
}

// debFile writes a .deb whose control file names pkg.
func debFile(t *testing.T, pkg, version string) string {
	file := filepath.Join(t.TempDir(), pkg+".deb")
	require.NoError(t, os.WriteFile(file, debOf(t, "Package: "+pkg+"\nVersion: "+version+"\nArchitecture: all\nDescription: d\n"), 0o600))
	return file
}

// Issue 26, item 1: every .deb joins the one apt index, so the path's domain alone let an
// uploader of dl.k8s.io publish a higher version of any package. A .deb now also needs the
// verb on apt/<Package>: publishing, replacing and deleting one.
func testPackageWrites(t *testing.T, e *env) {
	ctx := context.Background()
	signingKey, _ := artifactstest.AptKey(t)
	s := e.serveOpts(t, "", false, artifacts.Options{Dir: t.TempDir(), AptSigningKey: signingKey})
	const pool = "deb.debian.org/debian/pool/main/"
	indexed := func(pkg string) bool {
		status, packages := get(t, s.URL+"/apt/Packages", e.uploader)
		require.Equal(t, http.StatusOK, status)
		return strings.Contains(string(packages), "Package: "+pkg+"\n")
	}
	served := func(p string) int { status, _ := get(t, s.URL+"/files/"+p, e.uploader); return status }

	t.Run("an uploader of a domain publishes no package under it", func(t *testing.T) {
		dl := scopedRole(ctx, t, e, "dl-only", map[string][]string{"create,delete": {"dl.k8s.io"}})
		c, _ := s.client(t, dl)
		const p = "dl.k8s.io/release/site-tool_9_all.deb"
		_, err := c.Push(ctx, debFile(t, "site-tool", "9"), p)
		require.ErrorContains(t, err, "403 Forbidden")
		assert.ErrorContains(t, err, `named "apt/site-tool"`)
		assert.ErrorContains(t, err, "the upload is discarded")
		assert.Equal(t, http.StatusNotFound, served(p))
		assert.False(t, indexed("site-tool"), "not in the apt index")
		left, _ := filepath.Glob(filepath.Join(s.dir, "uploads", "*"))
		assert.Empty(t, left, "the refused upload is deleted")
		_, err = c.Push(ctx, debFile(t, "site-tool", "9"), "dl.k8s.io/release/site-tool_9_all.tar")
		assert.NoError(t, err, "the same bytes as a file that is not a .deb join no index")
	})

	pub := scopedRole(ctx, t, e, "htop-publisher", map[string][]string{"create,delete": {"deb.debian.org", "apt/htop"}})
	c, _ := s.client(t, pub)
	t.Run("a grant of apt/htop publishes htop and nothing else", func(t *testing.T) {
		_, err := c.Push(ctx, debFile(t, "htop", "3.2.2-2"), pool+"h/htop/htop_3.2.2-2_all.deb")
		require.NoError(t, err)
		assert.True(t, indexed("htop"))
		_, err = c.Push(ctx, debFile(t, "site-tool", "9"), pool+"s/site-tool_9_all.deb")
		assert.ErrorContains(t, err, `named "apt/site-tool"`, "another package under its domain")
		_, err = c.Push(ctx, debFile(t, "htop", "9"), "dl.k8s.io/htop_9_all.deb")
		assert.ErrorContains(t, err, `named "dl.k8s.io"`, "its package under another domain: both are required")
		assert.False(t, indexed("site-tool"))

		ref, err := name.ParseReference(strings.TrimPrefix(s.URL, "http://")+"/apt/htop:1", name.Insecure)
		require.NoError(t, err)
		img, _ := random.Image(100, 1)
		assert.ErrorContains(t, remote.Write(ref, img, remote.WithTransport(&bearer{token: pub})), "must start with the original registry",
			"a package's name is never an image repository")
	})

	t.Run("a package's name is checked before it becomes a resourceName", func(t *testing.T) {
		for _, pkg := range []string{"htop/../site-tool", "Htop", "h", "htop,site-tool"} {
			_, err := c.Push(ctx, debFile(t, pkg, "1"), pool+"h/bad.deb")
			assert.ErrorContains(t, err, "400 Bad Request", pkg)
			assert.ErrorContains(t, err, "field Package", pkg)
		}
	})

	t.Run("deleting and replacing a .deb need the verb on its package too", func(t *testing.T) {
		keeper := scopedRole(ctx, t, e, "tool-keeper", map[string][]string{"create": {"deb.debian.org", "apt/tool"}, "delete": {"deb.debian.org"}})
		kc, _ := s.client(t, keeper)
		const tool = pool + "t/tool_1_all.deb"
		_, err := kc.Push(ctx, debFile(t, "tool", "1"), tool)
		require.NoError(t, err)
		err = kc.Remove(ctx, tool)
		assert.ErrorContains(t, err, "403 Forbidden", "its own file, but not its package")
		assert.ErrorContains(t, err, `may not delete artifacts.bpa.akraino.org named "apt/tool"`)
		assert.True(t, indexed("tool"))

		domainAdmin := scopedRole(ctx, t, e, "domain-admin", map[string][]string{
			"create,delete,override": {"deb.debian.org", "apt/site-tool"}})
		ac, _ := s.client(t, domainAdmin)
		_, err = ac.Push(ctx, debFile(t, "site-tool", "2"), tool)
		assert.ErrorContains(t, err, `may not override artifacts.bpa.akraino.org named "apt/tool"`, "replacing takes tool out of the index")
		assert.True(t, indexed("tool"))
		assert.False(t, indexed("site-tool"))
		assert.ErrorContains(t, ac.Remove(ctx, tool), `named "apt/tool"`, "deleting another's package")

		siteAdmin := artifactstest.Token(ctx, t, e.rig, "apt-admin", "bpa-artifacts-admin")
		sc, _ := s.client(t, siteAdmin)
		_, err = sc.Push(ctx, debFile(t, "site-tool", "2"), tool)
		require.NoError(t, err, "override on every name replaces")
		assert.False(t, indexed("tool"))
		require.NoError(t, sc.Remove(ctx, tool))
		assert.False(t, indexed("site-tool"))
	})
}
