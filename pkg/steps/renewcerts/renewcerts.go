// Package renewcerts is `bpa step renew-certificates`: it renews a cluster's kubeadm
// certificates with the script kubespray installs for that on every control-plane host
// ({{bin_dir}}/k8s-certs-renew.sh, from roles/kubernetes/control-plane/templates/
// k8s-certs-renew.sh.j2, by the task "Install script to renew K8S control plane
// certificates" of roles/kubernetes/control-plane/tasks/main.yml at v2.27 and v2.28, whatever
// auto_renew_certificates says). The script runs `kubeadm certs renew all`, removes the
// control-plane pods with crictl so the kubelet restarts them on the new certificates, and
// waits for the API server's port. BPA runs that script, never its own kubeadm logic, but one
// master at a time, with the checks kubespray's monthly timer does not make:
//
//  1. Before anything: every master and etcd member answers over SSH (host key checked),
//     each master has the script, every etcd member's etcd answers (etcdhost) with one
//     leader, and every master's API server answers /readyz on its own 127.0.0.1 (the port
//     its admin.conf names, through the SSH connection), its TLS verified with the master's
//     kubeadm CA (/etc/kubernetes/ssl/ca.crt). A failure stops it here, nothing changed.
//  2. For each master, by name: the served certificate's NotAfter is recorded, the script
//     runs, and the step waits (bounded) until that master's /readyz answers again with a
//     certificate that expires later than before; then the checks of 1 again, before the
//     next master. A failure stops it at that master: the error names it, the masters
//     renewed before it and that the others were not touched.
//
// Its output (stepio.Renewal) lists each master's served NotAfter before and after and how
// long its API server was away. Every failure starts with CertificateRenewalFailed and a colon.
package renewcerts

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/etcdhost"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// What kubespray and kubeadm leave on a control-plane host, that a renewal uses.
const (
	// Script is kubespray's k8s-certs-renew.sh in its default bin_dir.
	Script = "/usr/local/bin/k8s-certs-renew.sh"
	// CAFile is kubeadm's cluster CA in kubespray's kube_cert_dir: it verifies the API
	// server's serving certificate.
	CAFile = "/etc/kubernetes/ssl/ca.crt"
	// AdminConf names, in its server URL, the port the API server listens on.
	AdminConf = "/etc/kubernetes/admin.conf"
)

// Command returns `bpa step renew-certificates`.
func Command() *cobra.Command {
	o := options{logf: log.Printf, output: stepio.Out(stepio.RenewalFile), poll: time.Second}
	return stepcmd.Command(stepcmd.Step{
		Name:  "renew-certificates",
		Short: "Renew the cluster's kubeadm certificates with kubespray's k8s-certs-renew.sh, one control-plane node at a time",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			o.cr.AddNameFlags(fs)
			fs.StringVar(&o.workflow, "workflow", "", "the run's Workflow, recorded with the renewal")
			fs.DurationVar(&o.timeout, "timeout", time.Hour, "bound on the whole renewal")
			fs.DurationVar(&o.scriptTimeout, "script-timeout", 10*time.Minute, "bound on one master's k8s-certs-renew.sh")
			fs.DurationVar(&o.apiserverWait, "apiserver-wait", 5*time.Minute, "how long a master's API server may take to serve its renewed certificate after the script")
			o.ssh.AddFlags(fs)
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	cr                                    stepio.CR
	workflow                              string
	timeout, scriptTimeout, apiserverWait time.Duration
	ssh                                   sshexec.Flags
	flags                                 *pflag.FlagSet
	logf                                  func(format string, args ...any)
	output                                string
	// poll is how often a master's API server is asked while it restarts.
	poll time.Duration
	now  func() time.Time
}

func failed(format string, args ...any) error {
	return fmt.Errorf(bpav1.ReasonCertificateRenewalFailed+": "+format, args...)
}

func (o *options) run(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	p, err := o.cr.Get(ctx, c)
	if err != nil {
		return failed("%v; nothing was changed", err)
	}
	var applied []bpav1.HostStatus
	if p.Status.Applied != nil {
		applied = p.Status.Applied.Hosts
	}
	cfg := o.ssh.Config(o.flags, p.Spec.SSH)
	cfg.Logf = o.logf
	hs, err := o.connect(ctx, applied, cfg)
	if err != nil {
		return failed("%v; nothing was changed", err)
	}
	defer hs.close()
	if err := o.healthy(ctx, hs); err != nil {
		return failed("before any renewal: %v; nothing was changed", err)
	}
	r, err := o.renew(ctx, hs)
	if werr := o.write(r); werr != nil && err == nil {
		err = failed("every master was renewed, but the output could not be written: %v", werr)
	}
	return err
}

func (o *options) write(r stepio.Renewal) error {
	r.Workflow = o.workflow
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return stepio.WriteOutput(o.output, data)
}

func (o *options) clock() time.Time {
	if o.now != nil {
		return o.now()
	}
	return time.Now()
}

// Masters are the live cluster's control-plane hosts (status.applied), by name; hosts that
// are leaving are left out.
func Masters(applied []bpav1.HostStatus) ([]bpav1.HostStatus, error) {
	var out []bpav1.HostStatus
	for _, h := range applied {
		if !h.Removing && slices.Contains(h.Roles, hostmatch.RoleMaster) {
			if h.IP == "" {
				return nil, fmt.Errorf("master %s has no address in status.applied", h.Name)
			}
			out = append(out, h)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("status.applied lists no master: the cluster was never built")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// hostSet is an SSH connection to each master and etcd member, and what the checks read.
type hostSet struct {
	masters []*master
	members []*member
	pool    *sshexec.Pool
}

func (hs *hostSet) close() {
	for _, m := range hs.members {
		m.etcd.Close()
	}
	hs.pool.Close()
}

// connect logs in to every master and etcd member and reads what the checks need, so that a
// host that cannot take part stops the step before anything changes.
func (o *options) connect(ctx context.Context, applied []bpav1.HostStatus, cfg sshexec.Config) (*hostSet, error) {
	masters, err := Masters(applied)
	if err != nil {
		return nil, err
	}
	members, err := etcdhost.Members(applied)
	if err != nil {
		return nil, err
	}
	hs := &hostSet{pool: sshexec.NewPool(cfg)}
	if hs.masters, err = each(ctx, hs.pool, masters, newMaster); err == nil {
		hs.members, err = each(ctx, hs.pool, members, newMember)
	}
	if err != nil {
		hs.close()
		return nil, err
	}
	return hs, nil
}

// each logs in to every host of hosts (once per host, through pool) and makes a T of it.
func each[T any](ctx context.Context, pool *sshexec.Pool, hosts []bpav1.HostStatus,
	newT func(context.Context, bpav1.HostStatus, *sshexec.Client) (T, error)) ([]T, error) {
	var out []T
	for _, h := range hosts {
		c, err := pool.Dial(ctx, sshexec.Target{Name: h.Name, Addr: h.IP})
		if err != nil {
			return out, err
		}
		x, err := newT(ctx, h, c)
		if err != nil {
			return out, err
		}
		out = append(out, x)
	}
	return out, nil
}
