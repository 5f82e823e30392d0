package artifacts

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Image names in an OCI layout: containerd and nerdctl write the full name in the first,
// skopeo and crane in the second (which the OCI spec also allows to be a bare tag).
var refAnnotations = []string{"io.containerd.image.name", "org.opencontainers.image.ref.name"}

// ImageRef is where an image of the original reference src lives on the server: the
// original registry stays the first path component, as the original domain does for files
// (registry.k8s.io/pause:3.10 -> SERVER/registry.k8s.io/pause:3.10), so images of
// different registries never collide and *_image_repo is "SERVER/<registry>".
func (c *Client) ImageRef(src string) (name.Reference, error) {
	ref, err := name.ParseReference(src)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, err
	}
	reg := ref.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	var opts []name.Option
	if u.Scheme == "http" {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(u.Host+"/"+reg+"/"+ref.Context().RepositoryStr()+refSuffix(ref), opts...)
}

func refSuffix(ref name.Reference) string {
	if d, ok := ref.(name.Digest); ok {
		return "@" + d.DigestStr()
	}
	return ":" + ref.Identifier()
}

func (c *Client) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(c.HTTP.Transport)}
}

// Mirror uploads dir: every OCI image layout in it (a directory holding oci-layout) is
// pushed to the registry, and every other file is pushed to its path relative to dir (an
// offline-files/ top directory, as manage-offline-files.sh names it, is skipped), unless
// the server already has it with the same sha256. log gets one line per artifact.
func (c *Client) Mirror(ctx context.Context, dir string, log io.Writer) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "oci-layout")); err == nil {
				if err := c.pushLayout(ctx, p, log); err != nil {
					return err
				}
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = strings.TrimPrefix(filepath.ToSlash(rel), "offline-files/")
		if _, err := CleanPath(rel); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if m, err := c.Stat(ctx, rel); err == nil {
			if sum, err := fileSHA256(p); err == nil && sum == m.SHA256 {
				fmt.Fprintf(log, "present  %s\n", rel)
				return nil
			}
		}
		if _, err := c.Push(ctx, p, rel); err != nil {
			return err
		}
		fmt.Fprintf(log, "pushed   %s\n", rel)
		return nil
	})
}

func (c *Client) pushLayout(ctx context.Context, dir string, log io.Writer) error {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return err
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, desc := range im.Manifests {
		src := ""
		for _, a := range refAnnotations {
			if v := desc.Annotations[a]; strings.Contains(v, "/") {
				src = v
				break
			}
		}
		if src == "" {
			return fmt.Errorf("%s: manifest %s names no image (annotation %s with the full name, e.g. registry.k8s.io/pause:3.10)",
				dir, desc.Digest, strings.Join(refAnnotations, " or "))
		}
		dst, err := c.ImageRef(src)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", dir, src, err)
		}
		if desc.MediaType.IsIndex() {
			sub, err := idx.ImageIndex(desc.Digest)
			if err == nil {
				err = remote.WriteIndex(dst, sub, c.remoteOptions(ctx)...)
			}
			if err != nil {
				return fmt.Errorf("push %s: %w", src, err)
			}
		} else {
			img, err := idx.Image(desc.Digest)
			if err == nil {
				err = remote.Write(dst, img, c.remoteOptions(ctx)...)
			}
			if err != nil {
				return fmt.Errorf("push %s: %w", src, err)
			}
		}
		fmt.Fprintf(log, "pushed   %s -> %s\n", src, dst)
	}
	return nil
}

// Missing returns which of files (URLs or paths, as kubespray's
// contrib/offline/generate_list.sh writes files.list) and images (references, as in
// images.list) the server does not have.
func (c *Client) Missing(ctx context.Context, files, images []string) ([]string, error) {
	var missing []string
	for _, f := range files {
		p := f
		if u, err := url.Parse(f); err == nil && u.Host != "" {
			p = u.Host + u.Path
		}
		req, err := c.request(ctx, http.MethodHead, "/files/"+p, nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.do(req, http.StatusOK)
		switch {
		case err == nil:
			resp.Body.Close()
		case resp != nil && resp.StatusCode == http.StatusNotFound:
			missing = append(missing, "file  "+p)
		default:
			return nil, err
		}
	}
	for _, i := range images {
		dst, err := c.ImageRef(i)
		if err != nil {
			return nil, fmt.Errorf("image %q: %w", i, err)
		}
		if _, err := remote.Head(dst, c.remoteOptions(ctx)...); err != nil {
			var te *transport.Error
			if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
				missing = append(missing, "image "+i)
				continue
			}
			return nil, fmt.Errorf("image %s: %w", i, err)
		}
	}
	return missing, nil
}

// ReadList reads a list file: one entry per line, blank lines and # comments skipped.
func ReadList(file string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}
