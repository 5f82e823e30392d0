package restoreetcd

import (
	"context"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/akraino-edge-stack/bpa/pkg/etcdhost"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// run runs argv on the host, naming the host and the command in its error.
func run(ctx context.Context, c *sshexec.Client, host string, argv ...string) ([]byte, error) {
	out, err := c.Output(ctx, argv)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", host, strings.Join(argv, " "), err)
	}
	return out, nil
}

// restore runs steps 3 to 6 of the package's doc on the hosts.
func (o *options) restore(ctx context.Context, hs *hostSet, snap snapshot) (stepio.Restore, error) {
	stamp := o.clock().UTC().Format("20060102T150405Z")
	if err := o.stopControlPlane(ctx, hs); err != nil {
		o.startControlPlane(hs)
		return stepio.Restore{}, failed("stopping the control plane: %v; its manifests were put back, nothing else was changed", err)
	}
	aside, err := o.setAside(ctx, hs, stamp)
	if err != nil {
		if perr := o.putBack(hs, aside); perr != nil {
			return stepio.Restore{}, failed("%v; putting the data back failed too (%v): etcd's data from before is in %s; move it back to member and start etcd by hand", err, perr, describe(aside))
		}
		return stepio.Restore{}, failed("%v; the data, etcd and the control plane were put back as they were", err)
	}
	first := hs.members[0]
	if err := o.restoreFirst(ctx, first, snap, stamp); err != nil {
		if _, replaced := err.(replacedError); !replaced {
			if perr := o.putBack(hs, aside); perr == nil {
				return stepio.Restore{}, failed("%v; the data, etcd and the control plane were put back as they were", err)
			}
		}
		o.startControlPlane(hs)
		return stepio.Restore{}, failed("%v; etcd's data from before the restore is kept in %s", err, describe(aside))
	}
	o.startControlPlane(hs)
	o.logf("etcd restored from %s on %s at revision %d; the data from before is kept in %s", snap.name, first.Name, snap.canaryRevision, describe(aside))
	return stepio.Restore{Snapshot: snap.name, SHA256: snap.sha256, Revision: snap.canaryRevision, Member: first.Name, SetAside: aside,
		RestoredAt: o.clock().UTC().Truncate(time.Second), Workflow: o.workflow}, nil
}

