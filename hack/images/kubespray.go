package images

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// Rootfs is a Debian root filesystem made by mmdebstrap from Debian's packages.
type Rootfs struct {
	// Mirror is the Debian archive (http://deb.debian.org/debian), Suite the release.
	Mirror, Suite string
	// Packages are installed on Debian's essential set, with their dependencies but no
	// recommends.
	Packages []string
}

// KubesprayRootfs is the stand-in kubespray image's system: what run-kubespray and the
// stand-in tree run (ansible-playbook, ssh, python3), from Debian bookworm.
var KubesprayRootfs = Rootfs{
	Mirror:   "http://deb.debian.org/debian",
	Suite:    "bookworm",
	Packages: []string{"ansible-core", "openssh-client", "python3"},
}

// inRelease is the suite's signed index: its digest names the set of package versions
// mmdebstrap installs, so it keys the cache (a point release makes a new rootfs).
func (r Rootfs) inRelease(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.Mirror+"/dists/"+r.Suite+"/InRelease", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	return sha256Hex(data), err
}

// key is the digest of the rootfs's inputs at the archive's state release (InRelease's
// digest).
func (r Rootfs) key(release string) string {
	pkgs := append([]string(nil), r.Packages...)
	sort.Strings(pkgs)
	return sha256Hex([]byte(strings.Join([]string{recipe, r.Mirror, r.Suite, strings.Join(pkgs, ","), release}, "\n")))[:16]
}

// Build returns the rootfs as a normalised tar in dir/rootfs/<key>.tar, made by mmdebstrap
// (as root) when no tar of that key is there: about 2 minutes cold. When the archive
// cannot be reached, the newest rootfs there is used, and said so in note.
func (r Rootfs) Build(ctx context.Context, dir string) (p, key, note string, err error) {
	cache := filepath.Join(dir, "rootfs")
	release, err := r.inRelease(ctx)
	if err != nil {
		p, key = newest(cache)
		if p == "" {
			return "", "", "", fmt.Errorf("resolving %s %s: %w", r.Mirror, r.Suite, err)
		}
		return p, key, fmt.Sprintf("%s unreachable (%v): using the cached rootfs %s", r.Mirror, err, key), nil
	}
	key = r.key(release)
	p = filepath.Join(cache, key+".tar")
	if _, err := os.Stat(p); err == nil {
		return p, key, "", nil
	}
	return p, key, "", r.debootstrap(ctx, p)
}

// newest is the most recently built rootfs tar in cache, and its key.
func newest(cache string) (p, key string) {
	matches, _ := filepath.Glob(filepath.Join(cache, "*.tar"))
	var at time.Time
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.ModTime().After(at) {
			p, at = m, fi.ModTime()
		}
	}
	return p, strings.TrimSuffix(filepath.Base(p), ".tar")
}

// debootstrap runs mmdebstrap into a temporary tar and normalises it into p.
func (r Rootfs) debootstrap(ctx context.Context, p string) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("mmdebstrap (Debian's mmdebstrap; hack/deps.sh installs it): %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	raw := p + ".mmdebstrap"
	defer func() { _ = os.Remove(raw) }()
	args := []string{"--variant=essential", "--include=" + strings.Join(r.Packages, ","), "--format=tar"}
	// Documentation and translations are of no use in a container.
	for _, x := range []string{"/usr/share/man/*", "/usr/share/doc/*", "/usr/share/info/*", "/usr/share/locale/*"} {
		args = append(args, "--dpkgopt=path-exclude="+x)
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", append(args, r.Suite, raw, r.Mirror)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", Epoch.Unix()))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mmdebstrap: %v\n%s", err, out)
	}
	return normalise(raw, p)
}

// normalise copies the tar src to dst without device nodes (a container runtime mounts its
// own /dev), with paths without "./", every time at Epoch and owners by number only.
func normalise(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = copyNormalised(tar.NewReader(in), tar.NewWriter(out))
	if err = errors.Join(err, out.Close()); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return os.Rename(tmp, dst)
}

func copyNormalised(tr *tar.Reader, tw *tar.Writer) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		h.Name = strings.TrimPrefix(h.Name, "./")
		if h.Name == "" || h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock || h.Typeflag == tar.TypeFifo {
			continue
		}
		if h.Typeflag == tar.TypeLink {
			h.Linkname = strings.TrimPrefix(h.Linkname, "./")
		}
		h.ModTime, h.AccessTime, h.ChangeTime, h.Uname, h.Gname = Epoch, time.Time{}, time.Time{}, "", ""
		h.Format, h.Xattrs, h.PAXRecords = tar.FormatUnknown, nil, xattrs(h.PAXRecords) //nolint:staticcheck // Xattrs is what PAXRecords duplicates
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// xattrs keeps only the extended attributes of a tar entry's PAX records (file
// capabilities): its times and names are the ones set here.
func xattrs(records map[string]string) map[string]string {
	var out map[string]string
	for k, v := range records {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// KubesprayRepo is where kubespray publishes its image; its tag names the release.
const KubesprayRepo = "quay.io/kubespray/kubespray"

// Kubespray is the stand-in kubespray image: the Debian rootfs (rootfs, its tar and key
// from Rootfs.Build), the stand-in tree (test/framework/kubespraysim/kubespray) at
// /kubespray, its working directory as in kubespray's image. It is tagged with every release
// pkg/kubespray supports: the tag is what the stand-in playbooks read the release from. It
// runs as root, as kubespray's does. What the stand-in does to the machines it does through
// their folders and its agent, which the test site that simulates those machines hands the
// container (test/framework/sim): none of that is in the image.
func Kubespray(o Options, rootfs, rootfsKey string) (Spec, error) {
	tree, err := treeEntries(filepath.Join(o.Root, "test", "framework", "kubespraysim", "kubespray"), "kubespray")
	if err != nil {
		return Spec{}, err
	}
	refs := make([]string, 0, len(kubespray.Versions()))
	for _, v := range kubespray.Versions() {
		refs = append(refs, KubesprayRepo+":"+v)
	}
	return Spec{
		Name: "kubespray",
		Refs: refs,
		Layers: []Layer{
			{What: "Debian " + KubesprayRootfs.Suite + " with " + strings.Join(KubesprayRootfs.Packages, ", "), TarFile: rootfs, TarKey: rootfsKey},
			{What: "stand-in kubespray tree", Entries: tree},
		},
		Config: v1.Config{
			Env: []string{pathEnv, "LANG=C.UTF-8",
				// The tree is shared by every run of the image: keep Python from writing into it.
				"PYTHONDONTWRITEBYTECODE=1"},
			WorkingDir: "/kubespray",
			Cmd:        []string{"/bin/bash"},
		},
	}, nil
}

// treeEntries is the directory src as entries under prefix, owned by root, files 0644
// (0755 when executable) and directories 0755, without Python caches.
func treeEntries(src, prefix string) ([]Entry, error) {
	entries := []Entry{Dir(prefix, 0o755, 0, 0)}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.Name() == "__pycache__" || strings.HasSuffix(d.Name(), ".pyc") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		dst := filepath.ToSlash(filepath.Join(prefix, rel))
		switch {
		case d.IsDir():
			entries = append(entries, Dir(dst, 0o755, 0, 0))
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			perm := fs.FileMode(0o644)
			if fi.Mode()&0o111 != 0 {
				perm = 0o755
			}
			e, err := ReadFile(dst, perm, p)
			entries = append(entries, e)
			return err
		default:
			return fmt.Errorf("%s: only files and directories belong in the tree", p)
		}
		return nil
	})
	return entries, err
}
