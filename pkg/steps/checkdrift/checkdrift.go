// Package checkdrift is `bpa step check-drift`: it compares the live application cluster
// with what BPA applied (status.applied, the node labels and taints of the vars file
// render-inventory wrote, the package pins of the cluster's Softwares), reading only, and
// writes each difference as one readable line (stepio.Drift), with every Node's Ready
// condition. It reaches the cluster's API with the admin.conf fetched over SSH from the first
// master, as verify and preflight do, and asks it only get and list: the Nodes, and
// kube-system/kubeadm-config; on the hosts a Software wants packages on it runs
// `dpkg-query -W` (pkg/clusterdrift compares). A difference is its finding, not its failure:
// it fails only when it cannot read.
package checkdrift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step check-drift`.
func Command() *cobra.Command {
	o := options{logf: log.Printf, now: time.Now, newClusterClient: func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }}
	return stepcmd.Command(stepcmd.Step{
		Name:  "check-drift",
		Short: "Compare the live cluster with what BPA applied (nodes, kubelets, roles, labels, taints, kubeadm-config, package pins), reading only",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			o.cr.AddNameFlags(fs)
			fs.StringVar(&o.hostsFile, "hosts-file", stepio.In(stepio.HostsFile), "JSON list of the hosts with their current addresses ({name, roles, mac, ip, bareMetalHost})")
			fs.StringVar(&o.extraVars, "extra-vars", stepio.In(stepio.ExtraVarsFile), "the vars file render-inventory wrote: node_labels and node_taints are what BPA applied to every node")
			fs.StringVar(&o.out, "drift-file", stepio.Out(stepio.DriftFile), "where to write what differs (JSON)")
			fs.DurationVar(&o.timeout, "timeout", 5*time.Minute, "bound on the whole check")
			o.ssh.AddFlags(fs)
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

// UserAgent is what the step's requests to the application cluster carry.
const UserAgent = "bpa-check-drift"

type options struct {
	cr                        stepio.CR
	hostsFile, extraVars, out string
	timeout                   time.Duration
	ssh                       sshexec.Flags
	flags                     *pflag.FlagSet
	logf                      func(format string, args ...any)
	now                       func() time.Time
	newClusterClient          func(*rest.Config) (kubernetes.Interface, error)
}

func (o *options) run(ctx context.Context, c client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	p, err := o.cr.Get(ctx, c)
	if err != nil {
		return err
	}
	applied := p.Status.Applied
	if applied == nil || len(applied.Hosts) == 0 {
		return errors.New("status.applied lists no host: the cluster was never built, there is nothing to compare")
	}
	want, err := o.appliedVars()
	if err != nil {
		return err
	}
	hosts, err := stepio.ReadHosts(o.hostsFile)
	if err != nil {
		return err
	}
	cfg := o.ssh.Config(o.flags, p.Spec.SSH)
	cfg.Logf = o.logf
	rc, master, err := kubeconfig.AdminREST(ctx, bpav1.KeptHosts(hosts), cfg)
	if err != nil {
		return fmt.Errorf("cannot ask the cluster's API: %w", err)
	}
	o.logf("fetched %s from %s; API server %s", kubeconfig.AdminConfPath, master.Name, rc.Host)
	// The cluster's audit log tells its requests from every other admin client's.
	rc.UserAgent = UserAgent
	cs, err := o.newClusterClient(rc)
	if err != nil {
		return fmt.Errorf("client for the cluster at %s: %w", rc.Host, err)
	}
	d, err := Check(ctx, cs, applied, want)
	if err != nil {
		return err
	}
	pkgs, bySoftware, err := o.packages(ctx, c, p, bpav1.KeptHosts(hosts), cfg)
	if err != nil {
		return err
	}
	d.Fields = append(d.Fields, pkgs...)
	if len(bySoftware) > 0 {
		if d.Rerun == nil {
			d.Rerun = &stepio.DriftRerun{}
		}
		d.Rerun.Softwares = bySoftware
	}
	d.CheckedAt, d.Generation = metav1.NewTime(o.now()), applied.Generation
	for _, f := range d.Fields {
		o.logf("drift: %s", f)
	}
	o.logf("check-drift: %d nodes read, %d fields differ from what BPA applied", len(d.Nodes), len(d.Fields))
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return stepio.WriteOutput(o.out, data)
}

// packages compares the package pins of the cluster's Softwares (those whose last run
// succeeded) with what `dpkg-query -W` says on each host that has any: read-only, one SSH
// command a host. A host that cannot be asked is a line of its own. bySoftware are the
// lines each Software's rerun puts back (install-software installs what its items say).
func (o *options) packages(ctx context.Context, c client.Client, p *bpav1.Provisioning, hosts []bpav1.HostStatus, cfg sshexec.Config) (drift []string, bySoftware map[string][]string, err error) {
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return nil, nil, err
	}
	sws := &bpav1.SoftwareList{}
	if err := c.List(ctx, sws, client.InNamespace(p.Namespace), client.MatchingLabels{bpav1.ClusterLabel: cluster}); err != nil {
		return nil, nil, fmt.Errorf("listing the cluster's Softwares: %w", err)
	}
	type wanted struct {
		sw   string
		node software.Node
	}
	var all []wanted
	var targets []sshexec.Target
	for i := range sws.Items {
		nodes, why, err := clusterdrift.SoftwareNodes(&sws.Items[i], hosts)
		if err != nil {
			return nil, nil, err
		}
		if why != "" {
			o.logf("%s", why)
		}
		for _, n := range nodes {
			all = append(all, wanted{sws.Items[i].Name, n})
			if !slices.ContainsFunc(targets, func(t sshexec.Target) bool { return t.Name == n.Name }) {
				targets = append(targets, sshexec.Target{Name: n.Name, Addr: n.IP})
			}
		}
	}
	if len(targets) == 0 {
		return nil, nil, nil
	}
	installed, drift := o.installed(ctx, targets, cfg)
	for _, w := range all {
		have, ok := installed[w.node.Name]
		if !ok {
			continue // its line says why
		}
		lines, err := clusterdrift.Packages(w.sw, w.node, have)
		if err != nil {
			return nil, nil, err
		}
		drift = append(drift, lines...)
		if len(lines) > 0 {
			if bySoftware == nil {
				bySoftware = map[string][]string{}
			}
			bySoftware[w.sw] = append(bySoftware[w.sw], lines...)
		}
	}
	o.logf("packages: %d Softwares, %d hosts asked", len(sws.Items), len(targets))
	return drift, bySoftware, nil
}

// installed asks dpkg on each target what is installed; a host that cannot say is a line.
func (o *options) installed(ctx context.Context, targets []sshexec.Target, cfg sshexec.Config) (map[string]map[string]string, []string) {
	out, errs := sshexec.OnEach(ctx, targets, cfg, func(ctx context.Context, sc *sshexec.Client) (string, error) {
		b, err := sc.Output(ctx, software.QueryCommand())
		return string(b), err
	})
	installed := map[string]map[string]string{}
	var unread []string
	for i, t := range targets {
		err := errs[i]
		var have map[string]string
		if err == nil {
			have, err = software.ParseDpkgQuery([]byte(out[i]))
		}
		if err != nil {
			unread = append(unread, fmt.Sprintf("node %s: packages not read: %v", t.Name, err))
			continue
		}
		installed[t.Name] = have
	}
	return installed, unread
}

// appliedVars reads node_labels and node_taints from the vars file.
func (o *options) appliedVars() (clusterdrift.Applied, error) {
	data, err := os.ReadFile(o.extraVars)
	if err != nil {
		return clusterdrift.Applied{}, fmt.Errorf("--extra-vars: %w", err)
	}
	vars, err := inventory.ReadVars(data)
	if err != nil {
		return clusterdrift.Applied{}, err
	}
	return clusterdrift.AppliedFromVars(vars)
}

// Check reads the Nodes and kubeadm-config, two requests, and compares them with applied.
func Check(ctx context.Context, cs kubernetes.Interface, applied *bpav1.AppliedState, want clusterdrift.Applied) (*stepio.Drift, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	fields, rerun := clusterdrift.Nodes(nodes.Items, applied, want)
	d := &stepio.Drift{Fields: fields, Nodes: Readiness(nodes.Items)}
	if len(rerun) > 0 {
		d.Rerun = &stepio.DriftRerun{Provisioning: rerun}
	}
	data, err := clusterdrift.KubeadmConfig(ctx, cs)
	if err != nil {
		return nil, err
	}
	kubeadm, err := clusterdrift.Kubeadm(data, applied, "")
	if err != nil {
		return nil, err
	}
	for _, k := range kubeadm {
		d.Fields = append(d.Fields, "kube-system/"+clusterdrift.KubeadmConfigMap+": "+k)
	}
	return d, nil
}

// Readiness is every Node's Ready condition and when it last changed.
func Readiness(nodes []corev1.Node) []stepio.NodeReadiness {
	out := make([]stepio.NodeReadiness, 0, len(nodes))
	for _, n := range nodes {
		r := stepio.NodeReadiness{Name: n.Name}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				r.Ready = string(c.Status)
				if !c.LastTransitionTime.IsZero() {
					r.LastTransitionTime = c.LastTransitionTime.DeepCopy()
				}
			}
		}
		out = append(out, r)
	}
	return out
}
