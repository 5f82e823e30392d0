// Package offlinecheck is the offline pre-flight: whether an air-gapped site's artifact
// server holds every file and image a kubespray release downloads. run-kubespray runs it
// before any playbook that downloads, and the preflight step before an upgrade: one check,
// two callers.
package offlinecheck

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Preflight runs before any host is changed. When the vars file is offline (it
// carries BPA's own kubelet_download_url template, which only spec.offline writes) and some
// operation downloads, it checks that the artifact server holds every file and image of the
// release's download table for the arches of the hosts that download (arches, asked of them
// only then) and fails listing what is missing. It reads anonymously (the step has no token
// for the server: bpa serve must allow anonymous reads, as the nodes need too) and verifies
// the server's certificate against the container's trust store and ca, the site policy's CA
// for the server.
func Preflight(ctx context.Context, varsFile, image string, ca []*x509.Certificate, arches func() ([]string, error)) error {
	data, err := os.ReadFile(varsFile)
	if err != nil {
		return err
	}
	vars, err := inventory.ReadVars(data)
	if err != nil {
		return err
	}
	if _, ok := vars["kubelet_download_url"].(inventory.Template); !ok {
		return nil
	}
	repo, _ := vars[kubespray.FilesRepoVar].(string)
	server, ok := strings.CutSuffix(repo, "/files")
	if !ok {
		return fmt.Errorf("offline: %s %q is not BPA's (want https://host[:port]/files)", kubespray.FilesRepoVar, repo)
	}
	_, tag, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	tag, _, _ = strings.Cut(tag, "@")
	kube, _ := vars[inventory.KubeVersionVar].(string)
	archs, err := arches()
	if err != nil || len(archs) == 0 {
		return err // nothing downloads: nothing to check
	}
	d, err := kubespray.DownloadsForArches(tag, kube, archs)
	if err != nil {
		return fmt.Errorf("offline: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	for _, c := range ca {
		roots.AddCert(c)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	hc, err := originOnly(server, tr)
	if err != nil {
		return fmt.Errorf("offline: %s %q: %w", kubespray.FilesRepoVar, repo, err)
	}
	c := &artifacts.Client{URL: server, HTTP: hc}
	missing, err := c.Missing(ctx, d.Files, d.Images)
	if err != nil {
		return fmt.Errorf("offline: checking the artifact server %s: %w", server, quiet(err))
	}
	if len(missing) > 0 {
		return fmt.Errorf("offline: the artifact server %s %s kubespray %s downloads for %s hosts (upload them with bpa artifacts; bpa artifacts check --kubespray %s --kubernetes %s --arch ARCH lists them too):\n  %s",
			server, kubespray.MissingArtifactsPhrase(len(missing), len(d.Files)+len(d.Images)), tag, strings.Join(archs, " and "), tag, kube, strings.Join(missing, "\n  "))
	}
	fmt.Printf("offline: the artifact server %s holds all %d artifacts kubespray %s downloads for %s hosts\n", server, len(d.Files)+len(d.Images), tag, strings.Join(archs, " and "))
	return nil
}

// errLeftOrigin is a request the pre-flight refused to send: anywhere but the artifact
// server's own scheme, host and port.
var errLeftOrigin = errors.New("the offline pre-flight talks to the artifact server's origin only")

// originOnly is the pre-flight's client: it sends requests to base's origin (scheme, host
// and port) and nowhere else. spec.offline.url is the CR author's, within what the site
// policy lists, and the step reports what it finds in the CR's status; a redirect, or a
// registry's token realm, elsewhere (an https URL to http, a node's metadata service, an
// internal API) would turn the step into a probe of the author's choosing. So a redirect is
// an error, even to the same origin (the server BPA serves never redirects), and the
// transport refuses any other origin for the requests go-containerregistry makes with its
// own client.
func originOnly(base string, tr http.RoundTripper) (*http.Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("not an https://host[:port] URL")
	}
	guard := roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.URL.Scheme != u.Scheme || r.URL.Host != u.Host {
			if r.Body != nil {
				r.Body.Close()
			}
			return nil, fmt.Errorf("%w: refused a request to %s", errLeftOrigin, origin(r.URL))
		}
		return tr.RoundTrip(r)
	})
	return &http.Client{Transport: guard, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		code := 0
		if r.Response != nil {
			code = r.Response.StatusCode
		}
		return fmt.Errorf("%w: %s %s answered HTTP %d, a redirect to %s, which is not followed",
			errLeftOrigin, via[len(via)-1].Method, via[len(via)-1].URL.Path, code, origin(r.URL))
	}}, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// origin names where a URL points (scheme, host and port), quoted: a redirect's target is
