package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/akraino-edge-stack/bpa/hack/images"
	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
)

// options are the real inputs; binaries and the rootfs are built into (and cached in) the
// repository's bin/images, as `make images` does, and each test writes images elsewhere.
func options(t *testing.T) images.Options {
	t.Helper()
	o, err := images.Options{Root: filepath.Join("..", "..")}.Defaults()
	require.NoError(t, err)
	return o
}

var (
	bpaOnce sync.Once
	bpaBin  string
	bpaErr  error
)

// bpaBinary builds cmd/bpa for the image once per test process.
func bpaBinary(t *testing.T, o images.Options) string {
	t.Helper()
	bpaOnce.Do(func() { bpaBin, bpaErr = images.BuildBPA(o) })
	require.NoError(t, bpaErr)
	return bpaBin
}

func TestLayersDoNotDependOnOrder(t *testing.T) {
	a := images.File("etc/a", 0o644, []byte("a"))
	b := images.Symlink("usr/bin/b", "/bin/busybox")
	ab, err := images.Tar([]images.Entry{a, b})
	require.NoError(t, err)
	ba, err := images.Tar([]images.Entry{b, a})
	require.NoError(t, err)
	assert.Equal(t, ab, ba)
	names := tarNames(t, ab)
	assert.Equal(t, []string{"etc/", "etc/a", "usr/", "usr/bin/", "usr/bin/b"}, names, "parents added, sorted")
	_, err = images.Tar([]images.Entry{a, a})
	assert.ErrorContains(t, err, "listed twice")
}

func TestReproducible(t *testing.T) {
	o := options(t)
	// The pause image from scratch twice: its binary built into two folders, two images.
	digest := func(dir string) v1.Hash {
		o := o
		o.Dir = dir
		s, err := images.Pause(o)
		require.NoError(t, err)
		b, err := images.Write(dir, s)
		require.NoError(t, err)
		require.False(t, b.Cached)
		return b.Digest
	}
	first := digest(t.TempDir())
	assert.Equal(t, first, digest(t.TempDir()), "same sources, same digest")

	bin := bpaBinary(t, o)
	dir := t.TempDir()
	spec, err := images.BPA(o, bin)
	require.NoError(t, err)
	built, err := images.Write(dir, spec)
	require.NoError(t, err)
	again, err := images.Write(t.TempDir(), spec)
	require.NoError(t, err)
	assert.Equal(t, built.Digest, again.Digest)
	cached, err := images.Write(dir, spec)
	require.NoError(t, err)
	assert.True(t, cached.Cached, "the stamp matches: nothing rebuilt")
	assert.Equal(t, built.Digest, cached.Digest)

	// A changed input: one more certificate in the CA bundle.
	ca := filepath.Join(t.TempDir(), "ca.crt")
	orig, err := os.ReadFile(o.CAFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(ca, append(orig, orig[:200]...), 0o644))
	o.CAFile = ca
	changed, err := images.BPA(o, bin)
	require.NoError(t, err)
	rebuilt, err := images.Write(dir, changed)
	require.NoError(t, err)
	assert.False(t, rebuilt.Cached, "the stamp changed with the input")
	assert.NotEqual(t, built.Digest, rebuilt.Digest)
}

func TestBPAImage(t *testing.T) {
	o := options(t)
	spec, err := images.BPA(o, bpaBinary(t, o))
	require.NoError(t, err)
	img, cf := load(t, t.TempDir(), spec)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, []string{"/usr/local/bin/bpa"}, cf.Config.Entrypoint)
	assert.Equal(t, "linux", cf.OS)
	assert.Equal(t, []string{"ghcr.io/akraino-edge-stack/bpa:dev"}, spec.Refs)

	root := extract(t, img)
	for _, sh := range []string{"bin/sh", "bin/busybox", "usr/bin/sh", "bin/bash"} {
		assert.NoFileExists(t, filepath.Join(root, sh), "no shell")
	}
	ca, err := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	require.NoError(t, err)
	host, err := os.ReadFile(o.CAFile)
	require.NoError(t, err)
	assert.Equal(t, host, ca, "the build machine's Debian CA bundle")
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), "nonroot:x:65532:65532:")
	fi, err := os.Stat(filepath.Join(root, "tmp"))
	require.NoError(t, err)
	assert.Equal(t, os.ModeDir|os.ModeSticky|0o777, fi.Mode())
	fi, err = os.Stat(filepath.Join(root, "home/nonroot"))
	require.NoError(t, err)
	assert.Equal(t, uint32(65532), fi.Sys().(*syscall.Stat_t).Uid)

	// The binary in it runs, as the image's user, in the image's root.
	out, err := chroot(root, cf.Config, 65532, "/usr/local/bin/bpa", "--help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "BPA turns bare-metal hosts into Kubernetes clusters")
}

