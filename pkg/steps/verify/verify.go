// Package verify is `bpa step verify`: it proves the cluster kubespray built works before
// BPA publishes it, and hands its admin kubeconfig to publish-kubeconfig.
//
//  1. Fetch /etc/kubernetes/admin.conf from the first master (by name) over SSH, the host key
//     checked against the SSH Secret's known_hosts unless the CR opts out.
//  2. Rebuild it into a minimal kubeconfig (pkg/kubeconfig): the server pointed at that
//     master's IP, keeping scheme and port; the CA data; inline client certificate and key,
//     or token. The host may be compromised, so a file asking for more (a command to run,
//     a local file to read and send, a proxy, impersonation) is refused. Only the rebuilt
//     kubeconfig is used and staged.
//  3. With it, check that every host the run keeps is a registered, Ready Node running
//     --kubernetes-version's kubelet (when given), that no host it removed (Removing) is
//     still a Node, and that every kube-system pod is Running or Succeeded, polling until
//     --timeout. On timeout the step fails with the sorted list of what is wrong; a removed
//     host's Node still there fails it at once (kubespray deletes it within its run).
//  4. Stage the kubeconfig for publish-kubeconfig.
//  5. Read the expiry of the cluster's certificates (certs.go): the files kubeadm and
//     kubespray leave on each kept host, over SSH, and the chain the API server serves;
//     write them as the certificates output, which the controller mirrors into
//     status.certificates. What cannot be read is reported there, and does not fail the step.
//
// # Handing the kubeconfig over
//
// The kubeconfig is the cluster's root credential, so it only ever travels in Secrets:
//
//   - verify writes it to the staging Secret `<workflow-name>-admin-conf` (key `value`) in the
//     Workflow's namespace, with an ownerReference to the Workflow (name and UID, from Argo's
//     {{workflow.name}} and {{workflow.uid}}). Keyed by Workflow, two runs never see each
//     other's file; owned by the Workflow, the Secret is garbage-collected with it whatever
//     happens to the later steps (and the controller also deletes it by name when it
//     deletes a Workflow).
//   - publish-kubeconfig, the next step of the same Workflow, reads the staging Secret,
//     writes `<cluster>-kubeconfig` owned by the Provisioning, and deletes the staging Secret.
//
// The kubeconfig is never printed, never written to a file Argo collects, never put in an
// output parameter or artifact (those end up in the Workflow's status and the Argo UI), and
// error messages never quote it. Only its server URL, which is not secret, is logged. The
// step's service account needs create/update on Secrets in the namespace, which it has for
// publish-kubeconfig anyway.
package verify

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// maxReported bounds the list of problems in the failure message, which ends up in the CR's
// status and in a 4 KiB termination message.
const maxReported = 20

