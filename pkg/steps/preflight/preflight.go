// Package preflight is `bpa step preflight`: before an upgrade touches any node, it checks
// that the cluster can take one, and fails naming each check that does not pass, having
// changed nothing (it only reads: the application cluster's API with the admin kubeconfig
// fetched from the first master as verify fetches it, `df` and `uname -m` over SSH, and the
// artifact server anonymously).
//
//   - etcd: the apiserver's etcd check passes, every member's Node is Ready, and the members
//     can lose one (three or more). A single member cannot; it is allowed with a warning in
//     the step's log (the apiserver is down while the upgrade restarts it), as a one-master
//     cluster has no other way to be upgraded.
//   - nodes-ready: every host the cluster keeps is a Ready Node.
//   - disk-space: every host has --min-free-disk available on / and /var/lib.
//   - offline-artifacts: at an offline site, the artifact server holds every file and image
//     the target release downloads for the hosts' arches (pkg/offlinecheck, the check
//     run-kubespray runs before a playbook that downloads).
//   - kubeadm-config: kubeadm's ClusterConfiguration has the Kubernetes release and the
//     settings BPA applied (status.applied).
//
// The error starts with PreflightFailed and a colon, which the controller turns into the
// CR's Stalled reason; the template has no retryStrategy, so nothing re-runs it until the
// spec or the rerun annotation changes, or someone retries the Workflow.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/offlinecheck"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// DefaultMinFreeDisk is the free space the disk check asks of each filesystem: an upgrade
// downloads the release's binaries (about 300 MiB) and pulls its images (about 1 GiB), and
// containerd needs room to unpack them beside the old ones.
const DefaultMinFreeDisk = "2Gi"