func TestPauseImage(t *testing.T) {
	o := options(t)
	o.Dir = t.TempDir()
	spec, err := images.Pause(o)
	require.NoError(t, err)
	img, cf := load(t, o.Dir, spec)
	assert.Equal(t, []string{"/pause"}, cf.Config.Entrypoint)
	root := extract(t, img)
	cmd := chroot(root, cf.Config, 65535, "/pause")
	require.NoError(t, cmd.Start())
	time.Sleep(200 * time.Millisecond)
	require.Nil(t, cmd.ProcessState, "pause sleeps")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, cmd.Wait(), "SIGTERM ends it with 0")
}

func TestArgoexecImage(t *testing.T) {
	o := options(t)
	// A real build takes bin/argoexec (hack/build-tools.sh); any static binary shows the layout.
	_, err := images.Pause(o) // builds bin/images/bin/pause
	require.NoError(t, err)
	o.Argoexec = filepath.Join(o.Dir, "bin", "pause")
	spec, err := images.Argoexec(o)
	require.NoError(t, err)
	assert.Equal(t, []string{"quay.io/argoproj/argoexec:" + o.ArgoVersion}, spec.Refs)
	img, cf := load(t, t.TempDir(), spec)
	root := extract(t, img)
	link, err := os.Readlink(filepath.Join(root, "bin/sh"))
	require.NoError(t, err)
	assert.Equal(t, "/bin/busybox", link)
	out, err := chroot(root, cf.Config, 0, "sh", "-c", "ls -l /usr/local/bin/argoexec && argoexec -v").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "-rwxr-xr-x")
	assert.Contains(t, string(out), "pause (bpa hack/images)", "argoexec on PATH is the input binary")
}

func TestKubesprayImage(t *testing.T) {
	o := options(t)
	var logs []string
	built, err := images.Build(context.Background(), o, []string{"kubespray"}, func(f string, a ...any) { logs = append(logs, f) })
	require.NoError(t, err, "%v", logs)
	b := built[0]
	var want []string
	for _, v := range kubespray.Versions() {
		want = append(want, "quay.io/kubespray/kubespray:"+v)
	}
	assert.Equal(t, want, b.Spec.Refs, "one tag per release pkg/kubespray supports")
	img, err := b.Image()
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "/kubespray", cf.Config.WorkingDir)
	root := extract(t, img)

	for _, argv := range [][]string{{"ansible-playbook", "--version"}, {"ssh", "-V"}, {"python3", "-c", "import yaml, jinja2"}} {
		out, err := chroot(root, cf.Config, 0, argv...).CombinedOutput()
		require.NoError(t, err, "%v: %s", argv, out)
		t.Logf("%v: %s", argv, strings.SplitN(string(out), "\n", 2)[0])
	}

	tree, err := filepath.Abs(filepath.Join(o.Root, "test/framework/kubespraysim/kubespray"))
	require.NoError(t, err)
	assertSameTree(t, tree, filepath.Join(root, "kubespray"))

	// The stand-in tree runs in it: cluster.yml's checks, with its plugins, on an inventory
	// of one host (check-only: no host is logged in to).
	in := filepath.Join(root, "tmp", "in")
	require.NoError(t, os.MkdirAll(in, 0o755))
	ini, _, err := inventory.Render([]bpav1.HostStatus{{Name: "m1", IP: "192.0.2.1", Roles: []string{"master"}, Etcd: true}}, inventory.Options{})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(in, "hosts.ini"), ini, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(in, "vars.yaml"), []byte("{}\n"), 0o644))
	cfg := cf.Config
	cfg.Env = append(append([]string{}, cfg.Env...), kubespraysim.EnvCheckOnly+"=true", kubespraysim.EnvImage+"="+want[len(want)-1], "ANSIBLE_NOCOLOR=1", "HOME=/root")
	out, _ := chroot(root, cfg, 0, "ansible-playbook", "-i", "/tmp/in/hosts.ini", "-e", "@/tmp/in/vars.yaml", "cluster.yml").CombinedOutput()
	assert.Contains(t, string(out), kubespraysim.CheckOnlyPassed)
}

