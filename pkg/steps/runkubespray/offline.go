package runkubespray

import (
	"context"
	"crypto/x509"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/offlinecheck"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// artifactsCA reads --artifacts-ca (offlinecheck.ReadCA).
func artifactsCA(o kubespray.RunOptions) ([]*x509.Certificate, error) {
	return offlinecheck.ReadCA(o.ArtifactsCA)
}

// downloads are the playbooks that fetch files and images on the hosts they run on.
var downloads = []kubespray.Playbook{kubespray.Cluster, kubespray.Scale, kubespray.Upgrade}

// downloadHosts are the hosts the operations that download run on (asked their arch, given
// the CA): each one's --limit (every
// host without one), less the hosts it leaves out and every host a removal of the step
// removes.
func downloadHosts(ops []kubespray.Operation, ini []byte) []nodetrust.Host {
	groups, addrs := inventory.Groups(ini), inventory.Addresses(ini)
	var removed []string
	for _, op := range ops {
		if node, ok := op.Vars["node"].(string); op.Playbook == kubespray.Remove && ok {
			removed = append(removed, strings.Split(node, ",")...)
		}
	}
	var names []string
	for _, op := range ops {
		if !slices.Contains(downloads, op.Playbook) {
			continue
		}
		for _, h := range groups.Hosts(op.Limit) {
			if !slices.Contains(op.Without, h) && !slices.Contains(removed, h) && !slices.Contains(names, h) {
				names = append(names, h)
			}
		}
	}
	hosts := make([]nodetrust.Host, len(names))
	for i, n := range names {
		hosts[i] = nodetrust.Host{Name: n, Addr: addrs[n]}
	}
	return hosts
}

// nodeArches asks each host that downloads for its machine (offlinecheck.Arches).
func nodeArches(ctx context.Context, o kubespray.RunOptions, hosts []nodetrust.Host) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, caInstallTimeout)
	defer cancel()
	return offlinecheck.Arches(ctx, hosts, sshConfig(o, sshexec.DefaultConnectTimeout))
}

// caInstallTimeout bounds installing the CA on every host (32 at a time).
const caInstallTimeout = 15 * time.Minute

// installCA puts the artifact server's CA on the hosts of the operations that download,
// before any of them runs: kubespray has no variable that installs one.
func installCA(ctx context.Context, o kubespray.RunOptions, hosts []nodetrust.Host, ca []*x509.Certificate) error {
	if len(hosts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, caInstallTimeout)
	defer cancel()
	return nodetrust.Install(ctx, hosts, sshConfig(o, sshexec.DefaultConnectTimeout), ca, os.Stdout)
}