// stopControlPlane moves kubeadm's control-plane manifests out of the kubelet's folder on
// every control-plane host, so that nothing writes to etcd while it is replaced.
func (o *options) stopControlPlane(ctx context.Context, hs *hostSet) error {
	for _, m := range hs.masters {
		if _, err := run(ctx, m.conn, m.Name, "mkdir", "-p", "-m", "0700", StoppedDir); err != nil {
			return err
		}
		for _, f := range ControlPlaneManifests {
			if exists(ctx, m.conn, path.Join(ManifestsDir, f)) {
				if _, err := run(ctx, m.conn, m.Name, "mv", "-f", path.Join(ManifestsDir, f), path.Join(StoppedDir, f)); err != nil {
					return err
				}
			}
		}
		o.logf("%s: control plane stopping (%s moved to %s)", m.Name, strings.Join(ControlPlaneManifests, ", "), StoppedDir)
	}
	for _, m := range hs.masters {
		if err := o.awaitStopped(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// awaitStopped waits until the kubelet of master m has stopped the control plane's
// containers (`crictl ps` lists none), within StopTimeout.
func (o *options) awaitStopped(ctx context.Context, m master) error {
	ctx, cancel := context.WithTimeout(ctx, StopTimeout)
	defer cancel()
	argv := []string{"crictl", "ps", "--name", ControlPlaneContainers, "-q"}
	for {
		out, err := run(ctx, m.conn, m.Name, argv...)
		if err == nil && len(strings.TrimSpace(string(out))) == 0 {
			o.logf("%s: control plane stopped (crictl ps lists none of its containers)", m.Name)
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				return fmt.Errorf("%s: after %s the kubelet still runs control-plane containers (crictl ps: %s)", m.Name, StopTimeout, strings.Join(strings.Fields(string(out)), ", "))
			}
			return fmt.Errorf("waiting for the kubelet to stop the control plane: %w", err)
		case <-time.After(time.Second):
		}
	}
}

// startControlPlane moves the manifests back, on every host it can; a failure is logged
// with what to do (the restore's outcome stands either way).
func (o *options) startControlPlane(hs *hostSet) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, m := range hs.masters {
		for _, f := range ControlPlaneManifests {
			if !exists(ctx, m.conn, path.Join(StoppedDir, f)) {
				continue
			}
			if _, err := run(ctx, m.conn, m.Name, "mv", "-f", path.Join(StoppedDir, f), path.Join(ManifestsDir, f)); err != nil {
				o.logf("could not start the control plane again: %v; move %s/* back to %s by hand", err, StoppedDir, ManifestsDir)
			}
		}
	}
}

// setAside stops etcd on every member and moves each member's data out of the way. It
// returns what it moved, member by member, also on failure.
func (o *options) setAside(ctx context.Context, hs *hostSet, stamp string) (map[string]string, error) {
	for _, m := range hs.members {
		if _, err := run(ctx, m.conn, m.Name, "systemctl", "stop", "etcd"); err != nil {
			return nil, err
		}
		// is-active exits 3 for a stopped unit: anything else means it still runs.
		if _, _, code, err := m.conn.Run(ctx, []string{"systemctl", "is-active", "etcd"}); err != nil || code == 0 {
			return nil, fmt.Errorf("%s: etcd still runs after systemctl stop etcd (%v)", m.Name, err)
		}
	}
	aside := map[string]string{}
	for _, m := range hs.members {
		data := path.Join(m.env.DataDir, "member")
		if !exists(ctx, m.conn, data) {
			continue // a member without data (it never started, or an earlier attempt moved it)
		}
		to := data + ".before-restore-" + stamp
		if _, err := run(ctx, m.conn, m.Name, "mv", data, to); err != nil {
			return aside, err
		}
		aside[m.Name] = to
	}
	o.logf("etcd stopped on %d member(s); data set aside: %s", len(hs.members), describe(aside))
	return aside, nil
}

// putBack undoes setAside: each member's data back, etcd started on every member, the
// control plane started.
func (o *options) putBack(hs *hostSet, aside map[string]string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var errs []string
	for _, m := range hs.members {
		if to, ok := aside[m.Name]; ok {
			data := path.Join(m.env.DataDir, "member")
			if exists(ctx, m.conn, data) {
				errs = append(errs, fmt.Sprintf("%s: %s exists, %s left where it is", m.Name, data, to))
				continue
			}
			if _, err := run(ctx, m.conn, m.Name, "mv", to, data); err != nil {
				errs = append(errs, err.Error())
				continue
			}
		}
		if _, err := run(ctx, m.conn, m.Name, "systemctl", "start", "etcd"); err != nil {
			errs = append(errs, err.Error())
		}
	}
	o.startControlPlane(hs)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// replacedError is a failure after the member's data was replaced by the snapshot's.
type replacedError struct{ error }

// restoreFirst restores the snapshot on the first member as a cluster of one, starts etcd
// there and checks it serves the snapshot (recover_lost_quorum.yml's tasks, named below).
func (o *options) restoreFirst(ctx context.Context, m member, snap snapshot, stamp string) error {
	e := m.env
	file := path.Join(e.DataDir, "restore-"+stamp+".db")
	tmp := path.Join(e.DataDir, "restore-"+stamp)
	// "Transfer etcd snapshot to host" (mode 0640 there; 0600 here: it holds every Secret).
	f, err := os.Open(snap.file)
	if err != nil {
		return err
	}
	err = m.conn.WriteFile(ctx, file, f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %v", m.Name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = run(cctx, m.conn, m.Name, "rm", "-rf", "--", file, tmp) // "Remove etcd snapshot"
	}()
	// "Restore etcd snapshot": etcdutl's restore (etcdctl's is deprecated in etcd 3.5 and
	// gone in 3.6) into a fresh folder beside the data, then moved into place, so the data
	// folder itself (perhaps a mount point) is never removed.
	initial := e.Name + "=" + e.PeerURL
	if _, err := run(ctx, m.conn, m.Name, Etcdutl, "snapshot", "restore", file, "--name", e.Name, "--initial-cluster", initial,
		"--initial-cluster-token", e.Token, "--initial-advertise-peer-urls", e.PeerURL, "--data-dir", tmp); err != nil {
		return err
	}
	owner, err := run(ctx, m.conn, m.Name, "stat", "-c", "%u:%g", e.DataDir)
	if err != nil {
		return err
	}
	// "Change etcd data-dir owner": to the data folder's, kubespray's etcd user.
	if _, err := run(ctx, m.conn, m.Name, "chown", "-R", strings.TrimSpace(string(owner)), path.Join(tmp, "member")); err != nil {
		return err
	}
	if _, err := run(ctx, m.conn, m.Name, "mv", path.Join(tmp, "member"), path.Join(e.DataDir, "member")); err != nil {
		return err
	}
	// From here on the member holds the snapshot's data.
	// "Reconfigure etcd": the cluster of one the data now describes.
	if _, err := run(ctx, m.conn, m.Name, "sed", "-i", "s|^ETCD_INITIAL_CLUSTER=.*|ETCD_INITIAL_CLUSTER="+initial+"|", EtcdEnv); err != nil {
		return replacedError{err}
	}
	// "Start etcd"
	if _, err := run(ctx, m.conn, m.Name, "systemctl", "start", "etcd"); err != nil {
		return replacedError{err}
	}
	if err := o.awaitSnapshot(ctx, m, snap); err != nil {
		return replacedError{fmt.Errorf("%s: the restored etcd: %v", m.Name, err)}
	}
	return nil
}

// awaitSnapshot waits for the member's etcd to serve, as the host reaches it, the
// snapshot's canary at its revision, alone in its cluster.
func (o *options) awaitSnapshot(ctx context.Context, m member, snap snapshot) error {
	cli, err := etcdhost.Connect(ctx, m.conn, m.Name)
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(o.etcdWait)
	for {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, rev, err := getCanary(wctx, cli)
		var members int
		if err == nil {
			resp, lerr := cli.MemberList(wctx)
			if err = lerr; err == nil {
				members = len(resp.Members)
			}
		}
		cancel()
		if err == nil {
			if c.Value != snap.canary.Value || rev != snap.canaryRevision {
				return fmt.Errorf("serves the canary %q at revision %d, not the snapshot's %q at %d", c.Value, rev, snap.canary.Value, snap.canaryRevision)
			}
			if members != 1 {
				return fmt.Errorf("has %d members, not the cluster of one a restore makes", members)
			}
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not serving after %s: %v", o.etcdWait, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// describe lists the set-aside folders, member by member.
func describe(aside map[string]string) string {
	if len(aside) == 0 {
		return "no folder (no member had data)"
	}
	var out []string
	for m, p := range aside {
		out = append(out, m+":"+p)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
