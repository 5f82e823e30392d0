package artifacts_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
)

func run(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// debPackage builds a real package with dpkg-deb, control.tar and data.tar compressed with comp.
func debPackage(t *testing.T, name, version, comp string) string {
	root := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr", "share", "doc", name), 0o755))
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: BPA <bpa@bpa.test>\n"+
		"Description: %s, for the apt repository test\n Built with dpkg-deb -Z%s.\n .\n A second paragraph.\n", name, version, name, comp)
	require.NoError(t, os.WriteFile(filepath.Join(root, "DEBIAN", "control"), []byte(control), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "share", "doc", name, "README"), []byte(name+" "+version+"\n"), 0o644))
	out, err := run(t, "", nil, "dpkg-deb", "--root-owner-group", "-Z"+comp, "--build", root, root+".deb")
	require.NoError(t, err, out)
	return root + ".deb"
}

// sandbox is a root directory for the machine's apt-get and apt-cache: no host
// configuration, state or keys, no root needed, the server's repository as the only source
// (signed by the key in publicKey), read with token when one is given. Downloads land in
// its download/.
type sandbox struct {
	t    *testing.T
	root string
}

func aptSandbox(t *testing.T, url, publicKey, token string) sandbox {
	root := t.TempDir()
	for _, d := range []string{"etc/apt/apt.conf.d", "etc/apt/sources.list.d", "etc/apt/trusted.gpg.d", "etc/apt/preferences.d",
		"etc/apt/auth.conf.d", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg", "download"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	files := map[string]string{
		"var/lib/dpkg/status":                "",
		"etc/apt/sources.list.d/bpa.sources": fmt.Sprintf("Types: deb\nURIs: %s/apt/\nSuites: ./\nSigned-By: %s\n", url, publicKey),
	}
	if token != "" {
		files["etc/apt/auth.conf.d/bpa.conf"] = fmt.Sprintf("machine %s/apt/ login bpa password %s\n", url, token)
	}
	u, err := user.Current()
	require.NoError(t, err)
	// Read first (APT_CONFIG), it moves everything else under root, the host's apt.conf.d too.
	files["apt.conf"] = fmt.Sprintf(`Dir "%s/"; Dir::State::status "%s/var/lib/dpkg/status"; Debug::NoLocking "true";
APT::Sandbox::User "%s"; Acquire::http::Proxy "DIRECT"; Acquire::Languages "none";`, root, root, u.Username)
	for f, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte(content), 0o600))
	}
	return sandbox{t, root}
}

func (s sandbox) run(args ...string) (string, error) {
	return run(s.t, filepath.Join(s.root, "download"), []string{"APT_CONFIG=" + filepath.Join(s.root, "apt.conf")}, args[0], args[1:]...)
}

// gpgKey makes a signing key as the README says, with the machine's gpg: the armored
// private key for --apt-signing-key, the armored public key for apt's Signed-By.
func gpgKey(t *testing.T) (signingKey, publicKey string) {
	home := t.TempDir()
	env := []string{"GNUPGHOME=" + home}
	t.Cleanup(func() { _, _ = run(t, "", env, "gpgconf", "--kill", "gpg-agent") })
	out, err := run(t, "", env, "gpg", "--batch", "--passphrase", "", "--quick-gen-key", "BPA apt <apt@bpa.test>", "ed25519", "sign", "never")
	require.NoError(t, err, out)
	signingKey, publicKey = filepath.Join(home, "signing.asc"), filepath.Join(home, "key.asc")
	for file, args := range map[string][]string{signingKey: {"--export-secret-keys"}, publicKey: {"--export"}} {
		cmd := exec.Command("gpg", append([]string{"--batch", "--armor"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.Output()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file, b, 0o600))
	}
	return signingKey, publicKey
}

// releaseSums are the SHA256 lines of a Release: file name to "sum size".
func releaseSums(release []byte) map[string]string {
	sums := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ ([0-9a-f]{64}) +(\d+) (\S+)$`).FindAllSubmatch(release, -1) {
		sums[string(m[3])] = string(m[1]) + " " + string(m[2])
	}
	return sums
}

func sumSize(b []byte) string {
	s := sha256.Sum256(b)
	return fmt.Sprintf("%s %d", hex.EncodeToString(s[:]), len(b))
}

func controlValue(m *artifacts.FileMeta, name string) string {
	for _, f := range m.Control {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// arArchive is an ar archive of the members (name, content), laid out as dpkg-deb does.
func arArchive(members ...[2]string) []byte {
	b := bytes.NewBufferString("!<arch>\n")
	for _, m := range members {
		fmt.Fprintf(b, "%-16s%-12d%-6d%-6d%-8s%-10d`\n%s", m[0], 0, 0, 0, "100644", len(m[1]), m[1])
		if len(m[1])%2 == 1 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// tarball is a tar of regular files (name, content).
func tarball(t *testing.T, files ...[2]string) string {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(f[1]))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	return b.String()
}

func gzipped(t *testing.T, s string) string {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.String()
}

// debWith is a .deb of the control member given (name, content) and an empty data.tar.gz.
func debWith(t *testing.T, control [2]string) []byte {
	return arArchive([2]string{"debian-binary", "2.0\n"}, control, [2]string{"data.tar.gz", gzipped(t, tarball(t))})
}

// debOf is a .deb whose ./control is control.
func debOf(t *testing.T, control string) []byte {
	return debWith(t, [2]string{"control.tar.gz", gzipped(t, tarball(t, [2]string{"./control", control}))})
}

// xzDict is the xz stream of s, its block header asking for a dictionary of dict bytes
// (as the header encodes it: 2 or 3 times a power of two) with a correct header CRC.
func xzDict(t *testing.T, s string, code byte) string {
	var b bytes.Buffer
	xw, err := xz.NewWriter(&b)
	require.NoError(t, err)
	_, err = xw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, xw.Close())
	x := b.Bytes()
	hdr := x[12 : 12+(int(x[12])+1)*4] // the first block's header, after the stream header
	i := 2
	for _, present := range []bool{hdr[1]&0x40 != 0, hdr[1]&0x80 != 0} { // sizes, as varints
		for present && hdr[i]&0x80 != 0 {
			i++
		}
		if present {
			i++
		}
	}
	require.Equal(t, []byte{0x21, 1}, hdr[i:i+2], "LZMA2 filter")
	hdr[i+2] = code
	binary.LittleEndian.PutUint32(hdr[len(hdr)-4:], crc32.ChecksumIEEE(hdr[:len(hdr)-4]))
	return string(x)
}

