// Package etcdhost reaches the etcd of a cluster kubespray built, as its own hosts do: over
// SSH to an etcd member, with the client certificate kubespray leaves there, at the address
// etcd listens on for the host itself. The steps that back up and restore etcd share it.
package etcdhost

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// Where kubespray puts an etcd host's client certificate (etcd_cert_dir, and the files
// roles/etcdctl_etcdutl/templates/etcdctl.sh.j2 hands etcdctl at v2.27 and v2.28), and
// where etcd listens for the host itself (roles/etcd/templates/etcd.env.j2,
// ETCD_LISTEN_CLIENT_URLS).
const (
	CertDir = "/etc/ssl/etcd/ssl"
	// LocalEndpoint is dialled through the SSH connection, from the member itself.
	LocalEndpoint = "127.0.0.1:2379"
)

// Members are the live cluster's etcd members (status.applied), by name: the first is
// kubespray's first etcd host (etcd[0]), the one its recover_lost_quorum.yml snapshots and
// restores; hosts that are leaving are left out.
func Members(applied []bpav1.HostStatus) ([]bpav1.HostStatus, error) {
	var members []bpav1.HostStatus
	for _, h := range applied {
		if h.Etcd && !h.Removing && h.IP != "" {
			members = append(members, h)
		}
	}
	if len(members) == 0 {
		return nil, errors.New("status.applied lists no etcd member with an address: the cluster was never built")
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	return members, nil
}

// ClientTLS reads the member's etcd client certificate (kubespray's admin-<node> pair and
// CA) over SSH into memory and builds the TLS settings etcd's client port requires.
func ClientTLS(ctx context.Context, conn *sshexec.Client, node string) (*tls.Config, error) {
	read := func(name string) ([]byte, error) {
		b, err := conn.ReadFile(ctx, path.Join(CertDir, name))
		if err != nil {
			return nil, fmt.Errorf("kubespray's etcd client certificate: %w (is this host an etcd member kubespray set up?)", err)
		}
		return b, nil
	}
	ca, err := read("ca.pem")
	if err != nil {
		return nil, err
	}
	certPEM, err := read("admin-" + node + ".pem")
	if err != nil {
		return nil, err
	}
	keyPEM, err := read("admin-" + node + "-key.pem")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s/ca.pem holds no PEM certificate", CertDir)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// Never the key's bytes: tls's error names only what is wrong with it.
		return nil, fmt.Errorf("%s/admin-%s.pem and its key: %w", CertDir, node, err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// Connect is an etcd client of the member's own etcd at LocalEndpoint, through conn (a
// direct-tcpip channel, what `ssh -L` uses): etcd's client port need not be open to the
// management cluster, and TLS runs end to end against the member's CA.
func Connect(ctx context.Context, conn *sshexec.Client, node string) (*clientv3.Client, error) {
	tlsCfg, err := ClientTLS(ctx, conn, node)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://" + LocalEndpoint},
		TLS:         tlsCfg,
		DialTimeout: 15 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return conn.DialContext(ctx, "tcp", addr)
		})},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return cli, nil
}
