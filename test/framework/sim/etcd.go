package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// EtcdPort is where kubespray's etcd serves clients on an etcd host: its address and
// 127.0.0.1 (roles/etcd/templates/etcd.env.j2, ETCD_LISTEN_CLIENT_URLS).
const EtcdPort = 2379

// EtcdUnit is kubespray's etcd unit on an etcd host (roles/etcd/templates/etcd-host.service.j2).
const EtcdUnit = "etcd"

// serveAppEtcd makes machine h an etcd host of the application etcd e once it has kubespray's
// etcd CA: from the stand-in's etcd role until a reset. It serves e at EtcdPort, on its
// address and its own 127.0.0.1, while its etcd unit is not stopped, and its systemctl acts
// on that unit (etcdUnit). The machine passes bytes: the TLS is e's, end to end, so a client
// verifies e's certificate (which holds every address of the site's hosts and 127.0.0.1) and
// presents one e's CA signed.
func serveAppEtcd(t framework.T, h *simhost.Host, e *rig.AppEtcd) error {
	u := &etcdUnit{h: h, e: e}
	h.AddUnit(EtcdUnit, simhost.Unit{Loaded: u.loaded, Active: u.active, Start: u.start, Stop: u.stop})
	// etcd may run from this host's data dir (a restore): stop it before the host's folder
	// goes, which is before the rig stops it.
	t.Cleanup(func() {
		if strings.HasPrefix(e.DataDir, h.Dir()+string(filepath.Separator)) {
			e.Stop()
		}
	})
	return h.ForwardWhile(EtcdPort, net.JoinHostPort("127.0.0.1", strconv.Itoa(e.Port)), func() bool {
		return u.loaded() && !u.isStopped()
	})
}

// etcdUnit is the etcd unit of one etcd host. The site's one etcd stands for the etcd of
// every etcd host, so stopping any host's unit stops it (as a cluster that lost its quorum
// stops serving), and starting one starts it: from the host's data dir when it holds a
// member (a restore made one there), with the member the host's /etc/etcd.env names.
type etcdUnit struct {
	h       *simhost.Host
	e       *rig.AppEtcd
	mu      sync.Mutex
	stopped bool // systemctl stop, and no start since
	// member is the identity of the member folder etcd last started from on this host:
	// another one there is data a restore put in place.
	member os.FileInfo
}

// loaded: the unit is there while the host has the etcd CA, as the etcd role leaves it.
func (u *etcdUnit) loaded() bool {
	ca, _, _ := kubespraysim.EtcdFiles(u.h.Name)
	_, err := os.Stat(u.h.File(ca))
	return err == nil
}

func (u *etcdUnit) isStopped() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stopped
}

func (u *etcdUnit) active() bool { return !u.isStopped() && u.e.Running() }

func (u *etcdUnit) stop() error {
	u.mu.Lock()
	u.stopped = true
	u.mu.Unlock()
	u.e.Stop()
	return nil
}

// start runs etcd as the unit would, with the host's /etc/etcd.env (EnvironmentFile).
func (u *etcdUnit) start(ctx context.Context) error {
	env, err := u.env()
	if err != nil {
		return err
	}
	dir, err := u.h.OwnPath(env["ETCD_DATA_DIR"])
	if err != nil {
		return fmt.Errorf("ETCD_DATA_DIR: %w", err)
	}
	if member, err := os.Stat(filepath.Join(dir, "member")); err == nil {
		if err := u.refuseUnderAPIServers(member); err != nil {
			return err
		}
		err = u.e.StartFrom(ctx, dir, env["ETCD_NAME"], env["ETCD_INITIAL_ADVERTISE_PEER_URLS"])
		if err != nil {
			return err
		}
		u.mu.Lock()
		u.member = member
		u.mu.Unlock()
	} else if !u.e.Running() {
		if err := u.e.Start(ctx); err != nil {
			return err
		}
	}
	u.mu.Lock()
	u.stopped = false
	u.mu.Unlock()
	return nil
}

// refuseUnderAPIServers fails a start from restored data (a member folder etcd has not run
// from on this host) while any of the cluster's API servers runs. Kubernetes' "Restoring an
// etcd cluster" (tasks/administer-cluster/configure-upgrade-etcd): "If any API servers are
// running in your cluster, you should not attempt to restore instances of etcd": an API
// server that lived through the restore serves its cache of the revisions the snapshot
// undid. No real etcd refuses; the stand-in does, so that a restore that skips the stop
// fails here instead of serving stale data unnoticed.
func (u *etcdUnit) refuseUnderAPIServers(member os.FileInfo) error {
	u.mu.Lock()
	restarted := u.member != nil && os.SameFile(u.member, member)
	u.mu.Unlock()
	if restarted {
		return nil
	}
	if running := runningAPIServers(u.e); len(running) > 0 {
		return fmt.Errorf("etcd (simhost): starting from restored data while kube-apiserver runs on %s: stop every API server before restoring etcd", strings.Join(running, ", "))
	}
	return nil
}

// env reads the host's /etc/etcd.env, as systemd reads an EnvironmentFile: KEY=value lines.
func (u *etcdUnit) env() (map[string]string, error) {
	data, err := os.ReadFile(u.h.File(kubespraysim.EtcdEnvFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("etcd.service: Failed to load environment files: %s: %w", kubespraysim.EtcdEnvFile, err)
	}
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env, s.Err()
}

// writeAppEtcdFiles puts in dir (made if missing) what the stand-in's etcd role reads there
// (kubespraysim.AppEtcdFiles): e's CA and admin client certificate and key, the member e
// runs as, and bin/'s etcdctl and etcdutl (hack/build-tools.sh).
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
	member, err := json.Marshal(kubespraysim.AppEtcdMember{Name: e.MemberName, PeerURL: e.PeerURL, ClusterToken: e.ClusterToken})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, names.Member), member, 0o600); err != nil {
		return err
	}
	bin, err := rig.DefaultBinDir()
	if err != nil {
		return err
	}
	for _, tool := range []string{names.Etcdctl, names.Etcdutl} {
		if err := linkOrCopy(filepath.Join(bin, tool), filepath.Join(dir, tool)); err != nil {
			return fmt.Errorf("%w (hack/build-tools.sh %s)", err, tool)
		}
	}
	return nil
}

// linkOrCopy links src at dst, or copies it where it cannot (another file system).
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst, 0o755)
}
