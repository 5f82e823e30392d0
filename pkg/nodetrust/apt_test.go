package nodetrust_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

func newKey(t *testing.T) *openpgp.Entity {
	e, err := openpgp.NewEntity("bpa test", "", "bpa@example.org", nil)
	require.NoError(t, err)
	return e
}

func armored(t *testing.T, e *openpgp.Entity, private bool) []byte {
	var b bytes.Buffer
	typ := openpgp.PublicKeyType
	if private {
		typ = openpgp.PrivateKeyType
	}
	w, err := armor.Encode(&b, typ, nil)
	require.NoError(t, err)
	if private {
		require.NoError(t, e.SerializePrivate(w, nil))
	} else {
		require.NoError(t, e.Serialize(w))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func TestParseAptKey(t *testing.T) {
	e := newKey(t)
	pub := armored(t, e, false)
	got, err := nodetrust.ParseAptKey(append([]byte("\n  "), pub...))
	require.NoError(t, err)
	keys, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(got))
	require.NoError(t, err, "the re-encoding is a key ring")
	require.Len(t, keys, 1)
	assert.Equal(t, e.PrimaryKey.Fingerprint, keys[0].PrimaryKey.Fingerprint)
	again, err := nodetrust.ParseAptKey(got)
	require.NoError(t, err)
	assert.Equal(t, got, again, "the re-encoding is stable, so a rerun finds the node's key current")

	for name, bad := range map[string][]byte{
		"a private key":      armored(t, e, true),
		"text before":        append([]byte("echo hi\n"), pub...),
		"text after":         append(append([]byte{}, pub...), "\n$(touch /tmp/x)\n"...),
		"two blocks":         append(append([]byte{}, pub...), pub...),
		"not a key":          []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n-----END PGP PUBLIC KEY BLOCK-----\n"),
		"larger than 64 KiB": bytes.Repeat([]byte("A"), nodetrust.MaxAptKey+1),
	} {
		_, err := nodetrust.ParseAptKey(bad)
		assert.Error(t, err, name)
	}
	// A secret key under a public block's armor header is refused by what it holds.
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	require.NoError(t, err)
	require.NoError(t, e.SerializePrivate(w, nil))
	require.NoError(t, w.Close())
	_, err = nodetrust.ParseAptKey(b.Bytes())
	assert.ErrorContains(t, err, "give the public key only")

	for _, u := range []string{"http://a.example", "https://a.example/path", "https://a.example\nURIs: https://evil", "https://a b"} {
		_, err := nodetrust.AptSource(u)
		assert.Error(t, err, u)
	}
}

// signedRepo serves a flat apt repository over TLS holding one package, signed by key.
func signedRepo(t *testing.T, key *openpgp.Entity) (*httptest.Server, []byte) {
	packages := "Package: bpa-offline-tool\nVersion: 1.2-1\nArchitecture: all\nFilename: bpa-offline-tool_1.2-1_all.deb\nSize: 1\n" +
		"SHA256: " + strings.Repeat("0", 64) + "\n\n"
	sum := sha256.Sum256([]byte(packages))
	release := fmt.Sprintf("Date: %s\nSHA256:\n %s %d Packages\n", time.Now().UTC().Format(time.RFC1123), hex.EncodeToString(sum[:]), len(packages))
	var inRelease bytes.Buffer
	w, err := clearsign.Encode(&inRelease, key.PrivateKey, nil)
	require.NoError(t, err)
	_, err = w.Write([]byte(release))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/apt/InRelease":
			_, _ = w.Write(inRelease.Bytes())
		case "/apt/Packages":
			_, _ = w.Write([]byte(packages))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
}

// The step's two scripts on a real host: the CA into its trust store, the key and the source
// into its apt directories; the host's apt-get update (the stand-in, which checks InRelease
// with the real gpgv) then knows the repository's package. A rerun changes nothing. The same
// repository checked with another key is refused as apt refuses it, and nothing is added.
func TestAptSourceOnRealHost(t *testing.T) {
	signer := newKey(t)
	ts, ca := signedRepo(t, signer)
	server := strings.TrimSuffix(ts.URL, "/")

	c := simhost.NewCluster(t)
	h := c.Start("master-1", "127.0.1.44")
	other := c.Start("master-2", "127.0.1.45")
	cfg := sshexec.Config{KeyFile: c.ClientKeyPath(), KnownHostsFile: c.KnownHostsPath(), Port: h.Port}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(h *simhost.Host) *sshexec.Client {
		cfg.Port = h.Port
		cl, err := sshexec.Dial(ctx, h.IP, cfg)
		require.NoError(t, err)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	install := func(cl *sshexec.Client, key *openpgp.Entity) bool {
		k, err := nodetrust.ParseAptKey(armored(t, key, false))
		require.NoError(t, err)
		certs, err := nodetrust.Parse(ca)
		require.NoError(t, err)
		_, err = nodetrust.InstallCAOn(ctx, cl, certs)
		require.NoError(t, err)
		changed, err := nodetrust.InstallAptSource(ctx, cl, k, server, []string{"bpa-offline-tool"})
		require.NoError(t, err)
		return changed
	}

	cl := dial(h)
	assert.True(t, install(cl, signer))
	assert.False(t, install(cl, signer), "a rerun finds key and source current")
	src, err := os.ReadFile(h.File(bpav1.AptSourcePath))
	require.NoError(t, err)
	assert.Equal(t, "Types: deb\nURIs: "+server+"/apt/\nSuites: ./\nSigned-By: "+bpav1.AptKeyPath+"\n", string(src))
	prefs, err := os.ReadFile(h.File(bpav1.AptPreferencesPath))
	require.NoError(t, err)
	want, _ := nodetrust.AptPreferences([]string{"bpa-offline-tool"})
	assert.Equal(t, want, string(prefs), "the pinning TestAptPreferencesWithRealApt checks with real apt")
	_, err = cl.Output(ctx, []string{"apt-get", "update"})
	require.NoError(t, err)
	out, err := cl.Output(ctx, []string{"apt-cache", "show", "--no-all-versions", "--", "bpa-offline-tool"})
	require.NoError(t, err)
	assert.Contains(t, string(out), "Version: 1.2-1")

	ocl := dial(other)
	assert.True(t, install(ocl, newKey(t)))
	_, err = ocl.Output(ctx, []string{"apt-get", "update"})
	assert.ErrorContains(t, err, "is not signed")
	_, err = ocl.Output(ctx, []string{"apt-cache", "show", "--", "bpa-offline-tool"})
	assert.Error(t, err, "a repository signed by another key adds nothing")
}
