package controller

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// NodeReaderUserAgent is what the remediator's requests to an application cluster carry,
// so the cluster's audit log tells them apart.
const NodeReaderUserAgent = "bpa-controller-remediation"

// nodeReaderTimeout bounds one list of a cluster's Nodes: a cluster that does not answer
// must not hold the remediator's other clusters.
const nodeReaderTimeout = 10 * time.Second

// maxNodeListBytes bounds the answer to one list of Nodes (about 3,000 Nodes of 10 KiB).
const maxNodeListBytes = 32 << 20

// NodeReaderSource reads a cluster's Nodes with the kubeconfig of its Secret
// `<cluster>-node-reader` (kubeconfig.NodeReaderSecretName), read uncached through c (the
// controller may get Secrets, not list or watch them), rebuilt by pkg/kubeconfig's rules
// (no exec, no file, no proxy), never with the cluster's admin kubeconfig.
func NodeReaderSource(c client.Reader) NodeSource {
	return func(ctx context.Context, p *bpav1.Provisioning) ([]corev1.Node, error) {
		cluster, err := translator.ClusterOf(p)
		if err != nil {
			return nil, err
		}
		name := kubeconfig.NodeReaderSecretName(cluster)
		sec := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, sec); err != nil {
			return nil, fmt.Errorf("Secret %s: %w", name, err)
		}
		rc, err := kubeconfig.RESTConfig(sec.Data[kubeconfig.SecretKey])
		if err != nil {
			return nil, fmt.Errorf("Secret %s: %w", name, err)
		}
		if err := appliedServer(rc.Host, p.Status.Applied); err != nil {
			return nil, fmt.Errorf("Secret %s: %w", name, err)
		}
		cs, err := nodeReaderClient(rc)
		if err != nil {
			return nil, err
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the Nodes of %s with Secret %s: %w", rc.Host, name, err)
		}
		return nodes.Items, nil
	}
}

// nodeReaderClient is a client of rc that follows no redirect and reads at most
// maxNodeListBytes of an answer. The server is the Secret writer's choice among the
// cluster's hosts (or the cluster, which its admins may make hostile): a redirect followed
// would make the controller fetch any address it reaches, and put the answer's text in the
// Remediating condition (client-go quotes a failed answer's body in its error).
func nodeReaderClient(rc *rest.Config) (kubernetes.Interface, error) {
	rc.UserAgent, rc.Timeout = NodeReaderUserAgent, nodeReaderTimeout
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return boundedBodies{rt} })
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	hc.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("refusing a redirect (to %s)", req.URL.Redacted())
	}
	return kubernetes.NewForConfigAndClient(rc, hc)
}

// boundedBodies cuts every answer off at maxNodeListBytes.
type boundedBodies struct{ rt http.RoundTripper }

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: maxNodeListBytes}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the answer is larger than %d bytes", maxNodeListBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// appliedServer refuses a server that is not https on a control-plane host of the cluster
// BPA built: whoever may write Secrets in the namespace could otherwise point the controller
// at any address it reaches (a worker's address, say, which a lease may since have given to
// another tenant's machine).
func appliedServer(server string, applied *bpav1.AppliedState) error {
	u, err := url.Parse(server)
	if err != nil {
		return err
	}
	if u.Scheme != "https" {
		return fmt.Errorf("its server %s is not https", server)
	}
	master := func(h bpav1.HostStatus) bool {
		return h.IP != "" && h.IP == u.Hostname() && slices.Contains(h.Roles, "master")
	}
	if applied == nil || !slices.ContainsFunc(bpav1.KeptHosts(applied.Hosts), master) {
		return fmt.Errorf("its server %s is no control-plane host of status.applied", server)
	}
	return nil
}