// Command returns `bpa step preflight`.
func Command() *cobra.Command {
	o := options{logf: log.Printf, newClusterClient: func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }}
	return stepcmd.Command(stepcmd.Step{
		Name:  "preflight",
		Short: "Check, before an upgrade, that etcd, the Nodes, the hosts' disks, the offline site and kubeadm's config allow it",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			o.cr.AddNameFlags(fs)
			fs.StringVar(&o.hostsFile, "hosts-file", stepio.In(stepio.HostsFile), "JSON list of the run's hosts ({name, roles, mac, ip, bareMetalHost})")
			fs.StringVar(&o.extraVars, "extra-vars", "", "the vars file render-inventory wrote (the offline check reads spec.offline's settings from it)")
			fs.StringVar(&o.kubesprayImage, "kubespray-image", "", "the kubespray image the upgrade runs: its tag is the target release")
			fs.StringVar(&o.kubernetesVersion, "kubernetes-version", "", "the Kubernetes release the upgrade leads to: kubeadm-config may name it already (an upgrade that stopped part way)")
			fs.StringVar(&o.artifactsCA, "artifacts-ca", "", "PEM file of the site policy's CA for the artifact server; empty: none")
			fs.StringVar(&o.minFreeDisk, "min-free-disk", DefaultMinFreeDisk, "free space each host must have on / and /var/lib")
			fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on all the checks")
			o.ssh.AddFlags(fs)
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	cr                                          stepio.CR
	hostsFile, extraVars, kubesprayImage        string
	artifactsCA, minFreeDisk, kubernetesVersion string
	timeout                                     time.Duration
	ssh                                         sshexec.Flags
	flags                                       *pflag.FlagSet
	logf                                        func(format string, args ...any)
	newClusterClient                            func(*rest.Config) (kubernetes.Interface, error)
}

// check is one named check: its failure, or nil.
type check struct {
	name string
	run  func() error
}

func (o *options) run(ctx context.Context, c client.Client) error {
	min, err := resource.ParseQuantity(o.minFreeDisk)
	if err != nil {
		return fmt.Errorf("--min-free-disk: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	p, err := o.cr.Get(ctx, c)
	if err != nil {
		return err
	}
	hosts, err := stepio.ReadHosts(o.hostsFile)
	if err != nil {
		return err
	}
	kept := bpav1.KeptHosts(hosts)
	cfg := o.ssh.Config(o.flags, p.Spec.SSH)
	cfg.Logf = o.logf
	applied := p.Status.Applied
	if applied == nil {
		applied = &bpav1.AppliedState{}
	}
	var cs kubernetes.Interface
	var notReady []string
	checks := []check{
		{CheckNodesReady, func() (err error) {
			if cs, err = o.clusterClient(ctx, kept, cfg); err != nil {
				return err
			}
			if notReady, err = NodesReady(ctx, cs, kept); err == nil && len(notReady) > 0 {
				err = fmt.Errorf("%s; the upgrade drains every node in turn, so bring these back first (or remove them from the spec, in an edit of their own)", strings.Join(notReady, "; "))
			}
			return err
		}},
		{CheckEtcd, func() error {
			if cs == nil {
				return errNoAPI
			}
			return o.etcd(ctx, cs, EtcdMembers(applied.Hosts), notReady)
		}},
		{CheckDiskSpace, func() error { return o.disk(ctx, kept, cfg, min) }},
		{CheckOffline, func() error { return o.offline(ctx, kept, cfg) }},
		{CheckKubeadmConfig, func() error {
			if cs == nil {
				return errNoAPI
			}
			return o.kubeadmConfig(ctx, cs, applied)
		}},
	}
	return o.runChecks(checks)
}

// runChecks runs every check (not only up to the first failure: an operator fixes them all
// at once) and returns the PreflightFailed error naming each that failed. The checks that
// need the cluster's API are skipped (errNoAPI) once it could not be reached.
func (o *options) runChecks(checks []check) error {
	var failed []string
	for _, c := range checks {
		err := c.run()
		if errors.Is(err, errNoAPI) {
			o.logf("check %s: %v", c.name, err)
			continue
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("check %s failed: %v", c.name, err))
			o.logf("check %s: FAILED: %v", c.name, err)
			continue
		}
		o.logf("check %s: passed", c.name)
	}
	if len(failed) == 0 {
		o.logf("preflight: all %d checks passed; the upgrade may start", len(checks))
		return nil
	}
	return fmt.Errorf("%s: %s; nothing was changed. Fix it, then `argo retry` the Workflow or set the %s annotation to a new value",
		bpav1.ReasonPreflightFailed, strings.Join(failed, "; "), bpav1.RerunAnnotation)
}

// apiPrefix starts the error of a cluster whose API could not be asked.
const apiPrefix = "cannot ask the cluster's API"

// errNoAPI skips a check that needs the cluster's API once nodes-ready could not reach it.
var errNoAPI = errors.New("skipped: the cluster's API could not be asked (see nodes-ready)")

// clusterClient fetches admin.conf from the first master, as verify does, and builds a
// client with it.
func (o *options) clusterClient(ctx context.Context, hosts []bpav1.HostStatus, cfg sshexec.Config) (kubernetes.Interface, error) {
	rc, master, err := kubeconfig.AdminREST(ctx, hosts, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", apiPrefix, err)
	}
	o.logf("fetched %s from %s; API server %s", kubeconfig.AdminConfPath, master.Name, rc.Host)
	cs, err := o.newClusterClient(rc)
	if err != nil {
		return nil, fmt.Errorf("%s at %s: %w", apiPrefix, rc.Host, err)
	}
	return cs, nil
}

func (o *options) etcd(ctx context.Context, cs kubernetes.Interface, members, notReady []string) error {
	warning, err := Etcd(members, readyzEtcd(ctx, cs), notReady)
	if warning != "" {
		o.logf("WARNING: %s", warning)
	}
	return err
}

// readyzEtcd asks the apiserver's own etcd readiness check.
func readyzEtcd(ctx context.Context, cs kubernetes.Interface) error {
	rc := cs.Discovery().RESTClient()
	if rc == nil {
		return nil // a fake clientset in tests: no HTTP to ask
	}
	_, err := rc.Get().AbsPath("/readyz/etcd").DoRaw(ctx)
	return err
}

func (o *options) disk(ctx context.Context, hosts []bpav1.HostStatus, cfg sshexec.Config, min resource.Quantity) error {
	targets := targets(hosts)
	out, errs := sshexec.OnEach(ctx, targets, cfg, func(ctx context.Context, c *sshexec.Client) (string, error) {
		b, err := c.Output(ctx, DiskCommand)
		return string(b), err
	})
	unreachable, problems := sshexec.Failures(targets, errs)
	problems = append(unreachable, problems...)
	for i, t := range targets {
		if errs[i] != nil {
			continue
		}
		low, err := LowDisk(t.Name, out[i], min)
		if err != nil {
			problems = append(problems, err.Error())
		}
		problems = append(problems, low...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s; free space there (container images, /tmp), or lower the threshold (the template's --min-free-disk)", strings.Join(problems, "; "))
	}
	return nil
}

func (o *options) offline(ctx context.Context, hosts []bpav1.HostStatus, cfg sshexec.Config) error {
	if o.extraVars == "" {
		return nil
	}
	ca, err := offlinecheck.ReadCA(o.artifactsCA)
	if err != nil {
		return err
	}
	return offlinecheck.Preflight(ctx, o.extraVars, o.kubesprayImage, ca, func() ([]string, error) {
		return offlinecheck.Arches(ctx, targets(hosts), cfg)
	})
}

func (o *options) kubeadmConfig(ctx context.Context, cs kubernetes.Interface, applied *bpav1.AppliedState) error {
	data, err := clusterdrift.KubeadmConfig(ctx, cs)
	if err != nil {
		return err
	}
	drift, err := clusterdrift.Kubeadm(data, applied, o.kubernetesVersion)
	if err != nil || len(drift) == 0 {
		return err
	}
	return fmt.Errorf("kube-system/%s differs from what BPA applied: %s; the cluster was changed outside BPA: set it back, or make the spec say what the cluster is", clusterdrift.KubeadmConfigMap, strings.Join(drift, "; "))
}

func targets(hosts []bpav1.HostStatus) []sshexec.Target {
	out := make([]sshexec.Target, len(hosts))
	for i, h := range hosts {
		out[i] = sshexec.Target{Name: h.Name, Addr: h.IP}
	}
	return out
}