// the server's text.
func origin(u *url.URL) string {
	return strconv.Quote(u.Scheme + "://" + u.Host)
}

// quiet is err without the server's words: the pre-flight's errors reach the CR's status,
// and a status line or body repeated there would let a CR author read what the server (or
// whatever answers at its address) says. What remains is BPA's own: the request, the HTTP
// status code, a refused redirect, or the connection's and TLS's errors, which come from the
// step's side of the connection.
func quiet(err error) error {
	var status *artifacts.StatusError
	var registry *transport.Error
	var op *net.OpError
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	switch {
	case errors.As(err, &status):
		return fmt.Errorf("%s %s: the server answered HTTP %d", status.Method, status.Path, status.Code)
	case errors.As(err, &registry):
		what := "the registry"
		if registry.Request != nil {
			what = registry.Request.Method + " " + registry.Request.URL.Path
		}
		return fmt.Errorf("%s: the server answered HTTP %d", what, registry.StatusCode)
	case errors.Is(err, errLeftOrigin):
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err // its URL may be a redirect's target, verbatim
		}
		return err
	case errors.As(err, &op), errors.As(err, &dns), errors.As(err, &unknownCA), errors.As(err, &hostname),
		errors.As(err, &invalid), errors.As(err, &verify), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return err
	}
	return fmt.Errorf("the server's answer was not an artifact server's (%T)", err)
}

// Arches asks each host for its machine (uname -m, read-only), as Ansible's facts would,
// and returns kubespray's image_arch of each (kubespray.ImageArch), sorted and unique: the
// arches Preflight checks. A host that cannot be asked is an error naming it (one that
// cannot be reached at all, NodeUnreachable): kubespray could not run there either.
func Arches(ctx context.Context, hosts []sshexec.Target, cfg sshexec.Config) ([]string, error) {
	out, errs := sshexec.OnEach(ctx, hosts, cfg, func(ctx context.Context, c *sshexec.Client) (string, error) {
		m, err := c.Output(ctx, []string{"uname", "-m"})
		return strings.TrimSpace(string(m)), err
	})
	unreachable, failed := sshexec.Failures(hosts, errs)
	if len(unreachable) > 0 {
		return nil, fmt.Errorf(bpav1.ReasonNodeUnreachable+": cannot reach %d hosts over SSH to ask their architecture (uname -m) for the offline pre-flight: %s; no playbook was run", len(unreachable), strings.Join(unreachable, "; "))
	}
	if len(failed) > 0 {
		return nil, fmt.Errorf("offline: asking the hosts that download for their architecture (uname -m) failed on %d: %s; no playbook was run", len(failed), strings.Join(failed, "; "))
	}
	var arches []string
	for _, m := range out {
		arches = append(arches, kubespray.ImageArch(m))
	}
	slices.Sort(arches)
	return slices.Compact(arches), nil
}

// ReadCA reads --artifacts-ca, the site policy's CA for the artifact server: nil when unset
// or empty. It crossed an Argo parameter, so it is parsed again: certificates only.
func ReadCA(path string) ([]*x509.Certificate, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(data)) == 0 {
		return nil, err
	}
	certs, err := nodetrust.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("--artifacts-ca %s (BPAPolicy spec.artifactServers[].caBundle): %w", path, err)
	}
	return certs, nil
}
