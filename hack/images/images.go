// Package images builds the images the project runs, without Docker: bpa's own, a pause,
// Argo's executor and the stand-in kubespray. Each is a Spec (layers and a config) built
// with go-containerregistry into bin/images/<name>.tar, a docker-archive that `ctr images
// import` and `docker load` take, and pushed with remote.Write to a registry such as
// `bpa serve`'s. Builds are reproducible: entries are sorted, at Epoch, with fixed owners
// and modes, so the same inputs give the same digests. An image is rebuilt only when the
// digest of its inputs (its stamp) changes.
package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// recipe is part of every stamp: bump it when the way images are assembled changes.
const recipe = "images/1"

// Layer is one layer of a Spec: entries, or an uncompressed tar on disk.
type Layer struct {
	// What the layer holds, for the image's history: "bpa binary".
	What    string
	Entries []Entry
	// TarFile is a tar on disk; TarKey the digest of what made it (its content's digest
	// would cost a read of the whole file on every build).
	TarFile, TarKey string
}

// key is the digest of everything the layer is made of.
func (l Layer) key() (string, error) {
	if l.TarFile != "" {
		return "tar " + l.TarKey, nil
	}
	data, err := Tar(l.Entries)
	return "entries " + sha256Hex(data), err
}

func (l Layer) build() (v1.Layer, error) {
	if l.TarFile != "" {
		return layerFromTarFile(l.TarFile)
	}
	data, err := Tar(l.Entries)
	if err != nil {
		return nil, err
	}
	return layerFromTar(data)
}

// Spec is one image.
type Spec struct {
	// Name is the file's: bin/images/<Name>.tar.
	Name string
	// Refs are the names it is written and pushed under (quay.io/kubespray/kubespray:v2.28.0).
	Refs   []string
	Layers []Layer
	Config v1.Config
}

// stamp is the digest of all the spec is made of.
func (s Spec) stamp() (string, error) {
	cfg, err := json.Marshal(s.Config)
	if err != nil {
		return "", err
	}
	parts := []string{recipe, runtime.GOARCH, strings.Join(s.Refs, " "), string(cfg)}
	for _, l := range s.Layers {
		k, err := l.key()
		if err != nil {
			return "", fmt.Errorf("%s: layer %s: %w", s.Name, l.What, err)
		}
		parts = append(parts, l.What, k)
	}
	return sha256Hex([]byte(strings.Join(parts, "\n"))), nil
}

// Image assembles the spec: its layers on an empty image, every time at Epoch, for this
// machine's architecture on linux.
func (s Spec) Image() (v1.Image, error) {
	adds := make([]mutate.Addendum, 0, len(s.Layers))
	for _, l := range s.Layers {
		layer, err := l.build()
		if err != nil {
			return nil, fmt.Errorf("%s: layer %s: %w", s.Name, l.What, err)
		}
		adds = append(adds, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: "hack/images: " + l.What}})
	}
	img, err := mutate.Append(empty.Image, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created, cf.Config = runtime.GOARCH, "linux", v1.Time{Time: Epoch}, s.Config
	return mutate.ConfigFile(img, cf)
}

// Built is an image in bin/images.
type Built struct {
	Spec   Spec
	Path   string
	Digest v1.Hash
	// Cached: the stamp matched, nothing was built.
	Cached bool
}

// Image reads the built image back from its file.
func (b Built) Image() (v1.Image, error) {
	ref, err := name.ParseReference(b.Spec.Refs[0])
	if err != nil {
		return nil, err
	}
	tag, ok := ref.(name.Tag)
	if !ok {
		return nil, fmt.Errorf("%s: not a tag", b.Spec.Refs[0])
	}
	return tarball.ImageFromPath(b.Path, &tag)
}

// Write builds s into dir/<name>.tar, unless dir/<name>.stamp says the file there was
// built from the same inputs.
func Write(dir string, s Spec) (Built, error) {
	b := Built{Spec: s, Path: filepath.Join(dir, s.Name+".tar")}
	if len(s.Refs) == 0 {
		return b, fmt.Errorf("%s: no refs", s.Name)
	}
	stamp, err := s.stamp()
	if err != nil {
		return b, err
	}
	stampFile := filepath.Join(dir, s.Name+".stamp")
	if d, ok := cached(stampFile, stamp, b.Path); ok {
		b.Digest, b.Cached = d, true
		return b, nil
	}
	img, err := s.Image()
	if err != nil {
		return b, err
	}
	if b.Digest, err = img.Digest(); err != nil {
		return b, err
	}
	if err := writeArchive(b.Path, s.Refs, img); err != nil {
		return b, fmt.Errorf("%s: %w", s.Name, err)
	}
	return b, os.WriteFile(stampFile, []byte(stamp+" "+b.Digest.String()+"\n"), 0o644)
}

// cached reads a stamp file "<stamp> <digest>": the digest, when the stamp is want and
// the image file is there.
func cached(stampFile, want, image string) (v1.Hash, bool) {
	data, err := os.ReadFile(stampFile)
	if err != nil {
		return v1.Hash{}, false
	}
	got, digest, ok := strings.Cut(strings.TrimSpace(string(data)), " ")
	if !ok || got != want {
		return v1.Hash{}, false
	}
	if _, err := os.Stat(image); err != nil {
		return v1.Hash{}, false
	}
	h, err := v1.NewHash(digest)
	return h, err == nil
}

// writeArchive writes img under every ref as a docker-archive, through a temporary file so
// a reader never sees half of one.
func writeArchive(p string, refs []string, img v1.Image) error {
	m := map[name.Reference]v1.Image{}
	for _, r := range refs {
		ref, err := name.NewTag(r)
		if err != nil {
			return err
		}
		m[ref] = img
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d", p, os.Getpid())
	if err := tarball.MultiRefWriteToFile(tmp, m); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return os.Rename(tmp, p)
}
