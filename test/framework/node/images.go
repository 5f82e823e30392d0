package node

import (
	"context"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/akraino-edge-stack/bpa/hack/images"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// The images every node has, all built by the project's image builder (hack/images):
// containerd's sandbox image and Argo's executor under their real names, and a busybox for
// test pods (with probe, see ./probe).
const (
	PauseImage    = images.PauseRef
	BusyboxImage  = "bpa.test/busybox:1"
	ExecutorImage = images.ArgoexecRepo + ":" + rig.ArgoVersion
)

// buildImages builds the node's images: pause and argoexec into the bin dir's images/
// (cached there on their inputs, as `make images` does), the test busybox into the node's
// dir.
func buildImages(ctx context.Context, dir, binDir string) ([]images.Built, error) {
	root, err := rig.RepoRoot()
	if err != nil {
		return nil, err
	}
	o, err := images.Options{Root: root, Dir: filepath.Join(binDir, "images"), Argoexec: filepath.Join(binDir, "argoexec")}.Defaults()
	if err != nil {
		return nil, err
	}
	if o.ArgoVersion != rig.ArgoVersion {
		return nil, fmt.Errorf("hack/tools/argo pins %s, the rig %s", o.ArgoVersion, rig.ArgoVersion)
	}
	built, err := images.Build(ctx, o, []string{"pause", "argoexec"}, func(string, ...any) {})
	if err != nil {
		return nil, err
	}
	bb, err := busyboxSpec(o, dir)
	if err != nil {
		return nil, err
	}
	b, err := images.Write(dir, bb)
	return append(built, b), err
}

// busyboxSpec is the test pods' image: Debian's busybox-static with its applets, and probe.
func busyboxSpec(o images.Options, dir string) (images.Spec, error) {
	bb, err := images.Busybox(o.Busybox)
	if err != nil {
		return images.Spec{}, err
	}
	out := filepath.Join(dir, "probe")
	if err := framework.BuildTo(o.Root, "./test/framework/node/probe", out, "CGO_ENABLED=0"); err != nil {
		return images.Spec{}, err
	}
	probe, err := images.Binary("bin/probe", out)
	if err != nil {
		return images.Spec{}, err
	}
	return images.Spec{
		Name:   "busybox",
		Refs:   []string{BusyboxImage},
		Layers: []images.Layer{{What: "busybox-static", Entries: append(bb, images.Dir("tmp", fs.ModeSticky|0o777, 0, 0))}, {What: "probe", Entries: []images.Entry{probe}}},
		Config: v1.Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
	}, nil
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

// RunContainer starts a container called id from image, with args as its command, straight
// on the node's containerd (`ctr run -d`), without the kubelet, the CRI or CNI: the floor
// a pod's start is measured against. It runs in the CRI's namespace, so with the images
// pods pulled, under the same runc, with its own cgroup under the node's root (which Stop
// removes with the rest, so the machine's cgroup tree is untouched) and a network
// namespace of its own with only loopback. Its output goes to a file in the node's dir, as
// a pod's goes to its log. It returns once the container's process has started;
// RemoveContainer kills and removes it.
func (n *Node) RunContainer(ctx context.Context, id, image string, args ...string) error {
	_, err := n.Ctr(ctx, append([]string{"run", "--detach",
		"--runc-binary", filepath.Join(n.Rig.BinDir, "runc"),
		"--cgroup", "/" + cgroupRoot + "/ctr-" + id,
		"--log-uri", "file://" + filepath.Join(n.Dir, "ctr-logs", id+".log"),
		image, id}, args...)...)
	return err
}

// RemoveContainer kills a container RunContainer started and removes it with its snapshot.
func (n *Node) RemoveContainer(ctx context.Context, id string) error {
	if _, err := n.Ctr(ctx, "tasks", "delete", "--force", id); err != nil {
		return err
	}
	_, err := n.Ctr(ctx, "containers", "delete", id)
	return err
}
