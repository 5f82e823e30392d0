// Package backupetcd is `bpa step backup-etcd`: it takes a verified etcd snapshot of the
// cluster and stores it off the node, before a day-2 operation or on the CR's schedule.
//
//  1. It logs in over SSH to the cluster's first etcd member (status.applied: the live
//     cluster), the host key checked, and reads kubespray's etcd client certificate there
//     (/etc/ssl/etcd/ssl: ca.pem, admin-<node>.pem, admin-<node>-key.pem, as kubespray's
//     etcdctl.sh uses them), into memory only.
//  2. It reaches etcd as the host does, at https://127.0.0.1:2379 (kubespray's
//     ETCD_LISTEN_CLIENT_URLS), through the SSH connection: etcd's client port need not be
//     open to the management cluster, and TLS runs end to end with the member's own CA.
//  3. pkg/etcdbackup writes a canary key, snapshots that one member into the pod's scratch
//     volume (etcd's sha256 trailer checked as it streams), restores the snapshot into a
//     scratch etcd in this process and reads the canary back at its revision.
//  4. Only a verified snapshot is stored: on the site's etcd backup server (BPAPolicy
//     spec.etcdBackupServer, a `bpa serve`) under /backups/<namespace>/<cluster>/, with this
//     step's ServiceAccount token for the server's audience; the server checks the sha256.
//     Then the oldest snapshots beyond --keep are deleted.
//  5. Its record (name, size, sha256, revision, member, time, verified) is the step's
//     output, which the controller adds to status.backups.
//
// A failure starts with EtcdBackupFailed and a colon, which the controller turns into the
// CR's Stalled reason; the operation after it does not start. The private key read from the
// member and the snapshot (it holds every Secret of the cluster) are never logged, and the
// snapshot leaves the pod only for the backup server.
package backupetcd

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/etcdbackup"
	"github.com/akraino-edge-stack/bpa/pkg/etcdhost"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step backup-etcd`.
func Command() *cobra.Command {
	o := options{logf: log.Printf}
	return stepcmd.Command(stepcmd.Step{
		Name:  "backup-etcd",
		Short: "Take a verified etcd snapshot on the cluster's first etcd member and store it on the site's backup server",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			o.cr.AddNameFlags(fs)
			o.server.AddFlags(fs, stepio.In(stepio.BackupServerCAFile))
			fs.StringVar(&o.workflow, "workflow", "", "the run's Workflow, recorded with the snapshot")
			fs.StringVar(&o.workDir, "work-dir", stepio.ScratchDir, "where the snapshot and the scratch etcd are written (the pod's scratch volume)")
			fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "bound on the whole backup")
			o.ssh.AddFlags(fs)
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	cr                stepio.CR
	server            artifacts.BackupServerFlags
	workflow, workDir string
	timeout           time.Duration
	ssh               sshexec.Flags
	flags             *pflag.FlagSet
	logf              func(format string, args ...any)
	now               func() time.Time
	httpClient        *http.Client // tests
	snapshot          func(ctx context.Context, cli *clientv3.Client, file, scratch string) (etcdbackup.Result, error)
}

// failed is the step's error: the reason the controller stalls the CR with, then what.
func failed(format string, args ...any) error {
	return fmt.Errorf(bpav1.ReasonEtcdBackupFailed+": "+format+"; the operation after it did not start and nothing was changed", args...)
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
	store, err := o.store()
	if err != nil {
		return failed("the backup server %s: %v", o.server.URL, err)
	}
	var applied []bpav1.HostStatus
	if p.Status.Applied != nil {
		applied = p.Status.Applied.Hosts
	}
	members, err := etcdhost.Members(applied)
	if err != nil {
		return failed("%v", err)
	}
	res, member, err := o.takeFromAny(ctx, members, o.ssh.Config(o.flags, p.Spec.SSH))
	if err != nil {
		return err
	}
	// The snapshot holds every Secret of the cluster: it leaves the pod only for the server,
	// whatever happens next.
	defer os.Remove(res.Path)
	rec := Record(res, member.Name, o.workflow)
	meta, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := store.PutBackup(ctx, p.Namespace, cluster, res.Name, res.Path, res.SHA256, meta); err != nil {
		return failed("storing snapshot %s on %s: %v", res.Name, o.server.URL, err)
	}
	o.logf("stored snapshot %s (%d bytes, revision %d, sha256 %s) on %s under %s/%s",
		res.Name, res.Size, res.Revision, res.SHA256, o.server.URL, p.Namespace, cluster)
	o.prune(ctx, store, p, cluster)
	return stepio.WriteOutput(stepio.Out(stepio.BackupFile), meta)
}

// takeFromAny takes the snapshot on the first etcd member that gives one, in order: a dead
// first member (the one a day-2 run may be about to remove) does not stop the backup while
// another serves the same store.
func (o *options) takeFromAny(ctx context.Context, members []bpav1.HostStatus, cfg sshexec.Config) (etcdbackup.Result, bpav1.HostStatus, error) {
	var failures []string
	for _, m := range members {
		res, err := o.take(ctx, m, cfg)
		if err == nil {
			return res, m, nil
		}
		o.logf("no snapshot from %s (%s): %v", m.Name, m.IP, err)
		failures = append(failures, fmt.Sprintf("%s (%s): %v", m.Name, m.IP, err))
		if ctx.Err() != nil {
			break
		}
	}
	return etcdbackup.Result{}, bpav1.HostStatus{}, failed("no etcd member gave a verified snapshot: %s (to run the operation without one, set spec.etcdBackup.beforeDay2: Skip)", strings.Join(failures, "; "))
}

// take reads the member's client certificate over SSH, reaches its etcd through the same
// connection and runs the verified backup into workDir.
func (o *options) take(ctx context.Context, member bpav1.HostStatus, cfg sshexec.Config) (etcdbackup.Result, error) {
	cfg.Logf = o.logf
	conn, err := sshexec.Dial(ctx, member.IP, cfg)
	if err != nil {
		return etcdbackup.Result{}, err
	}
	defer conn.Close()
	cli, err := etcdhost.Connect(ctx, conn, member.Name)
	if err != nil {
		return etcdbackup.Result{}, err
	}
	defer cli.Close()
	if err := os.MkdirAll(o.workDir, 0o700); err != nil {
		return etcdbackup.Result{}, err
	}
	name := "etcd-" + o.clock().UTC().Format("20060102T150405Z") + ".db"
	file := filepath.Join(o.workDir, name)
	snapshot := o.snapshot
	if snapshot == nil {
		snapshot = func(ctx context.Context, cli *clientv3.Client, file, scratch string) (etcdbackup.Result, error) {
			return etcdbackup.Backup(ctx, cli, file, scratch, zap.NewNop())
		}
	}
	res, err := snapshot(ctx, cli, file, o.workDir)
	if err != nil {
		_ = os.Remove(file)
		return res, err
	}
	o.logf("snapshot %s of %s verified: %d keys at revision %d; snapshot %s, restore %s, scratch etcd %s, read-back %s",
		name, member.Name, res.Keys, res.Revision, res.Timings.Snapshot.Round(time.Millisecond), res.Timings.Restore.Round(time.Millisecond),
		res.Timings.Start.Round(time.Millisecond), res.Timings.ReadBack.Round(time.Millisecond))
	return res, nil
}

// Record is the snapshot as status.backups lists it.
func Record(res etcdbackup.Result, member, workflow string) bpav1.BackupStatus {
	return bpav1.BackupStatus{Name: res.Name, Size: res.Size, SHA256: res.SHA256, Revision: res.Revision,
		Member: member, TakenAt: metav1.NewTime(res.TakenAt.UTC().Truncate(time.Second)), Verified: res.Verified, Workflow: workflow}
}

// store is the backup server's client, with this step's token.
func (o *options) store() (*artifacts.Client, error) {
	if o.httpClient != nil {
		return &artifacts.Client{URL: o.server.URL, HTTP: o.httpClient}, nil
	}
	return o.server.Client()
}

// prune deletes this cluster's oldest snapshots beyond spec.etcdBackup.keep. It runs after
// a new verified one is stored, so the newest Keep are always verified ones; a failure is
// logged, not the step's (the snapshot is safe, and the next backup prunes again).
func (o *options) prune(ctx context.Context, store *artifacts.Client, p *bpav1.Provisioning, cluster string) {
	keep := int32(bpav1.DefaultBackupKeep)
	if b := p.Spec.EtcdBackup; b != nil && b.Keep != nil {
		keep = *b.Keep
	}
	list, err := store.ListBackups(ctx, p.Namespace, cluster)
	if err != nil {
		o.logf("listing the stored snapshots to keep %d: %v", keep, err)
		return
	}
	for i := 0; i < len(list)-int(keep); i++ {
		if err := store.RemoveBackup(ctx, p.Namespace, cluster, list[i].Name); err != nil {
			o.logf("deleting old snapshot %s: %v", list[i].Name, err)
			continue
		}
		o.logf("deleted old snapshot %s (spec.etcdBackup.keep is %d)", list[i].Name, keep)
	}
}

func (o *options) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}