func TestPushToBPAServe(t *testing.T) {
	o := options(t)
	dir := t.TempDir()
	o.Dir = dir
	pause, err := images.Pause(o)
	require.NoError(t, err)
	b, err := images.Write(dir, pause)
	require.NoError(t, err)
	img, err := b.Image()
	require.NoError(t, err)

	srv, err := artifacts.NewServer(context.Background(), artifacts.Options{Dir: t.TempDir(), Auth: allowAll})
	require.NoError(t, err)
	var mu sync.Mutex
	var auth []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	host := strings.TrimPrefix(ts.URL, "http://")
	reg := images.Registry{Host: host, Insecure: true, Token: "t0ken"}
	tags, err := reg.Push(context.Background(), img, pause.Refs)
	require.NoError(t, err)
	require.Len(t, tags, 1)
	assert.Equal(t, host+"/registry.k8s.io/pause:3.10", tags[0].String(), "under the original registry's name")
	assert.Contains(t, auth, "Bearer t0ken")

	ref, err := name.ParseReference(tags[0].String(), name.Insecure)
	require.NoError(t, err)
	pulled, err := remote.Image(ref)
	require.NoError(t, err)
	d, err := pulled.Digest()
	require.NoError(t, err)
	assert.Equal(t, b.Digest, d, "pulled back as pushed")
	// Tags are immutable on bpa serve; pushing the same image again is allowed (a rebuild
	// with the same inputs), as the digest is the same.
	_, err = reg.Push(context.Background(), img, pause.Refs)
	require.NoError(t, err)
}

// load writes spec into dir and reads the image back from its file, with its config.
func load(t *testing.T, dir string, spec images.Spec) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	b, err := images.Write(dir, spec)
	require.NoError(t, err)
	img, err := b.Image()
	require.NoError(t, err)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	return img, cf
}

// allowAll allows every request: the registry's data path is what is tested here (the
// server's own tests review tokens with a real apiserver).
var allowAll = &artifacts.Auth{
	Authn: authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: &user.DefaultInfo{Name: "images"}}, true, nil
	}),
	Authz: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	}),
}

// chroot runs argv in root as uid (and the same gid), with the image's environment and
// working directory, as a runtime would (without its namespaces).
func chroot(root string, cfg v1.Config, uid uint32, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	if !strings.Contains(argv[0], "/") {
		// exec.Command looked it up on this machine's PATH: use the image's.
		cmd.Path, cmd.Err = argv[0], nil
		for _, e := range cfg.Env {
			if p, ok := strings.CutPrefix(e, "PATH="); ok {
				for _, d := range strings.Split(p, ":") {
					if _, err := os.Lstat(filepath.Join(root, d, argv[0])); err == nil {
						cmd.Path, cmd.Err = filepath.Join(d, argv[0]), nil
						break
					}
				}
			}
		}
	}
	cmd.Env = append([]string{}, cfg.Env...) // never this machine's
	cmd.Dir = "/"
	if cfg.WorkingDir != "" {
		cmd.Dir = cfg.WorkingDir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	return cmd
}

// extract writes img's filesystem into a temporary folder, with its owners and modes.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var dirs []*tar.Header
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(p, 0o755))
			dirs = append(dirs, h)
			continue
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, errors.Join(err, f.Close()))
		case tar.TypeSymlink:
			require.NoError(t, os.Symlink(h.Linkname, p))
		case tar.TypeLink:
			require.NoError(t, os.Link(filepath.Join(root, filepath.Clean("/"+h.Linkname)), p))
			continue
		default:
			t.Fatalf("%s: unexpected entry type %c", h.Name, h.Typeflag)
		}
		require.NoError(t, os.Lchown(p, h.Uid, h.Gid))
		if h.Typeflag != tar.TypeSymlink {
			require.NoError(t, os.Chmod(p, h.FileInfo().Mode()))
		}
	}
	// A runtime gives every container a /dev with null in it (OpenSSH opens it).
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	require.NoError(t, unix.Mknod(filepath.Join(root, "dev", "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	require.NoError(t, os.Chmod(filepath.Join(root, "dev", "null"), 0o666))
	// Directories last: a read-only one would refuse its entries.
	for _, h := range dirs {
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		require.NoError(t, os.Chown(p, h.Uid, h.Gid))
		require.NoError(t, os.Chmod(p, h.FileInfo().Mode()))
	}
	return root
}

// assertSameTree checks that got holds exactly want's files, with the same content.
func assertSameTree(t *testing.T, want, got string) {
	t.Helper()
	files := func(root string) map[string][]byte {
		m := map[string][]byte{}
		require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, ".pyc") {
				return err
			}
			data, err := os.ReadFile(p)
			rel, _ := filepath.Rel(root, p)
			m[rel] = data
			return err
		}))
		return m
	}
	w, g := files(want), files(got)
	require.NotEmpty(t, w)
	assert.Len(t, g, len(w))
	for p, data := range w {
		assert.True(t, bytes.Equal(data, g[p]), "%s differs or is missing", p)
	}
}

func tarNames(t *testing.T, data []byte) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		require.NoError(t, err)
		assert.Equal(t, images.Epoch, h.ModTime.UTC())
		names = append(names, h.Name)
	}
}
