package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestArtifactsCommands runs `bpa serve` over HTTPS and `bpa artifacts` against it, as a
// ServiceAccount bound to config/serve's bpa-artifacts-uploader ClusterRole, through a
// kubeconfig, with the rig's apiserver reviewing the token: a push interrupted at about
// half resumes, ls and rm work, check lists what is missing, and the server's certificate
// is verified (no skip-verify default).
func TestArtifactsCommands(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	artifactstest.InstallRoles(ctx, t, r)
	// The kubeconfig holds a token for the Kubernetes API, which never reaches the artifact
	// server: `bpa artifacts` exchanges it for one of the server's audience (TokenRequest).
	token := artifactstest.TokenFor(ctx, t, r, "uploader", "bpa-artifacts-uploader")
	artifactstest.SelfTokenRole(ctx, t, r, "uploader")
	kubeconfig := tokenKubeconfig(t, r, token)

	// `bpa serve` over HTTPS with a certificate for 127.0.0.1 that the rig's CA signed,
	// reviewing tokens as the rig's admin (its own ServiceAccount in a deployment).
	certs, _ := filepath.Glob(filepath.Join(r.Dir, "kube-apiserver", "serving.crt"))
	require.NotEmpty(t, certs)
	ca := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(ca, r.CAData, 0o600))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	store := t.TempDir()
	aptKey, _ := artifactstest.AptKey(t)
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		root := NewRootCommand()
		root.SetArgs([]string{"serve", "--kubeconfig", r.Kubeconfig, "--listen", addr, "--dir", store,
			"--tls-cert-file", certs[0], "--tls-private-key-file", strings.TrimSuffix(certs[0], ".crt") + ".key",
			"--apt-signing-key", aptKey})
		root.SetErr(&bytes.Buffer{})
		served <- root.ExecuteContext(serveCtx)
	}()
	t.Cleanup(func() { stopServe(); assert.NoError(t, <-served, "bpa serve ends cleanly when stopped") })
	server := "https://" + addr
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		return err == nil && c.Close() == nil
	}, 30*time.Second, 50*time.Millisecond)

	artifacts := func(ctx context.Context, args ...string) (string, string, error) {
		root := NewRootCommand()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"artifacts", "--server", server, "--certificate-authority", ca, "--kubeconfig", kubeconfig}, args...))
		err := root.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}

	const size = 64 << 20
	file := filepath.Join(t.TempDir(), "kubelet")
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	require.NoError(t, os.WriteFile(file, data, 0o600))
	sum := sha256.Sum256(data)
	const path = "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet"
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where push keeps its resume state

	// Interrupt the push once the server holds about half of it.
	pushCtx, interrupt := context.WithCancel(ctx)
	go func() {
		defer interrupt()
		for pushCtx.Err() == nil {
			bins, _ := filepath.Glob(filepath.Join(store, "uploads", "*[^o]")) // not *.info
			for _, b := range bins {
				if st, err := os.Stat(b); err == nil && !strings.HasSuffix(b, ".sha256") && st.Size() >= size/2 {
					return
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	_, _, err = artifacts(pushCtx, "push", file, "--path", path)
	require.ErrorContains(t, err, "run the same command again to resume")

	out, stderr, err := artifacts(ctx, "push", file, "--path", path)
	require.NoError(t, err, stderr)
	assert.Contains(t, stderr, "resuming at ")
	assert.NotContains(t, stderr, "resuming at 0 B")
	assert.Contains(t, out, hex.EncodeToString(sum[:]))
	assert.Contains(t, out, "system:serviceaccount:"+r.Namespace+":uploader")
	stored, err := os.ReadFile(filepath.Join(store, "files", path))
	require.NoError(t, err)
	assert.Equal(t, sum, sha256.Sum256(stored))

	out, _, err = artifacts(ctx, "ls", "dl.k8s.io/")
	require.NoError(t, err)
	assert.Contains(t, out, path)
	out, _, err = artifacts(ctx, "ls", "-o", "json", "dl.k8s.io/")
	require.NoError(t, err)
	var listed []struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed, 1)
	assert.Equal(t, path, listed[0].Path)
	assert.Equal(t, hex.EncodeToString(sum[:]), listed[0].SHA256)

	list := filepath.Join(t.TempDir(), "files.list")
	require.NoError(t, os.WriteFile(list, []byte("https://"+path+"\nhttps://dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm\n"), 0o600))
	out, _, err = artifacts(ctx, "check", "--files", list)
	requireExit1(t, err, "1 of 2 artifacts missing")
	assert.Equal(t, "missing file  dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm\n", out)

	// From kubespray v2.28.0's download table: all but the kubelet pushed above.
	out, _, err = artifacts(ctx, "check", "--kubespray", "v2.28.0", "--kubernetes", "1.32.5")
	requireExit1(t, err, "22 of 23 artifacts missing")
	assert.NotContains(t, out, path)
	assert.Contains(t, out, "missing file  github.com/etcd-io/etcd/releases/download/v3.5.16/etcd-v3.5.16-linux-amd64.tar.gz\n")
	assert.Contains(t, out, "missing image registry.k8s.io/kube-apiserver:v1.32.5\n")
	_, _, err = artifacts(ctx, "check", "--kubespray", "v2.28.0", "--kubernetes", "1.33.0")
	assert.ErrorContains(t, err, "Kubernetes 1.33.0 is not one kubespray v2.28.0 has kubelet checksums for")

	// The signing key given on the command line signs the apt repository.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(r.CAData)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/apt/InRelease", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+artifactstest.Token(ctx, t, r, "uploader", ""))
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}).Do(req)
	require.NoError(t, err)
	inRelease, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(inRelease))
	assert.Contains(t, string(inRelease), "-----BEGIN PGP SIGNATURE-----")

	_, _, err = artifacts(ctx, "rm", path)
	require.NoError(t, err)
	out, _, err = artifacts(ctx, "ls")
	require.NoError(t, err)
	assert.NotContains(t, out, path)

	// Without the server's CA the client refuses the server, rather than skipping verification.
	root := NewRootCommand()
	root.SetArgs([]string{"artifacts", "--server", server, "--kubeconfig", kubeconfig, "ls"})
	root.SetOut(&bytes.Buffer{})
	err = root.ExecuteContext(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate", fmt.Sprint(err))

	// Issue 26, item 5: where the token for the server's audience comes from when the
	// kubeconfig's user is not a ServiceAccount allowed to request its own.
	asAdmin := func(args ...string) (string, error) {
		_, stderr, err := bpa(t, append([]string{"artifacts", "--server", server, "--certificate-authority", ca, "--kubeconfig", r.Kubeconfig}, args...)...)
		return stderr, err
	}
	_, err = asAdmin("ls")
	assert.ErrorContains(t, err, "is not a ServiceAccount", "the rig's admin is a person: it must say which ServiceAccount it uploads as")
	assert.ErrorContains(t, err, "--service-account NAMESPACE/NAME")
	_, err = asAdmin("--service-account", r.Namespace+"/uploader", "ls")
	assert.NoError(t, err, "a TokenRequest for the named ServiceAccount, with the admin's credentials")
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(artifactstest.Token(ctx, t, r, "uploader", "")), 0o600))
	_, err = asAdmin("--token-file", tokenFile, "ls")
	assert.NoError(t, err, "a token minted for the server, given in a file")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	_, err = asAdmin("--token-file", tokenFile, "ls")
	assert.ErrorContains(t, err, `401 Unauthorized: Unauthorized: a Kubernetes token for audience "bpa-artifacts" is required`,
		"a token for the Kubernetes API is refused")
	noSelf := artifactstest.TokenFor(ctx, t, r, "noself", "bpa-artifacts-uploader")
	_, _, err = bpa(t, "artifacts", "--server", server, "--certificate-authority", ca, "--kubeconfig", tokenKubeconfig(t, r, noSelf), "ls")
	assert.ErrorContains(t, err, "it needs create on serviceaccounts/token for noself", "the missing grant is named")

	_, _, err = bpa(t, "artifacts", "--server", "http://"+addr, "--kubeconfig", kubeconfig, "ls")
	assert.ErrorContains(t, err, "must be an https:// URL", "a token is never sent in clear unless asked")
}

// tokenKubeconfig writes a kubeconfig for the rig's apiserver whose user holds token.
func tokenKubeconfig(t *testing.T, r *rig.Rig, token string) string {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"rig": {Server: r.URL, CertificateAuthorityData: r.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"user": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"rig": {Cluster: "rig", AuthInfo: "user"}},
		CurrentContext: "rig",
	}, kubeconfig))
	return kubeconfig
}

// Issue 26, item 7: `bpa artifacts ls` escapes control and bidi characters in what the
// server lists (uploader-chosen names), as `bpa describe` does.
func TestArtifactsListEscapes(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, printMeta(&out, []artifacts.FileMeta{{Path: "dl.k8s.io/kube\u202edaeh\x1b]0;pwned\x07\u009b2J", UploadedBy: "evil\u2066x"}}))
	got := out.String()
	assert.Contains(t, got, `dl.k8s.io/kube\u202edaeh\x1b]0;pwned\a\u009b2J`)
	assert.Contains(t, got, `evil\u2066x`)
	for _, raw := range []string{"\u202e", "\x1b", "\x07", "\u009b", "\u2066"} {
		assert.NotContains(t, got, raw)
	}
}
