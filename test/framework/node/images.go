package node

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// The images every node has, built locally (no registry): containerd's sandbox image, a
// busybox for test pods (with probe, see ./probe), and Argo's executor.
const (
	PauseImage    = "bpa.test/pause:1"
	BusyboxImage  = "bpa.test/busybox:1"
	ExecutorImage = "bpa.test/argoexec:" + rig.ArgoVersion
)

// busybox is Debian's busybox-static (hack/deps.sh installs it): the images' shell and tools.
const busybox = "/bin/busybox"

// image is one image to build: its entrypoint and its files besides busybox (path in the
// image: file on the machine).
type image struct {
	entrypoint []string
	files      map[string]string
}

// buildImages writes the node's images as docker-archive tarballs into dir, for
// `ctr images import`. This is the one place the node makes images; the project's image
// builder is to take its place.
func buildImages(dir, binDir string) ([]string, error) {
	probe, err := buildProbe(dir)
	if err != nil {
		return nil, err
	}
	images := map[string]image{
		// Holds the pod's namespaces; PID 1 ignores SIGTERM, and containerd kills it.
		PauseImage:    {entrypoint: []string{"/bin/sleep", "2147483647"}},
		BusyboxImage:  {entrypoint: []string{"/bin/sh"}, files: map[string]string{"bin/probe": probe}},
		ExecutorImage: {entrypoint: []string{"/bin/argoexec"}, files: map[string]string{"bin/argoexec": filepath.Join(binDir, "argoexec")}},
	}
	var tars []string
	for ref, img := range images {
		out := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
		if err := writeImage(out, ref, img); err != nil {
			return nil, fmt.Errorf("image %s: %w", ref, err)
		}
		tars = append(tars, out)
	}
	return tars, nil
}

// writeImage writes a one-layer linux image: busybox with a link per applet, a /tmp, and
// img's files. Entries are sorted and dated 0, so the same inputs give the same digest.
func writeImage(out, ref string, img image) error {
	if err := requireStatic(busybox); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	applets, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", busybox, err)
	}
	files := map[string]string{"bin/busybox": busybox}
	for k, v := range img.files {
		files[k] = v
	}
	layerTar, err := layer(files, strings.Fields(string(applets)))
	if err != nil {
		return err
	}
	// The fastest gzip: argoexec is 110 MB, and the tarball lives as long as the node.
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	i, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	cfg, err := i.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config = v1.Config{Entrypoint: img.entrypoint, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}
	if i, err = mutate.ConfigFile(i, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, i)
}

// layer is a tar of files (path in the image: file on the machine), each with its mode, a
// bin/<applet> link to busybox per applet, and /tmp.
func layer(files map[string]string, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []tar.Header{{Name: "bin/", Mode: 0o755}, {Name: "tmp/", Mode: 0o1777}} {
		d.Typeflag = tar.TypeDir
		if err := tw.WriteHeader(&d); err != nil {
			return nil, err
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data, err := os.ReadFile(files[p])
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	sort.Strings(applets)
	for _, a := range applets {
		if _, taken := files["bin/"+a]; taken || a == "busybox" {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	err := tw.Close()
	return buf.Bytes(), err
}

// requireStatic fails for a dynamically linked program: the images have no libc.
func requireStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the images need Debian's busybox-static (hack/deps.sh installs it)", path)
		}
	}
	return nil
}

// buildProbe builds ./probe, statically (the busybox image has no libc), into dir.
func buildProbe(dir string) (string, error) {
	root, err := rig.RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "probe")
	return out, framework.BuildTo(root, "./test/framework/node/probe", out, "CGO_ENABLED=0")
}

// importImages imports the image tarballs into containerd's CRI namespace.
func (n *Node) importImages(ctx context.Context, tars []string) error {
	for _, t := range tars {
		if _, err := n.Ctr(ctx, "images", "import", "--platform", "linux/"+runtime.GOARCH, t); err != nil {
			return err
		}
	}
	return nil
}

// Ctr runs ctr against the node's containerd, in the CRI's namespace (k8s.io), and
// returns its output.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	args = append([]string{"--address", n.files.Sock, "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, filepath.Join(n.Rig.BinDir, "ctr"), args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