// Command returns `bpa step verify`.
func Command() *cobra.Command {
	o := options{logf: log.Printf, newClusterClient: func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) }}
	return stepcmd.Command(stepcmd.Step{
		Name:  "verify",
		Short: "Check the new cluster's nodes and kube-system pods, and stage its kubeconfig for publish-kubeconfig",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			o.cr.AddNameFlags(fs)
			fs.StringVar(&o.hostsFile, "hosts-file", stepio.In(stepio.HostsFile), "JSON list of the run's hosts ({name, roles, mac, ip, bareMetalHost})")
			fs.StringVar(&o.workflowName, "workflow-name", "", "name of the Workflow running this step ({{workflow.name}}); names the staging Secret")
			fs.StringVar(&o.workflowUID, "workflow-uid", "", "UID of that Workflow ({{workflow.uid}}); owns the staging Secret")
			fs.StringVar(&o.kubernetesVersion, "kubernetes-version", "", "the Kubernetes version every Node's kubelet must report (1.32.5 or v1.32.5); empty: not checked")
			fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the nodes and pods before failing")
			fs.BoolVar(&o.afterUpgrade, "after-upgrade", false, "the run upgraded the cluster: a node not Ready at --kubernetes-version for --upgrade-grace fails the step at once (NodeNotUpgraded)")
			fs.DurationVar(&o.upgradeGrace, "upgrade-grace", 90*time.Second, "how long, after an upgrade, a node may stay behind (not Ready, or another kubelet) before the step fails")
			fs.DurationVar(&o.pollInterval, "poll-interval", 10*time.Second, "time between checks")
			fs.StringVar(&o.certificatesFile, "certificates-file", stepio.Out(stepio.CertificatesFile), "where to write the cluster's certificates and their expiry (JSON), once the checks pass")
			o.ssh.AddFlags(fs)
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	cr                        stepio.CR
	hostsFile                 string
	certificatesFile          string
	kubernetesVersion         string
	workflowName, workflowUID string
	timeout, pollInterval     time.Duration
	afterUpgrade              bool
	upgradeGrace              time.Duration
	ssh                       sshexec.Flags
	flags                     *pflag.FlagSet

	logf             func(format string, args ...any)
	newClusterClient func(*rest.Config) (kubernetes.Interface, error)
}

func (o *options) run(ctx context.Context, c client.Client) error {
	// Without both, the staging Secret would have no owner and outlive the run.
	if o.workflowName == "" || o.workflowUID == "" {
		return errors.New("--workflow-name and --workflow-uid are required: they own the staging Secret the kubeconfig is handed over in")
	}
	if errs := validation.IsDNS1123Subdomain(kubeconfig.StagingSecretName(o.workflowName)); len(errs) > 0 {
		return fmt.Errorf("--workflow-name %q: %s", o.workflowName, errs[0])
	}
	kubelet, err := KubeletVersion(o.kubernetesVersion)
	if err != nil {
		return err
	}
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
	hosts, err := stepio.ReadHosts(o.hostsFile)
	if err != nil {
		return err
	}
	master, err := kubeconfig.FirstMaster(bpav1.KeptHosts(hosts))
	if err != nil {
		return err
	}

	sshCfg := o.ssh.Config(o.flags, p.Spec.SSH)
	sshCfg.Logf = o.logf
	conf, err := kubeconfig.FetchAdmin(ctx, master, sshCfg)
	if err != nil {
		return err
	}
	rc, err := kubeconfig.RESTConfig(conf)
	if err != nil {
		return err
	}
	o.logf("fetched %s from %s; API server %s", kubeconfig.AdminConfPath, master.Name, rc.Host)
	rc.Timeout = 30 * time.Second
	cs, err := o.newClusterClient(rc)
	if err != nil {
		return fmt.Errorf("client for the new cluster at %s: %w", rc.Host, err)
	}
	if err := o.waitHealthy(ctx, cs, hosts, kubelet); err != nil {
		return err
	}
	var nodeReader []byte
	if p.Spec.Remediation != nil {
		// The controller's only credential for the cluster: it reads Nodes, nothing else.
		if nodeReader, err = kubeconfig.EnsureNodeReader(ctx, cs, rc); err != nil {
			return fmt.Errorf("the node-reader account remediation reads Nodes with: %w", err)
		}
	}
	if err := o.stage(ctx, c, p, cluster, conf, nodeReader); err != nil {
		return err
	}
	return o.checkCertificates(ctx, hosts, sshCfg, rc, master.Name)
}

// waitHealthy polls Check until nothing is missing or ctx ends, then reports the last
// findings.
func (o *options) waitHealthy(ctx context.Context, cs kubernetes.Interface, hosts []bpav1.HostStatus, kubelet string) error {
	interval := o.pollInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	since := map[string]time.Time{} // after an upgrade: when each node behind was first seen so
	for {
		missing, err := Check(ctx, cs, hosts, kubelet)
		// kubespray deletes a removed node's Node within its run (remove-node's post-remove),
		// so one still registered now will not leave by waiting: the removal did nothing (a
		// name the inventory does not match runs every play on no host and exits 0). Fail
		// at once, naming it; the node stays in status.applied, so the next run removes it.
		if lingering := Lingering(missing); len(lingering) > 0 {
			return fmt.Errorf("removal did not take effect: %s", Summarize(lingering))
		}
		if err == nil && len(missing) == 0 {
			expected := bpav1.KeptHosts(hosts)
			for _, h := range expected {
				o.logf("node %s (%s, %s): Ready", h.Name, h.IP, strings.Join(h.Roles, ","))
			}
			for _, h := range hosts {
				if h.Removing {
					o.logf("node %s: removed", h.Name)
				}
			}
			what := fmt.Sprintf("all %d nodes Ready", len(expected))
			if kubelet != "" {
				what += " with kubelet " + kubelet
			}
			o.logf("%s and kube-system pods running", what)
			return nil
		}
		if err != nil {
			missing = append(missing, err.Error())
		}
		behind := o.behind(missing, kubelet, since)
		if late := Late(behind, since, o.upgradeGrace, time.Now()); len(late) > 0 {
			return NotUpgraded(late, kubelet)
		}
		o.logf("cluster not ready yet: %s", Summarize(missing))
		select {
		case <-ctx.Done():
			if len(behind) > 0 {
				return NotUpgraded(behind, kubelet)
			}
			return fmt.Errorf("cluster not healthy after %v: %s", o.timeout, Summarize(missing))
		case <-time.After(interval):
		}
	}
}

// stage writes the kubeconfig to the staging Secret, owned by the Workflow: a create, or
// for a retried Workflow a merge patch of the one it made before. Neither reads a Secret, so
// the step's account may create and patch Secrets but read none (and write only BPA's
// own: see config/admission/step-writes.yaml).
func (o *options) stage(ctx context.Context, c client.Client, p *bpav1.Provisioning, cluster string, conf, nodeReader []byte) error {
	s := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.cr.Namespace, Name: kubeconfig.StagingSecretName(o.workflowName),
			Labels: map[string]string{
				bpav1.ClusterNameLabel:      cluster,
				bpav1.ProvisioningNameLabel: p.Name,
				bpav1.ManagedByLabel:        bpav1.ManagedByValue,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "argoproj.io/v1alpha1",
				Kind:       "Workflow",
				Name:       o.workflowName,
				UID:        types.UID(o.workflowUID),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{kubeconfig.SecretKey: conf},
	}
	if nodeReader != nil {
		s.Data[kubeconfig.NodeReaderKey] = nodeReader
	}
	err := c.Create(ctx, s.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		err = c.Patch(ctx, s, client.Merge)
	}
	if err != nil {
		// The API error names the Secret, never its data.
		return fmt.Errorf("staging the kubeconfig in Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	o.logf("kubeconfig staged in Secret %s/%s for publish-kubeconfig", s.Namespace, s.Name)
	return nil
}

// KubeletVersion is a Kubernetes version as a Node reports its kubelet's (v1.32.5), from
// either form kubespray releases take; "" stays "" (nothing to check).
func KubeletVersion(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	kv, err := kubespray.ParseKubeVersion(v)
	if err != nil {
		return "", fmt.Errorf("--kubernetes-version: %w", err)
	}
	return "v" + kv.String(), nil
}

// Check lists what keeps the cluster from being what the run leaves, sorted: expected hosts
// with no Node, Nodes not Ready or (kubelet set) running another kubelet, Nodes of hosts the
// run removed, kube-system pods neither Running nor Succeeded. An empty list means healthy.
// An error means the API server could not be asked.
//
// A host's Node is the one of the same name (kubespray names nodes after the inventory),
// or failing that the one whose InternalIP is the host's IP, in case the node registered
// under its own hostname. A Node of no host BPA lists is not BPA's to judge (one joined by
// hand, say), so it fails nothing.
func Check(ctx context.Context, cs kubernetes.Interface, hosts []bpav1.HostStatus, kubelet string) ([]string, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	byIP := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		byName[n.Name] = n
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				byIP[a.Address] = n
			}
		}
	}
	var missing []string
	kept := map[string]bool{}
	for _, h := range bpav1.KeptHosts(hosts) {
		n := byName[h.Name]
		if n == nil && h.IP != "" {
			n = byIP[h.IP]
		}
		if n == nil {
			who := h.Name
			if h.IP != "" {
				who += " (" + h.IP + ")"
			}
			missing = append(missing, "node "+who+": not registered")
			continue
		}
		if why := notReady(n); why != "" {
			missing = append(missing, fmt.Sprintf("node %s: %s", n.Name, why))
		}
		if got := n.Status.NodeInfo.KubeletVersion; kubelet != "" && got != kubelet {
			missing = append(missing, fmt.Sprintf("node %s: kubelet %q, want %s", n.Name, got, kubelet))
		}
		kept[n.Name] = true
	}
	for _, h := range hosts {
		n := byName[h.Name]
		// A removed host's address may already be a kept host's: that Node is not its.
		if n == nil && h.IP != "" && byIP[h.IP] != nil && !kept[byIP[h.IP].Name] {
			n = byIP[h.IP]
		}
		if h.Removing && n != nil {
			missing = append(missing, fmt.Sprintf("node %s: %s", n.Name, stillRegistered))
		}
	}

	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing kube-system pods: %w", err)
	}
	running, waiting := 0, 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue // on its way out; its replacement is what counts
		}
		switch p.Status.Phase {
		case corev1.PodRunning, corev1.PodSucceeded:
			running++
		default:
			waiting++
			missing = append(missing, fmt.Sprintf("pod kube-system/%s: %s", p.Name, podState(&p)))
		}
	}
	// A control plane always runs pods in kube-system; none at all means it is not up yet.
	if running == 0 && waiting == 0 {
		missing = append(missing, "kube-system: no pods running yet")
	}
	sort.Strings(missing)
	return missing, nil
}