const goodControl = "Package: bpa-evil\nVersion: 1\nArchitecture: all\nDescription: d\n"

func testAptRepository(t *testing.T, e *env) {
	ctx := context.Background()
	const pool = "deb.debian.org/debian/pool/main/b/"
	signingKey, publicKey := gpgKey(t)
	s := e.serveOpts(t, "", false, artifacts.Options{Dir: t.TempDir(), AptSigningKey: signingKey})
	c, _ := s.client(t, e.uploader)

	t.Run("the machine's apt-get downloads from it what was pushed", func(t *testing.T) {
		pushed := map[string]string{} // package to sha256
		for _, p := range []struct{ name, version, comp string }{
			{"bpa-xz", "1.0-1", "xz"}, {"bpa-zstd", "2:2.5~rc1-3", "zstd"}, {"bpa-gzip", "0.1", "gzip"}, {"bpa-none", "1", "none"},
		} {
			m, err := c.Push(ctx, debPackage(t, p.name, p.version, p.comp), pool+p.name+"/"+p.name+"_"+p.version+"_all.deb")
			require.NoError(t, err, p.comp)
			assert.Equal(t, p.version, controlValue(m, "Version"), "the metadata holds the control file")
			pushed[p.name] = m.SHA256
			t.Cleanup(func() { _ = c.Remove(ctx, m.Path) })
		}
		apt := aptSandbox(t, s.URL, publicKey, e.uploader)
		out, err := apt.run("apt-get", "update")
		require.NoError(t, err, out)
		require.NotContains(t, out, "W:", "apt warns of nothing")
		for name, sum := range pushed {
			out, err := apt.run("apt-cache", "show", name)
			require.NoError(t, err, out)
			assert.Contains(t, out, "Filename: "+pool+name+"/", name)
			out, err = apt.run("apt-cache", "policy", name)
			require.NoError(t, err, out)
			assert.Regexp(t, `Candidate: \S+`, out, name)
			out, err = apt.run("apt-get", "download", name)
			require.NoError(t, err, out)
			got, err := filepath.Glob(filepath.Join(apt.root, "download", name+"_*.deb"))
			require.NoError(t, err)
			require.Len(t, got, 1, out)
			gotSum, err := artifacts.FileSHA256(got[0])
			require.NoError(t, err)
			assert.Equal(t, sum, gotSum, name)
		}
	})

	t.Run("apt refuses it signed with a key other than Signed-By's", func(t *testing.T) {
		m, err := c.Push(ctx, debPackage(t, "bpa-other", "1", "xz"), pool+"bpa-other_1_all.deb")
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Remove(ctx, m.Path) })
		_, other := artifactstest.AptKey(t)
		apt := aptSandbox(t, s.URL, other, e.uploader)
		out, err := apt.run("apt-get", "update")
		assert.Error(t, err, out)
		assert.Contains(t, out, "NO_PUBKEY")
		out, err = apt.run("apt-cache", "show", "bpa-other")
		assert.Error(t, err, "the package is unknown: %s", out)
	})

	t.Run("reads follow the rule of /files/, and without a key /apt/ is off", func(t *testing.T) {
		m, err := c.Push(ctx, debPackage(t, "bpa-reads", "1", "gzip"), pool+"bpa-reads_1_all.deb")
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Remove(ctx, m.Path) })
		for _, p := range []string{"InRelease", m.Path} {
			status, _ := get(t, s.URL+"/apt/"+p, "")
			assert.Equal(t, http.StatusUnauthorized, status, p)
			status, _ = get(t, s.URL+"/apt/"+p, e.stranger)
			assert.Equal(t, http.StatusForbidden, status, p)
			status, _ = get(t, s.URL+"/apt/"+p, e.uploader)
			assert.Equal(t, http.StatusOK, status, p)
		}
		anon := e.serveOpts(t, "", true, artifacts.Options{Dir: s.dir, AptSigningKey: signingKey})
		status, body := get(t, anon.URL+"/apt/./"+m.Path, "", "Range", "bytes=0-7")
		assert.Equal(t, http.StatusPartialContent, status)
		assert.Equal(t, "!<arch>\n", string(body))
		for _, p := range []string{m.Path + ".json", "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet", "Packages.xz", "../meta/" + m.Path + ".json"} {
			status, _ = get(t, anon.URL+"/apt/"+p, "")
			assert.Contains(t, []int{http.StatusNotFound, http.StatusBadRequest}, status, "only .deb files and the index: %s", p)
		}

		off := e.serve(t, s.dir, "", true)
		for _, p := range []string{"InRelease", "Release", "Packages", m.Path} {
			status, body := get(t, off.URL+"/apt/"+p, "")
			assert.Equal(t, http.StatusNotFound, status, p)
			assert.Contains(t, string(body), "--apt-signing-key", p)
		}
	})

	t.Run("a hostile .deb is refused at publish and never listed", func(t *testing.T) {
		_, release := get(t, s.URL+"/apt/Release", e.uploader)
		start := time.Now()
		big := strings.Repeat("x", 17<<20)
		for name, tc := range map[string]struct {
			deb  []byte
			want string
		}{
			"not an ar archive":        {[]byte("#!/bin/sh\necho pwned\n"), "not an ar archive"},
			"a second paragraph":       {debOf(t, goodControl+"\nPackage: bpa-injected\nVersion: 9\nArchitecture: all\n"), "line 5: blank line"},
			"a white space line":       {debOf(t, goodControl+" \t\nX-Injected: 1\n"), "line 5: a continuation line"},
			"a CR":                     {debOf(t, strings.ReplaceAll(goodControl, "\n", "\r\n")), "control character '\\r'"},
			"a field name with space":  {debOf(t, goodControl+"Evil Field: x\n"), "line 5: want Name: value"},
			"a field name with colon":  {debOf(t, goodControl+":Package: bpa-injected\n"), "line 5: want Name: value"},
			"a field given twice":      {debOf(t, goodControl+"package: bpa-injected\n"), "field package given twice"},
			"no Version":               {debOf(t, "Package: bpa-evil\nArchitecture: all\n"), "field Version"},
			"a Version on two lines":   {debOf(t, "Package: bpa-evil\nVersion: 1\n 2\nArchitecture: all\n"), "field Version"},
			"a control file of 17 MiB": {debOf(t, goodControl+"X-Big: "+big+"\n"), "./control is not a regular file of at most"},
			"a control member of 17 MiB": {debWith(t, [2]string{"control.tar", tarball(t, [2]string{"./md5sums", big}, [2]string{"./control", goodControl})}),
				"control.tar: 17"},
			"a control.tar of 65 MiB": {debWith(t, [2]string{"control.tar.gz", gzipped(t, tarball(t,
				[2]string{"./md5sums", strings.Repeat("\x00", 65<<20)}, [2]string{"./control", goodControl}))}), "no ./control in its first"},
			"an xz dictionary of 2 GiB": {debWith(t, [2]string{"control.tar.xz", xzDict(t, tarball(t, [2]string{"./control", goodControl}), 38)}),
				"dictionary"},
			"no debian-binary first": {arArchive([2]string{"control.tar", tarball(t, [2]string{"./control", goodControl})}), "want debian-binary"},
		} {
			file := filepath.Join(t.TempDir(), "evil.deb")
			require.NoError(t, os.WriteFile(file, tc.deb, 0o600))
			p := pool + "bpa-evil/" + strings.ReplaceAll(name, " ", "-") + ".deb"
			_, err := c.Push(ctx, file, p)
			require.ErrorContains(t, err, "400 Bad Request", name)
			assert.ErrorContains(t, err, tc.want, name)
			for _, prefix := range []string{"/files/", "/apt/"} {
				status, _ := get(t, s.URL+prefix+p, e.uploader)
				assert.Equal(t, http.StatusNotFound, status, "%s: %s is not served", name, prefix)
			}
		}
		left, _ := filepath.Glob(filepath.Join(s.dir, "uploads", "*"))
		assert.Empty(t, left, "refused uploads are deleted")
		time.Sleep(time.Second - time.Since(start))
		_, again := get(t, s.URL+"/apt/Release", e.uploader)
		assert.Equal(t, string(release), string(again), "refusals leave the index as it was, and it is not rebuilt, not even its Date")
	})

	t.Run("the index's Filename, Size and SHA256 are BPA's", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "x.deb")
		require.NoError(t, os.WriteFile(file, debOf(t, "Package: bpa-filename\nVersion: 1\nArchitecture: all\n"+
			"Filename: ../../etc/passwd\nsize: 1\nSHA256: "+strings.Repeat("0", 64)+"\nMD5sum: 0\nDescription: d\n"), 0o600))
		m, err := c.Push(ctx, file, pool+"bpa-filename_1_all.deb")
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Remove(ctx, m.Path) })
		_, packages := get(t, s.URL+"/apt/Packages", e.uploader)
		assert.NotContains(t, string(packages), "etc/passwd")
		var para string
		for _, p := range strings.Split(string(packages), "\n\n") {
			if strings.HasPrefix(p, "Package: bpa-filename\n") {
				para = p
			}
		}
		assert.Equal(t, fmt.Sprintf("Package: bpa-filename\nVersion: 1\nArchitecture: all\nDescription: d\nFilename: %s\nSize: %d\nSHA256: %s\n",
			m.Path, m.Size, m.SHA256), para)
	})

	t.Run("Release describes the Packages served with it while .debs are published", func(t *testing.T) {
		keys, err := os.Open(publicKey)
		require.NoError(t, err)
		keyring, err := openpgp.ReadArmoredKeyRing(keys)
		keys.Close()
		require.NoError(t, err)
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done)
			for i := range 8 {
				file := filepath.Join(t.TempDir(), "c.deb")
				assert.NoError(t, os.WriteFile(file, debOf(t, fmt.Sprintf("Package: bpa-c%d\nVersion: 1\nArchitecture: all\n", i)), 0o600))
				_, err := c.Push(ctx, file, fmt.Sprintf("%sbpa-c/bpa-c%d_1_all.deb", pool, i))
				assert.NoError(t, err)
			}
		}()
		checked := 0
		for running := true; running; {
			select {
			case <-done:
				running = false // one more round, after the last publish
			default:
			}
			_, in1 := get(t, s.URL+"/apt/InRelease", e.uploader)
			_, packages := get(t, s.URL+"/apt/Packages", e.uploader)
			_, gz := get(t, s.URL+"/apt/Packages.gz", e.uploader)
			_, release := get(t, s.URL+"/apt/Release", e.uploader)
			_, detached := get(t, s.URL+"/apt/Release.gpg", e.uploader)
			_, in2 := get(t, s.URL+"/apt/InRelease", e.uploader)
			if !bytes.Equal(in1, in2) {
				continue // published in between
			}
			block, _ := clearsign.Decode(in1)
			require.NotNil(t, block)
			_, err := block.VerifySignature(keyring, nil)
			require.NoError(t, err)
			require.Equal(t, string(release), string(block.Plaintext))
			_, err = openpgp.CheckArmoredDetachedSignature(keyring, bytes.NewReader(release), bytes.NewReader(detached), nil)
			require.NoError(t, err)
			sums := releaseSums(release)
			require.Equal(t, sumSize(packages), sums["Packages"])
			require.Equal(t, sumSize(gz), sums["Packages.gz"])
			checked++
		}
		wg.Wait()
		t.Logf("%d consistent snapshots checked", checked)
		_, packages := get(t, s.URL+"/apt/Packages", e.uploader)
		assert.Equal(t, 8, strings.Count(string(packages), "Package: bpa-c"))
		require.NoError(t, c.Remove(ctx, pool+"bpa-c/bpa-c3_1_all.deb"))
		_, packages = get(t, s.URL+"/apt/Packages", e.uploader)
		assert.NotContains(t, string(packages), "bpa-c3")
		assert.Equal(t, 7, strings.Count(string(packages), "Package: bpa-c"))
	})
}
