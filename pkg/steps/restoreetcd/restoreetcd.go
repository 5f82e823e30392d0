// Package restoreetcd is `bpa step restore-etcd`: it restores a cluster's etcd from one of
// its verified snapshots on the site's backup server, in kubespray's order
// (roles/recover_control_plane/etcd/tasks/recover_lost_quorum.yml at v2.27 and v2.28, and
// docs/operations/recover-control-plane.md):
//
//  1. It downloads the snapshot (its sha256 checked against the server's record) and
//     proves it before anything is touched: restored into a scratch etcd in the pod, it
//     must serve the canary key the backup step wrote into it.
//  2. It logs in over SSH to every etcd member and control-plane host, and reads each
//     member's /etc/etcd.env (kubespray's roles/etcd/templates/etcd.env.j2); a host that
//     cannot be reached or read stops it here, nothing changed.
//  3. It stops the control plane: kubeadm's static-pod manifests of kube-apiserver,
//     kube-controller-manager and kube-scheduler move out of /etc/kubernetes/manifests, so
//     the kubelet stops them and nothing writes while etcd is replaced; it then waits until
//     `crictl ps` lists none of their containers on any master, since the kubelet stops
//     them a while after the move, and an API server that lives through a restore keeps
//     serving the revisions the snapshot undid (Kubernetes' "Restoring an etcd cluster":
//     stop every API server first).
//  4. It stops etcd on every member (systemctl, the unit kubespray installs) and sets each
//     member's data aside (<data dir>/member → member.before-restore-<time>; kubespray
//     deletes it, BPA keeps it: nothing is lost).
//  5. On the first member, it restores the snapshot with the host's own etcdutl as a
//     cluster of one, with the member's name, peer URL and cluster token from etcd.env,
//     rewrites ETCD_INITIAL_CLUSTER to match and starts etcd, as recover_lost_quorum.yml
//     does; then etcd, reached as the host reaches it, must serve the snapshot's canary at
//     its revision.
//  6. It starts the control plane again (the manifests move back).
//
// The other members, their data set aside, join again through kubespray's cluster.yml
// (the Workflow's rejoin-etcd, translator.RestoreWorkflow); verify then checks the cluster.
//
// A failure starts with EtcdRestoreFailed and a colon. One before step 5 puts everything
// back as it was (data, etcd, control plane) and says so; one after names where the data
// from before is kept.
package restoreetcd

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/etcdbackup"
	"github.com/akraino-edge-stack/bpa/pkg/etcdhost"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// What kubespray and kubeadm leave on the hosts, that a restore uses.
const (
	// EtcdEnv is etcd's environment file (roles/etcd/templates/etcd.env.j2).
	EtcdEnv = "/etc/etcd.env"
	// Etcdutl is the host's etcdutl (roles/etcdctl_etcdutl, into bin_dir).
	Etcdutl = "/usr/local/bin/etcdutl"
	// ManifestsDir is the kubelet's static-pod folder, where kubeadm writes the control
	// plane's manifests.
	ManifestsDir = "/etc/kubernetes/manifests"
	// StoppedDir holds the control plane's manifests while etcd is restored: outside
	// ManifestsDir, so the kubelet runs none of them.
	StoppedDir = "/etc/kubernetes/manifests-stopped-for-restore"
	// DefaultToken is kubespray's ETCD_INITIAL_CLUSTER_TOKEN.
	DefaultToken = "k8s_etcd"
)

// ControlPlaneManifests are kubeadm's static pods that use etcd, stopped during a restore.
var ControlPlaneManifests = []string{"kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"}

// ControlPlaneContainers matches the containers of ControlPlaneManifests' pods by name, as
// `crictl ps --name` filters (a regular expression): kubeadm names each after its component.
const ControlPlaneContainers = "^(kube-apiserver|kube-controller-manager|kube-scheduler)$"

// StopTimeout bounds the wait for the kubelet to stop the control plane's containers: it
// notices a manifest's removal at once (inotify) or within its 20 s fileCheckFrequency, and
// a container has its 30 s grace period to stop.
var StopTimeout = 2 * time.Minute

