package images

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Options are the inputs of the images besides the repository's sources.
type Options struct {
	// Root is the repository; Dir the output folder (bin/images).
	Root, Dir string
	// CAFile is the build machine's CA bundle, from Debian's ca-certificates.
	CAFile string
	// BPATag is the bpa image's tag.
	BPATag string
	// Argoexec is Argo's executor binary (bin/argoexec); ArgoVersion its tag.
	Argoexec, ArgoVersion string
	// Busybox is Debian's busybox-static binary.
	Busybox string
}

// Defaults fills what o leaves empty: bin/images, Debian's CA bundle and busybox, bin/argoexec
// at the Argo version hack/tools/argo pins, the bpa tag "dev".
func (o Options) Defaults() (Options, error) {
	if o.Root == "" {
		return o, fmt.Errorf("images: no repository root")
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return o, err
	}
	o.Root = root
	set := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	set(&o.Dir, filepath.Join(o.Root, "bin", "images"))
	set(&o.CAFile, "/etc/ssl/certs/ca-certificates.crt")
	set(&o.Busybox, "/bin/busybox")
	set(&o.Argoexec, filepath.Join(o.Root, "bin", "argoexec"))
	set(&o.BPATag, "dev")
	if o.ArgoVersion == "" {
		v, err := ArgoVersion(o.Root)
		if err != nil {
			return o, err
		}
		o.ArgoVersion = v
	}
	return o, nil
}

// ArgoVersion is the Argo Workflows version hack/tools/argo pins (its go.mod's require).
func ArgoVersion(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "hack", "tools", "argo", "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		// "require m v" or, inside a require block, "m v".
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == "github.com/argoproj/argo-workflows/v3" {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("hack/tools/argo/go.mod requires no github.com/argoproj/argo-workflows/v3")
}

// Users the images know, as distroless has them.
const (
	// NonRoot is distroless's nonroot user and group, which bpa runs as.
	NonRoot = 65532
	passwd  = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group   = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	// Go's resolver reads it: files before DNS, as glibc does by default.
	nsswitch = "hosts: files dns\n"
	pathEnv  = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	caPath   = "/etc/ssl/certs/ca-certificates.crt"
)

// static is what gcr.io/distroless/static-debian12:nonroot holds that a static Go program
// uses: users, nsswitch.conf, the CA bundle, /tmp and the users' homes. (Not taken:
// its tzdata, os-release and package records.)
func static(caFile string) ([]Entry, error) {
	ca, err := ReadFile(caPath[1:], 0o644, caFile)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w (install Debian's ca-certificates)", err)
	}
	return []Entry{
		File("etc/passwd", 0o644, []byte(passwd)),
		File("etc/group", 0o644, []byte(group)),
		File("etc/nsswitch.conf", 0o644, []byte(nsswitch)),
		ca,
		Dir("tmp", fs.ModeSticky|0o777, 0, 0),
		Dir("root", 0o700, 0, 0),
		Dir("home/nonroot", 0o700, NonRoot, NonRoot),
	}, nil
}

// Binary is a static executable of the build machine as an entry.
func Binary(p, src string) (Entry, error) {
	if err := staticELF(src); err != nil {
		return Entry{}, err
	}
	return ReadFile(p, 0o755, src)
}

// BPARepo is where the bpa image is published; config/ names it.
const BPARepo = "ghcr.io/akraino-edge-stack/bpa"

// BPA is the image the controller, `bpa serve` and every step run: the static bpa binary on
// distroless's static files, as nonroot (uid and gid 65532), with bpa as the entrypoint and
// no shell. bin is the binary (BuildBPA).
func BPA(o Options, bin string) (Spec, error) {
	base, err := static(o.CAFile)
	if err != nil {
		return Spec{}, err
	}
	bpa, err := Binary("usr/local/bin/bpa", bin)
	if err != nil {
		return Spec{}, err
	}
	return Spec{
		Name:   "bpa",
		Refs:   []string{BPARepo + ":" + o.BPATag},
		Layers: []Layer{{What: "distroless static files", Entries: base}, {What: "bpa", Entries: []Entry{bpa}}},
		Config: v1.Config{
			User:       fmt.Sprintf("%d:%d", NonRoot, NonRoot),
			Entrypoint: []string{"/usr/local/bin/bpa"},
			Env:        []string{pathEnv, "SSL_CERT_FILE=" + caPath},
			WorkingDir: "/home/nonroot",
		},
	}, nil
}

// BuildBPA builds cmd/bpa for the image into bin/images/bin/bpa.
func BuildBPA(o Options) (string, error) {
	out := filepath.Join(o.Dir, "bin", "bpa")
	return out, GoBuild(o.Root, "./cmd/bpa", out)
}

// PauseRef is the pause image's name: the sandbox image containerd 2.1 asks for by default,
// so a node pulls it through its mirror as it would the real one.
const PauseRef = "registry.k8s.io/pause:3.10"

// Pause is the sandbox image: the project's own static pause (pause/), run as 65535 as
// Kubernetes' pause image is.
func Pause(o Options) (Spec, error) {
	out := filepath.Join(o.Dir, "bin", "pause")
	if err := GoBuild(o.Root, "./hack/images/pause", out); err != nil {
		return Spec{}, err
	}
	pause, err := Binary("pause", out)
	if err != nil {
		return Spec{}, err
	}
	return Spec{
		Name:   "pause",
		Refs:   []string{PauseRef},
		Layers: []Layer{{What: "pause", Entries: []Entry{pause}}},
		Config: v1.Config{User: "65535:65535", Entrypoint: []string{"/pause"}},
	}, nil
}

// ArgoexecRepo is where Argo publishes its executor image.
const ArgoexecRepo = "quay.io/argoproj/argoexec"

// Argoexec is Argo's executor image: Debian's busybox-static with its applets (a shell for
// `kubectl exec`, as Argo's own debug images have) plus argoexec in /usr/local/bin and the
// static files (CA bundle for artifact repositories). Argo's runs as root with argoexec as
// its entrypoint; so does this one.
func Argoexec(o Options) (Spec, error) {
	base, err := static(o.CAFile)
	if err != nil {
		return Spec{}, err
	}
	bb, err := Busybox(o.Busybox)
	if err != nil {
		return Spec{}, err
	}
	exe, err := Binary("usr/local/bin/argoexec", o.Argoexec)
	if err != nil {
		return Spec{}, fmt.Errorf("argoexec (hack/build-tools.sh argoexec builds bin/argoexec): %w", err)
	}
	return Spec{
		Name: "argoexec",
		Refs: []string{ArgoexecRepo + ":" + o.ArgoVersion},
		Layers: []Layer{
			{What: "distroless static files", Entries: base},
			{What: "busybox-static", Entries: bb},
			{What: "argoexec", Entries: []Entry{exe}},
		},
		Config: v1.Config{Entrypoint: []string{"argoexec"}, Env: []string{pathEnv}},
	}, nil
}

// Busybox is the static busybox at /bin/busybox and a symlink to it for each of its applets.
func Busybox(src string) ([]Entry, error) {
	bb, err := Binary("bin/busybox", src)
	if err != nil {
		return nil, fmt.Errorf("busybox (Debian's busybox-static; hack/deps.sh installs it): %w", err)
	}
	out, err := exec.Command(src, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", src, err)
	}
	entries := []Entry{bb}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "bin/busybox" {
			entries = append(entries, Symlink(applet, "/bin/busybox"))
		}
	}
	return entries, nil
}