// behind picks, after an upgrade to kubelet, the nodes Check found not Ready, not
// registered or running another kubelet, and keeps since (when each was first seen behind)
// up to date; nil when the run did not upgrade.
func (o *options) behind(problems []string, kubelet string, since map[string]time.Time) []string {
	if !o.afterUpgrade || kubelet == "" {
		return nil
	}
	var out []string
	now := time.Now()
	seen := map[string]bool{}
	for _, p := range problems {
		rest, ok := strings.CutPrefix(p, "node ")
		if !ok || strings.HasSuffix(p, ": "+stillRegistered) {
			continue
		}
		name, _, _ := strings.Cut(rest, ":")
		name, _, _ = strings.Cut(name, " (")
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, p)
		if _, ok := since[name]; !ok {
			since[name] = now
		}
	}
	for name := range since {
		if !seen[name] {
			delete(since, name) // it came back
		}
	}
	return out
}

// Late are the findings of behind whose node has been behind for grace or longer at now.
func Late(behind []string, since map[string]time.Time, grace time.Duration, now time.Time) []string {
	var out []string
	for _, p := range behind {
		name, _, _ := strings.Cut(strings.TrimPrefix(p, "node "), ":")
		name, _, _ = strings.Cut(name, " (")
		if t, ok := since[name]; ok && now.Sub(t) >= grace {
			out = append(out, p)
		}
	}
	return out
}