// Command returns `bpa step restore-etcd`.
func Command() *cobra.Command {
	o := options{logf: log.Printf}
	return stepcmd.Command(stepcmd.Step{
		Name:  "restore-etcd",
		Short: "Restore the cluster's etcd from a verified snapshot on the site's backup server",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			o.cr.AddNameFlags(fs)
			fs.StringVar(&o.snapshot, "snapshot", "", "the snapshot's name on the backup server (status.backups[].name)")
			o.server.AddFlags(fs, stepio.In(stepio.BackupServerCAFile))
			fs.StringVar(&o.workflow, "workflow", "", "the run's Workflow, recorded with the restore")
			fs.StringVar(&o.workDir, "work-dir", stepio.ScratchDir, "where the snapshot and the scratch etcd are written (the pod's scratch volume)")
			fs.DurationVar(&o.timeout, "timeout", time.Hour, "bound on the whole restore")
			fs.DurationVar(&o.etcdWait, "etcd-wait", 3*time.Minute, "how long the restored etcd may take to serve")
			o.ssh.AddFlags(fs)
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	cr                stepio.CR
	snapshot          string
	server            artifacts.BackupServerFlags
	workflow, workDir string
	timeout, etcdWait time.Duration
	ssh               sshexec.Flags
	flags             *pflag.FlagSet
	logf              func(format string, args ...any)
	now               func() time.Time
}

func failed(format string, args ...any) error {
	return fmt.Errorf(bpav1.ReasonEtcdRestoreFailed+": "+format, args...)
}

func (o *options) run(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	p, err := o.cr.Get(ctx, c)
	if err != nil {
		return err
	}
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return err
	}
	snap, err := o.fetch(ctx, p.Namespace, cluster)
	if err != nil {
		return failed("%v; nothing was changed", err)
	}
	defer os.Remove(snap.file)
	var applied []bpav1.HostStatus
	if p.Status.Applied != nil {
		applied = p.Status.Applied.Hosts
	}
	hosts, err := o.connect(ctx, applied, o.ssh.Config(o.flags, p.Spec.SSH))
	if err != nil {
		return failed("%v; nothing was changed", err)
	}
	defer hosts.close()
	rec, err := o.restore(ctx, hosts, snap)
	if err != nil {
		return err
	}
	out, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return stepio.WriteOutput(stepio.Out(stepio.RestoreFile), out)
}

// snapshot is the downloaded, proven snapshot and the canary it holds.
type snapshot struct {
	name, file, sha256 string
	canary             etcdbackup.Canary
	canaryRevision     int64
}

// fetch downloads the snapshot and proves it: its sha256 is the server's record of it, and
// restored into a scratch etcd it serves the canary the backup step wrote into it.
func (o *options) fetch(ctx context.Context, namespace, cluster string) (snapshot, error) {
	if _, err := translator.ParseRestoreRequest(o.snapshot); err != nil || strings.Contains(o.snapshot, "@") {
		return snapshot{}, fmt.Errorf("--snapshot %q is not a snapshot name", o.snapshot)
	}
	store, err := o.server.Client()
	if err != nil {
		return snapshot{}, fmt.Errorf("the backup server %s: %v", o.server.URL, err)
	}
	list, err := store.ListBackups(ctx, namespace, cluster)
	if err != nil {
		return snapshot{}, fmt.Errorf("listing the snapshots of %s/%s on %s: %v", namespace, cluster, o.server.URL, err)
	}
	var meta *artifacts.BackupMeta
	var names []string
	for i := range list {
		names = append(names, list[i].Name)
		if list[i].Name == o.snapshot {
			meta = &list[i]
		}
	}
	if meta == nil {
		return snapshot{}, fmt.Errorf("no snapshot %s of %s/%s on %s (it has: %s)", o.snapshot, namespace, cluster, o.server.URL, strings.Join(names, ", "))
	}
	if err := os.MkdirAll(o.workDir, 0o700); err != nil {
		return snapshot{}, err
	}
	s := snapshot{name: meta.Name, file: filepath.Join(o.workDir, meta.Name), sha256: meta.SHA256}
	_ = os.Remove(s.file) // a retry's leftover: GetBackup creates it anew
	if err := store.GetBackup(ctx, namespace, cluster, meta.Name, s.file, meta.SHA256); err != nil {
		os.Remove(s.file)
		return snapshot{}, fmt.Errorf("downloading snapshot %s: %v", meta.Name, err)
	}
	if s.canary, s.canaryRevision, err = readCanary(ctx, s.file, o.workDir); err != nil {
		os.Remove(s.file)
		return snapshot{}, fmt.Errorf("snapshot %s: %w", meta.Name, err)
	}
	o.logf("snapshot %s downloaded (%d bytes, sha256 %s) and proven: a scratch etcd serves its canary at revision %d", meta.Name, meta.Size, meta.SHA256, s.canaryRevision)
	return s, nil
}

// readCanary restores the snapshot into a scratch etcd and reads the canary from it.
func readCanary(ctx context.Context, file, scratch string) (etcdbackup.Canary, int64, error) {
	cli, closeFn, err := etcdbackup.Open(ctx, file, scratch, zap.NewNop())
	if err != nil {
		return etcdbackup.Canary{}, 0, fmt.Errorf("%w: %v", etcdbackup.ErrNotVerified, err)
	}
	defer closeFn()
	return getCanary(ctx, cli)
}

func getCanary(ctx context.Context, kv clientv3.KV) (etcdbackup.Canary, int64, error) {
	resp, err := kv.Get(ctx, etcdbackup.CanaryKey)
	if err != nil {
		return etcdbackup.Canary{}, 0, err
	}
	if len(resp.Kvs) != 1 {
		return etcdbackup.Canary{}, 0, fmt.Errorf("%w: it holds no canary %s: not a snapshot BPA took and verified", etcdbackup.ErrNotVerified, etcdbackup.CanaryKey)
	}
	kv0 := resp.Kvs[0]
	return etcdbackup.Canary{Key: string(kv0.Key), Value: string(kv0.Value), Revision: kv0.ModRevision}, kv0.ModRevision, nil
}

func (o *options) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}

