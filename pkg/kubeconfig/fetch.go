package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"k8s.io/client-go/rest"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// AdminConfPath is where kubeadm writes the admin kubeconfig on a control-plane node.
const AdminConfPath = "/etc/kubernetes/admin.conf"

// roleMaster is the hosts file's control-plane role (software.RoleMaster).
const roleMaster = "master"

// FirstMaster is the master with the smallest name: a fixed choice, so every run (verify,
// preflight) asks the same node.
func FirstMaster(hosts []bpav1.HostStatus) (bpav1.HostStatus, error) {
	var masters []bpav1.HostStatus
	for _, h := range hosts {
		if slices.Contains(h.Roles, roleMaster) {
			masters = append(masters, h)
		}
	}
	if len(masters) == 0 {
		return bpav1.HostStatus{}, errors.New("no host has the master role")
	}
	sort.Slice(masters, func(i, j int) bool { return masters[i].Name < masters[j].Name })
	if masters[0].IP == "" {
		return bpav1.HostStatus{}, fmt.Errorf("master %s has no IP address", masters[0].Name)
	}
	return masters[0], nil
}

// FetchAdmin reads admin.conf from master over SSH (cfg: the key and known_hosts the step
// mounts) and rebuilds it (Rebuild), pointed at the master's IP. Only the rebuilt file is
// ever used.
func FetchAdmin(ctx context.Context, master bpav1.HostStatus, cfg sshexec.Config) ([]byte, error) {
	sc, err := sshexec.Dial(ctx, master.IP, cfg)
	if err != nil {
		return nil, fmt.Errorf("fetching admin.conf from master %s: %w", master.Name, err)
	}
	defer sc.Close()
	raw, err := sc.ReadFile(ctx, AdminConfPath)
	if err != nil {
		return nil, fmt.Errorf("fetching admin.conf from master %s: %w", master.Name, err)
	}
	conf, err := Rebuild(raw, master.IP)
	if err != nil {
		return nil, fmt.Errorf("admin.conf from master %s: %w", master.Name, err)
	}
	return conf, nil
}

// AdminREST fetches admin.conf from the first master of hosts (FirstMaster, FetchAdmin)
// and turns it into a client configuration with a 30 s bound on each request: how the
// steps that only read the cluster (preflight, check-drift) reach its API.
func AdminREST(ctx context.Context, hosts []bpav1.HostStatus, cfg sshexec.Config) (*rest.Config, bpav1.HostStatus, error) {
	master, err := FirstMaster(hosts)
	if err != nil {
		return nil, master, err
	}
	conf, err := FetchAdmin(ctx, master, cfg)
	if err != nil {
		return nil, master, err
	}
	rc, err := RESTConfig(conf)
	if err != nil {
		return nil, master, err
	}
	rc.Timeout = 30 * time.Second
	return rc, master, nil
}
