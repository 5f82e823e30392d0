package sim

import (
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// EtcdPort is where kubespray's etcd serves clients on an etcd host: its address and
// 127.0.0.1 (roles/etcd/templates/etcd.env.j2, ETCD_LISTEN_CLIENT_URLS).
const EtcdPort = 2379

// serveAppEtcd makes machine h serve the application etcd e at EtcdPort, on its address and
// its own 127.0.0.1, while it has kubespray's etcd CA: from the stand-in's etcd role until a
// reset, as an etcd host runs its etcd. The machine passes bytes: the TLS is e's, end to
// end, so a client verifies e's certificate (which holds every address of the site's hosts
// and 127.0.0.1) and presents one e's CA signed.
func serveAppEtcd(h *simhost.Host, e *rig.AppEtcd) error {
	ca, _, _ := kubespraysim.EtcdFiles(h.Name)
	caFile := h.File(ca)
	return h.ForwardWhile(EtcdPort, net.JoinHostPort("127.0.0.1", strconv.Itoa(e.Port)), func() bool {
		_, err := os.Stat(caFile)
		return err == nil
	})
}

// writeAppEtcdFiles copies e's CA and admin client certificate and key to dir (made if
// missing), named as the stand-in's etcd role reads them there (kubespraysim.AppEtcdFiles).
func writeAppEtcdFiles(e *rig.AppEtcd, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	names := kubespraysim.AppEtcdFiles
	for src, dst := range map[string]string{e.CAFile: names.CA, e.CertFile: names.Cert, e.KeyFile: names.Key} {
		if err := copyFile(src, filepath.Join(dir, dst), 0o600); err != nil {
			return err
		}
	}
	return nil
}
