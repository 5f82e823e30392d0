package images

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// MirrorRef is where ref lives in a mirror registry: under its original registry's name,
// as `bpa serve` keeps images (quay.io/kubespray/kubespray:v2.28.0 at
// <mirror>/quay.io/kubespray/kubespray:v2.28.0), which a node's hosts.toml then maps the
// original registry to.
func MirrorRef(mirror, ref string, opts ...name.Option) (name.Tag, error) {
	t, err := name.NewTag(ref)
	if err != nil {
		return name.Tag{}, err
	}
	return name.NewTag(fmt.Sprintf("%s/%s/%s:%s", mirror, t.RegistryStr(), t.RepositoryStr(), t.TagStr()), opts...)
}

// Registry is a registry to push to.
type Registry struct {
	// Host is host:port.
	Host string
	// Insecure: plain HTTP.
	Insecure bool
	// Token, when set, goes as a bearer token on every request (`bpa serve` reviews it).
	Token string
	// Transport under the token; nil is http.DefaultTransport.
	Transport http.RoundTripper
}

// Push writes img to r under every ref (MirrorRef) and returns the refs it wrote.
func (r Registry) Push(ctx context.Context, img v1.Image, refs []string) ([]name.Tag, error) {
	var opts []name.Option
	if r.Insecure {
		opts = append(opts, name.Insecure)
	}
	var rt http.RoundTripper = bearer{token: r.Token, next: r.Transport}
	out := make([]name.Tag, 0, len(refs))
	for _, ref := range refs {
		t, err := MirrorRef(r.Host, ref, opts...)
		if err != nil {
			return out, err
		}
		if err := remote.Write(t, img, remote.WithContext(ctx), remote.WithTransport(rt)); err != nil {
			return out, fmt.Errorf("pushing %s: %w", t, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// bearer adds a bearer token to each request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	if b.token == "" {
		return next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return next.RoundTrip(r)
}
