package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/akraino-edge-stack/bpa/hack/images"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
)

// registry is the node's image source, as an offline site's: `bpa serve`'s artifact server
// (pkg/artifacts, in the test's process) on the node's address, holding each image under
// its original registry's name. containerd reaches it through a hosts.toml mirror per
// original registry; nothing is imported with ctr. Reads are anonymous, as config/serve
// ships them (containerd holds no token); writes need the node's own random token.
type registry struct {
	// Host is host:port.
	Host   string
	token  string
	server *http.Server
}

// startRegistry serves an artifact store in dir on the node's address.
func startRegistry(ctx context.Context, dir string) (*registry, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	r := &registry{token: hex.EncodeToString(tok)}
	srv, err := artifacts.NewServer(ctx, artifacts.Options{Dir: dir, Auth: r.auth()})
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(Address.String(), "0"))
	if err != nil {
		return nil, err
	}
	r.Host = l.Addr().String()
	r.server = &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.server.Serve(l) }()
	return r, nil
}

// auth lets anyone read and only the holder of r's token write: the node's registry has
// no apiserver of its own to review tokens against before the node is up.
func (r *registry) auth() *artifacts.Auth {
	pusher := &user.DefaultInfo{Name: "bpa-node-image-pusher"}
	return &artifacts.Auth{
		AnonymousReads: true,
		Authn: authenticator.RequestFunc(func(req *http.Request) (*authenticator.Response, bool, error) {
			if req.Header.Get("Authorization") != "Bearer "+r.token {
				return nil, false, nil
			}
			return &authenticator.Response{User: pusher}, true, nil
		}),
		Authz: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if a.GetUser() != nil && a.GetUser().GetName() == pusher.Name {
				return authorizer.DecisionAllow, "", nil
			}
			return authorizer.DecisionDeny, "only the node pushes", nil
		}),
	}
}

// Push pushes each built image under its refs, as `make images PUSH=` does.
func (r *registry) Push(ctx context.Context, built []images.Built) error {
	for _, b := range built {
		img, err := b.Image()
		if err != nil {
			return err
		}
		if _, err := (images.Registry{Host: r.Host, Insecure: true, Token: r.token}).Push(ctx, img, b.Spec.Refs); err != nil {
			return err
		}
	}
	return nil
}

// hostsTOML is containerd's mirror of one original registry on r: the registry keeps it
// under /v2/<registry>/ (override_path), as kubespray's offline hosts.toml has it.
// No server line: nothing falls back to the original registry, as on an offline site.
const hostsTOML = `[host."http://%s/v2/%s"]
  capabilities = ["pull", "resolve"]
  override_path = true
`

// writeHosts writes certs.d/<registry>/hosts.toml under dir for every original registry
// of refs.
func (r *registry) writeHosts(dir string, refs []string) error {
	for _, ref := range refs {
		t, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		d := filepath.Join(dir, t.RegistryStr())
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		data := fmt.Sprintf(hostsTOML, r.Host, t.RegistryStr())
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Stop stops serving.
func (r *registry) Stop() error {
	if r == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.server.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
