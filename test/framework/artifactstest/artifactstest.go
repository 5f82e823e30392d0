// Package artifactstest sets up the tests of the artifact server on a rig: the ClusterRoles
// config/serve ships, and ServiceAccounts with real tokens.
package artifactstest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// InstallRoles creates the ClusterRoles of config/serve/rbac.yaml and
// config/rbac/metrics_reader_role.yaml (bpa-metrics-reader), as a deployment has them.
func InstallRoles(ctx context.Context, t testing.TB, r *rig.Rig) {
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	kc := kubernetes.NewForConfigOrDie(r.RESTConfig)
	for _, file := range []string{filepath.Join("serve", "rbac.yaml"), filepath.Join("rbac", "metrics_reader_role.yaml")} {
		raw, err := os.ReadFile(filepath.Join(root, "config", file))
		require.NoError(t, err)
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			var role rbacv1.ClusterRole
			require.NoError(t, yaml.Unmarshal([]byte(doc), &role))
			if role.Kind == "ClusterRole" {
				// Once per rig: tests on one node's sites share it.
				if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
					require.NoError(t, err)
				}
			}
		}
	}
}

// Token creates the ServiceAccount sa in the rig's namespace, binds it to clusterRole
// unless that is empty, and returns a real token of it (TokenRequest) for the artifact
// server's audience (artifacts.DefaultAudience).
func Token(ctx context.Context, t testing.TB, r *rig.Rig, sa, clusterRole string) string {
	return TokenFor(ctx, t, r, sa, clusterRole, artifacts.DefaultAudience)
}

// SelfTokenRole lets ServiceAccount sa request tokens of its own (create on its
// serviceaccounts/token, by name), which `bpa artifacts` does for the server's audience, as
// config/serve/rbac.yaml tells an admin to grant.
func SelfTokenRole(ctx context.Context, t testing.TB, r *rig.Rig, sa string) {
	kc := kubernetes.NewForConfigOrDie(r.RESTConfig)
	name := sa + "-artifacts-token"
	_, err := kc.RbacV1().Roles(r.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{sa}, Verbs: []string{"create"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.RbacV1().RoleBindings(r.Namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: r.Namespace}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// TokenFor is Token for the given audiences; none means the Kubernetes API's.
func TokenFor(ctx context.Context, t testing.TB, r *rig.Rig, sa, clusterRole string, audiences ...string) string {
	kc := kubernetes.NewForConfigOrDie(r.RESTConfig)
	_, err := kc.CoreV1().ServiceAccounts(r.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	if clusterRole != "" && err == nil {
		_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + clusterRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: r.Namespace}},
		}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	exp := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts(r.Namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp, Audiences: audiences}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// ServerClient is a client of the Kubernetes API as config/serve's ServiceAccount
// bpa-artifacts (created in the rig's namespace), bound to config/serve's ClusterRole of that
// name (InstallRoles first), with a real token: what `bpa serve` itself may do.
func ServerClient(ctx context.Context, t testing.TB, r *rig.Rig, scheme *runtime.Scheme) client.Client {
	token := TokenFor(ctx, t, r, "bpa-artifacts", "bpa-artifacts")
	cfg := rest.AnonymousClientConfig(r.RESTConfig)
	cfg.BearerToken = token
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// Server starts a real artifact server over HTTPS that reads anonymously, as a site's
// nodes read it, at the rig's ServiceAddress. It returns the server's URL, its CA (PEM: a CA
// name-constrained to the server's address, which no trust store holds: a reader trusts it only when given
// it, as the nodes are by BPAPolicy spec.artifactServers), and a client that trusts it and uploads with a
// real token of a ServiceAccount bound to config/serve's bpa-artifacts-uploader.
// Each opt may change the server's Options, e.g. set AptSigningKey (see AptKey).
func Server(ctx context.Context, t *testing.T, r *rig.Rig, opt ...func(*artifacts.Options)) (string, []byte, *artifacts.Client) {
	InstallRoles(ctx, t, r)
	token := Token(ctx, t, r, "uploader", "bpa-artifacts-uploader")
	auth, err := artifacts.NewAuth(r.RESTConfig, true, "")
	require.NoError(t, err)
	opts := artifacts.Options{Dir: t.TempDir(), Auth: auth, MaxSize: 1 << 30}
	for _, o := range opt {
		o(&opts)
	}
	srv, err := artifacts.NewServer(ctx, opts)
	require.NoError(t, err)
	ts, ca := nodetrusttest.NewTLSServerAt(t, srv, r.ServiceAddress())
	tc := ts.Client()
	tc.Transport = transport.NewBearerAuthRoundTripper(token, tc.Transport)
	return ts.URL, ca, &artifacts.Client{URL: ts.URL, HTTP: tc, StateDir: t.TempDir()}
}

// AptKey writes a new OpenPGP key (Ed25519) for the apt repository: the armored private
// key for Options.AptSigningKey, and the armored public key apt's Signed-By takes.
func AptKey(t testing.TB) (signingKey, publicKey string) {
	e, err := openpgp.NewEntity("BPA apt test", "", "apt@bpa.test", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	require.NoError(t, err)
	dir := t.TempDir()
	signingKey, publicKey = filepath.Join(dir, "signing.asc"), filepath.Join(dir, "key.asc")
	for _, k := range []struct {
		file, block string
		write       func(io.Writer) error
	}{
		{signingKey, openpgp.PrivateKeyType, func(w io.Writer) error { return e.SerializePrivate(w, nil) }},
		{publicKey, openpgp.PublicKeyType, e.Serialize},
	} {
		var b bytes.Buffer
		aw, err := armor.Encode(&b, k.block, nil)
		require.NoError(t, err)
		require.NoError(t, k.write(aw))
		require.NoError(t, aw.Close())
		require.NoError(t, os.WriteFile(k.file, b.Bytes(), 0o600))
	}
	return signingKey, publicKey
}

// Upload puts tiny stand-ins of files (each holding its own path) and images (random, one
// layer) on the server through up.
func Upload(ctx context.Context, t testing.TB, up *artifacts.Client, files, images []string) {
	for _, f := range files {
		file := filepath.Join(t.TempDir(), "f")
		require.NoError(t, os.WriteFile(file, []byte(f), 0o600))
		_, err := up.Push(ctx, file, f)
		require.NoError(t, err)
	}
	for _, i := range images {
		ref, err := up.ImageRef(i)
		require.NoError(t, err)
		img, err := random.Image(64, 1)
		require.NoError(t, err)
		require.NoError(t, remote.Write(ref, img, remote.WithContext(ctx), remote.WithTransport(up.HTTP.Transport)), i)
	}
}

// OfflineSite is Server on a rig of its own, with what kubespray v2.28.0 downloads for
// Kubernetes 1.32.5 (amd64), which the offline tests upload from.
func OfflineSite(ctx context.Context, t *testing.T) (string, []byte, *artifacts.Client, *kubespray.Downloads) {
	url, ca, up := Server(ctx, t, rig.ForTest(t, rig.Options{NoArgoCRDs: true}))
	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	return url, ca, up, d
}