// NotUpgraded is the step's error for nodes an upgrade left behind: it names them and says
// what to do. It starts with NodeNotUpgraded and a colon, the CR's Stalled reason; the
// template does not retry it.
func NotUpgraded(behind []string, kubelet string) error {
	return fmt.Errorf("%s: after the upgrade, %s did not come back Ready at kubelet %s: %s. The upgrade stopped here and is not retried by itself: "+
		"look at the node (journalctl -u kubelet on it; kubectl describe node), bring its kubelet to %s, then `argo retry` the Workflow or set the %s annotation to a new value",
		bpav1.ReasonNodeNotUpgraded, plural(len(behind), "a node", fmt.Sprintf("%d nodes", len(behind))), kubelet, Summarize(behind), kubelet, bpav1.RerunAnnotation)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// stillRegistered is Check's finding for a removed host whose Node is still there.
const stillRegistered = "still registered, but the run removed it"

// Lingering picks out of Check's findings the removed hosts whose Node is still there.
func Lingering(problems []string) []string {
	var out []string
	for _, p := range problems {
		if strings.HasSuffix(p, ": "+stillRegistered) {
			out = append(out, p)
		}
	}
	return out
}

func notReady(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		return "not Ready" + detail(c.Reason, c.Message)
	}
	return "not Ready (no Ready condition yet)"
}

func podState(p *corev1.Pod) string {
	state := string(p.Status.Phase)
	if state == "" {
		state = "Unknown"
	}
	// The waiting reason (ImagePullBackOff, CrashLoopBackOff, ...) is what an operator needs.
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return state + detail(w.Reason, "")
		}
	}
	return state + detail(p.Status.Reason, "")
}

func detail(reason, message string) string {
	s := strings.TrimSpace(strings.Join(strings.Fields(reason+" "+message), " "))
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// Summarize joins problems into one line, at most maxReported of them.
func Summarize(problems []string) string {
	if len(problems) <= maxReported {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; ... and %d more", strings.Join(problems[:maxReported], "; "), len(problems)-maxReported)
}
