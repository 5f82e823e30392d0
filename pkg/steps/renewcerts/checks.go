package renewcerts

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/rest"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/etcdhost"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// checkTimeout bounds one check of one host.
const checkTimeout = 10 * time.Second

// master is a control-plane host and how its API server is asked, on the host's own
// 127.0.0.1, through the SSH connection.
type master struct {
	bpav1.HostStatus
	conn *sshexec.Client
	// local is the API server's address as the host reaches it: 127.0.0.1 and admin.conf's port.
	local string
	// client asks it, TLS verified by the host's CAFile, with admin.conf's credentials.
	client *http.Client
	token  string
}

// newMaster checks the host has the script and reads admin.conf and the CA.
func newMaster(ctx context.Context, h bpav1.HostStatus, c *sshexec.Client) (*master, error) {
	if _, err := c.Output(ctx, []string{"test", "-x", Script}); err != nil {
		return nil, fmt.Errorf("%s: no %s (kubespray's control-plane role installs it): %v", h.Name, Script, err)
	}
	raw, err := c.ReadFile(ctx, AdminConf)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", h.Name, err)
	}
	rc, err := kubeconfig.RESTConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", h.Name, AdminConf, err)
	}
	ca, err := c.ReadFile(ctx, CAFile)
	if err != nil {
		return nil, fmt.Errorf("%s: kubeadm's CA: %v", h.Name, err)
	}
	port, err := serverPort(rc.Host)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", h.Name, AdminConf, err)
	}
	m := &master{HostStatus: h, conn: c, local: net.JoinHostPort("127.0.0.1", port), token: rc.BearerToken}
	if m.client, err = localClient(rc, ca, c); err != nil {
		return nil, fmt.Errorf("%s: %v", h.Name, err)
	}
	return m, nil
}

// serverPort is the port of a kubeconfig's server URL (https's 443 when it names none).
func serverPort(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" {
		return "", fmt.Errorf("server %q is not an https URL", server)
	}
	if p := u.Port(); p != "" {
		return p, nil
	}
	return "443", nil
}

// localClient is an HTTP client that reaches the host's own 127.0.0.1 through conn, with
// rc's client certificate (if any) and TLS verified by ca alone; one connection per request,
// so that each request sees the API server as it is then.
func localClient(rc *rest.Config, ca []byte, conn *sshexec.Client) (*http.Client, error) {
	tc, err := rest.TLSConfigFor(rc)
	if err != nil || tc == nil {
		return nil, fmt.Errorf("TLS settings of %s: %v", AdminConf, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s holds no PEM certificate", CAFile)
	}
	tc = tc.Clone()
	tc.RootCAs, tc.ServerName = pool, ""
	return &http.Client{Transport: &http.Transport{
		DialContext:       conn.DialContext,
		TLSClientConfig:   tc,
		DisableKeepAlives: true,
	}, Timeout: checkTimeout}, nil
}

// readyz asks the master's API server /readyz and returns the NotAfter of the certificate
// it served.
func (m *master) readyz(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.local+"/readyz", nil)
	if err != nil {
		return time.Time{}, err
	}
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: the API server at its %s: %v", m.Name, m.local, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("%s: the API server at its %s: /readyz answered %s: %s", m.Name, m.local, resp.Status, sshexec.Tail(body, 256))
	}
	if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return time.Time{}, fmt.Errorf("%s: the API server at its %s presented no certificate", m.Name, m.local)
	}
	return resp.TLS.PeerCertificates[0].NotAfter.UTC(), nil
}

// member is an etcd member and a client of its etcd, as the host reaches it.
type member struct {
	bpav1.HostStatus
	etcd *clientv3.Client
}

func newMember(ctx context.Context, h bpav1.HostStatus, c *sshexec.Client) (*member, error) {
	cli, err := etcdhost.Connect(ctx, c, h.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", h.Name, err)
	}
	return &member{HostStatus: h, etcd: cli}, nil
}

// leader asks the member's etcd for its status and returns the leader it knows.
func (m *member) leader(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	s, err := m.etcd.Status(ctx, "https://"+etcdhost.LocalEndpoint)
	if err != nil {
		return 0, fmt.Errorf("%s: etcd: %v", m.Name, err)
	}
	if s.Leader == 0 {
		return 0, fmt.Errorf("%s: etcd has no leader", m.Name)
	}
	return s.Leader, nil
}

// healthy checks the cluster as step 1 of the package's doc does: every etcd member's etcd
// answers and all name one leader, and every master's API server answers /readyz.
func (o *options) healthy(ctx context.Context, hs *hostSet) error {
	leaders := map[uint64][]string{}
	for _, m := range hs.members {
		l, err := m.leader(ctx)
		if err != nil {
			return err
		}
		leaders[l] = append(leaders[l], m.Name)
	}
	if len(leaders) > 1 {
		var views []string
		for l, names := range leaders {
			views = append(views, fmt.Sprintf("%s: leader %x", strings.Join(names, ", "), l))
		}
		sort.Strings(views)
		return fmt.Errorf("the etcd members do not agree on a leader (%s)", strings.Join(views, "; "))
	}
	for _, m := range hs.masters {
		if _, err := m.readyz(ctx); err != nil {
			return err
		}
	}
	return nil
}