// hostSet is an SSH connection to each etcd member and control-plane host.
type hostSet struct {
	members []member
	masters []master
	pool    *sshexec.Pool
}

type member struct {
	bpav1.HostStatus
	conn *sshexec.Client
	env  etcdEnv
}

type master struct {
	bpav1.HostStatus
	conn *sshexec.Client
}

func (h *hostSet) close() { h.pool.Close() }

// connect logs in to every etcd member and control-plane host and reads what the restore
// needs, so that a host that cannot take part stops it before anything changes.
func (o *options) connect(ctx context.Context, applied []bpav1.HostStatus, cfg sshexec.Config) (*hostSet, error) {
	members, err := etcdhost.Members(applied)
	if err != nil {
		return nil, err
	}
	cfg.Logf = o.logf
	hs := &hostSet{pool: sshexec.NewPool(cfg)}
	dial := func(h bpav1.HostStatus) (*sshexec.Client, error) {
		return hs.pool.Dial(ctx, sshexec.Target{Name: h.Name, Addr: h.IP})
	}
	for _, m := range members {
		c, err := dial(m)
		if err != nil {
			hs.close()
			return nil, err
		}
		env, err := readEtcdEnv(ctx, c)
		if err != nil {
			hs.close()
			return nil, fmt.Errorf("%s: %v", m.Name, err)
		}
		hs.members = append(hs.members, member{HostStatus: m, conn: c, env: env})
	}
	if err := hs.members[0].check(ctx); err != nil {
		hs.close()
		return nil, err
	}
	for _, h := range applied {
		if h.Removing || h.IP == "" || !hasRole(h, hostmatch.RoleMaster) {
			continue
		}
		c, err := dial(h)
		if err != nil {
			hs.close()
			return nil, err
		}
		m := master{HostStatus: h, conn: c}
		if err := m.check(ctx); err != nil {
			hs.close()
			return nil, err
		}
		hs.masters = append(hs.masters, m)
	}
	return hs, nil
}

func hasRole(h bpav1.HostStatus, role string) bool {
	for _, r := range h.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// check: the first member has the etcdutl the restore runs.
func (m member) check(ctx context.Context) error {
	if _, err := m.conn.Output(ctx, []string{"test", "-x", Etcdutl}); err != nil {
		return fmt.Errorf("%s: no %s (kubespray's etcdctl_etcdutl role installs it): %v", m.Name, Etcdutl, err)
	}
	return nil
}

// check: each control-plane manifest is where the kubelet runs it, or set aside by an
// earlier attempt of this restore.
func (m master) check(ctx context.Context) error {
	for _, f := range ControlPlaneManifests {
		if !exists(ctx, m.conn, path.Join(ManifestsDir, f)) && !exists(ctx, m.conn, path.Join(StoppedDir, f)) {
			return fmt.Errorf("%s: no %s: not a control plane kubeadm set up, so BPA cannot stop it", m.Name, path.Join(ManifestsDir, f))
		}
	}
	return nil
}

func exists(ctx context.Context, c *sshexec.Client, p string) bool {
	_, err := c.Output(ctx, []string{"test", "-e", p})
	return err == nil
}

// etcdEnv is what a restore reads of a member's etcd.env.
type etcdEnv struct {
	DataDir, Name, PeerURL, Token string
}

// readEtcdEnv reads and parses the member's etcd.env.
func readEtcdEnv(ctx context.Context, c *sshexec.Client) (etcdEnv, error) {
	b, err := c.ReadFile(ctx, EtcdEnv)
	if err != nil {
		return etcdEnv{}, err
	}
	return parseEtcdEnv(string(b))
}

func parseEtcdEnv(s string) (etcdEnv, error) {
	vars := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			vars[k] = v
		}
	}
	e := etcdEnv{DataDir: vars["ETCD_DATA_DIR"], Name: vars["ETCD_NAME"], PeerURL: vars["ETCD_INITIAL_ADVERTISE_PEER_URLS"], Token: vars["ETCD_INITIAL_CLUSTER_TOKEN"]}
	if e.Token == "" {
		e.Token = DefaultToken
	}
	for k, v := range map[string]string{"ETCD_DATA_DIR": e.DataDir, "ETCD_NAME": e.Name, "ETCD_INITIAL_ADVERTISE_PEER_URLS": e.PeerURL} {
		if v == "" {
			return etcdEnv{}, fmt.Errorf("%s sets no %s", EtcdEnv, k)
		}
	}
	if !path.IsAbs(e.DataDir) || path.Clean(e.DataDir) == "/" || strings.ContainsAny(e.PeerURL, ", ") {
		return etcdEnv{}, fmt.Errorf("%s: ETCD_DATA_DIR %q or ETCD_INITIAL_ADVERTISE_PEER_URLS %q is not one this step restores (one absolute folder, one URL)", EtcdEnv, e.DataDir, e.PeerURL)
	}
	e.DataDir = path.Clean(e.DataDir)
	return e, nil
}
