// Command agent is what the stand-in kubespray's Ansible tasks run for the effects kubespray's
// roles have on the application cluster, which no machine here can really produce (there is
// no kubelet, kubeadm or container runtime on a simulated host). Ansible decides where and
// when each runs: the tasks delegate it to the first control-plane host over SSH, where it
// reads /etc/kubernetes/admin.conf as kubespray's kubectl tasks do, so a host without that
// file fails the task as a real run would.
//
//	agent join       --kubeconfig F --node N --address A --version V [--control-plane] [--worker] [--labels JSON] [--taints JSON]
//	                 prints joined|reconfigured
//	agent apiserver  --kubeconfig F --node N                           the kube-system pod of kubeadm init
//	agent upgrade    --kubeconfig F --node N --version V               prints the version it replaced
//	agent remove     --kubeconfig F --node N [--ungraceful]            prints what it did
//	agent reset      --kubeconfig F --node N                           deletes the Node and its pods
//	agent kubeadm-config --kubeconfig F --version V [--cluster-name C --dns-domain D --service-subnet S --pod-subnet P]
//	                 kubeadm init's (all flags) or upgrade apply's (--version only) kube-system/kubeadm-config
//	agent downloads  --release R --kube K --arch M --vars JSON         prints "ca url" per line
//	agent certs      --node N [--control-plane] [--validity D]         writes the node's certificates (simcerts)
//	agent kubeadm    [--validity D] certs check-expiration|renew all  kubeadm's certs commands on the node's own (simcerts)
//
// It holds no rule of kubespray's: what a run may do is decided by the playbooks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/clusterdrift"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent join|apiserver|upgrade|remove|reset|downloads [flags]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	out, err := run(ctx, os.Args[1], os.Args[2:])
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
	if out != "" {
		fmt.Println(out)
	}
}

type flags struct {
	kubeconfig, node, address, version string
	release, kube, arch, vars          string
	clusterName, dnsDomain             string
	serviceSubnet, podSubnet           string
	ungraceful, controlPlane, worker   bool
	validity, labels, taints           string
}

func run(ctx context.Context, cmd string, args []string) (string, error) {
	var f flags
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "/etc/kubernetes/admin.conf", "")
	fs.StringVar(&f.node, "node", "", "")
	fs.StringVar(&f.address, "address", "", "")
	fs.StringVar(&f.version, "version", "", "")
	fs.StringVar(&f.release, "release", "", "")
	fs.StringVar(&f.kube, "kube", "", "")
	fs.StringVar(&f.arch, "arch", "", "")
	fs.StringVar(&f.vars, "vars", "{}", "")
	fs.BoolVar(&f.ungraceful, "ungraceful", false, "")
	fs.BoolVar(&f.controlPlane, "control-plane", false, "")
	fs.BoolVar(&f.worker, "worker", false, "")
	fs.StringVar(&f.labels, "labels", "{}", "")
	fs.StringVar(&f.taints, "taints", "[]", "")
	fs.StringVar(&f.validity, "validity", "", "")
	fs.StringVar(&f.clusterName, "cluster-name", "", "")
	fs.StringVar(&f.dnsDomain, "dns-domain", "", "")
	fs.StringVar(&f.serviceSubnet, "service-subnet", "", "")
	fs.StringVar(&f.podSubnet, "pod-subnet", "", "")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	switch cmd {
	case "downloads":
		return downloads(f)
	case "certs":
		return certs(f)
	case "kubeadm":
		return kubeadmCerts(f, fs.Args())
	}
	data, err := os.ReadFile(f.kubeconfig)
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return "", err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	switch cmd {
	case "join":
		return join(ctx, kc, f)
	case "apiserver":
		return "", apiserverPod(ctx, kc, f.node)
	case "upgrade":
		return upgrade(ctx, kc, f)
	case "remove":
		return remove(ctx, kc, f)
	case "kubeadm-config":
		return "", kubeadmConfig(ctx, kc, f)
	case "reset":
		if _, err := deletePods(ctx, kc, f.node, false); err != nil {
			return "", err
		}
		if err := kc.CoreV1().Nodes().Delete(ctx, f.node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return "", err
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown command %q", cmd)
}

// join registers the node as a Ready Node at its address running version (as the kubelet
// kubeadm join starts would) and says whether it was new. A new Node gets the taints of
// --taints (kubespray's node_taints, the kubelet's --register-with-taints) and, on a
// control-plane node, kubeadm's role label and, when it is no worker (kube_node), kubeadm's
// control-plane taint: kubeadm sets these once, at init or join (its mark-control-plane
// phase), and no later run of kubespray v2.28.0 sets them again. Every run labels it with
// --labels (node_labels: roles/kubernetes/node-label/tasks/main.yml, "Set label to node",
// kubectl label --overwrite=true on every run of cluster.yml), and the kubelet reports
// kube_version (roles/kubernetes/node/tasks/install.yml, "Install | Copy kubelet binary from
// download dir", then the kubelet's restart).
func join(ctx context.Context, kc kubernetes.Interface, f flags) (string, error) {
	nodes := kc.CoreV1().Nodes()
	labels, taints, err := joinLabels(f)
	if err != nil {
		return "", err
	}
	registration := maps.Clone(labels)
	if f.controlPlane {
		registration[clusterdrift.ControlPlaneLabel] = ""
	}
	_, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: f.node, Labels: registration}, Spec: corev1.NodeSpec{Taints: taints}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("registering node %s: %w", f.node, err)
	}
	did := "joined"
	if err != nil {
		did = "reconfigured"
	}
	// The application cluster's node-lifecycle controller and the simulated kubelets write
	// Nodes too: a conflict is read again, as kubectl's retries do.
	return did, retry.RetryOnConflict(retry.DefaultRetry, func() error { return labelAndReady(ctx, nodes, f, labels) })
}

// labelAndReady labels the Node and posts it Ready at its address and version.
func labelAndReady(ctx context.Context, nodes corev1client.NodeInterface, f flags, labels map[string]string) error {
	node, err := nodes.Get(ctx, f.node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	maps.Copy(node.Labels, labels)
	if node, err = nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("labelling node %s: %w", f.node, err)
	}
	now := metav1.Now()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: f.address}}
	node.Status.NodeInfo.KubeletVersion = f.version
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking node %s Ready: %w", f.node, err)
	}
	return nil
}

// joinLabels are the labels every run gives the node (node_labels) and the taints its
// registration gives it (see join).
func joinLabels(f flags) (map[string]string, []corev1.Taint, error) {
	labels := map[string]string{}
	if err := json.Unmarshal([]byte(f.labels), &labels); err != nil {
		return nil, nil, fmt.Errorf("--labels: %w", err)
	}
	var specs []string
	if err := json.Unmarshal([]byte(f.taints), &specs); err != nil {
		return nil, nil, fmt.Errorf("--taints: %w", err)
	}
	var taints []corev1.Taint
	for _, s := range specs {
		t, err := clusterdrift.ParseTaint(s)
		if err != nil {
			return nil, nil, err
		}
		taints = append(taints, t)
	}
	if f.controlPlane && !f.worker {
		taints = append(taints, corev1.Taint{Key: clusterdrift.ControlPlaneLabel, Effect: corev1.TaintEffectNoSchedule})
	}
	return labels, taints, nil
}

// apiserverPod runs the kube-apiserver pod on the node: a control plane always has a running
// kube-system pod, which BPA's verify step looks for.
func apiserverPod(ctx context.Context, kc kubernetes.Interface, node string) error {
	pods := kc.CoreV1().Pods(metav1.NamespaceSystem)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + node, Namespace: metav1.NamespaceSystem},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver"}}},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Phase = corev1.PodRunning
	_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

// upgrade makes the Node report the new kubelet and prints the one it replaced.
func upgrade(ctx context.Context, kc kubernetes.Interface, f flags) (string, error) {
	n, err := kc.CoreV1().Nodes().Get(ctx, f.node, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", f.node, err)
	}
	was := n.Status.NodeInfo.KubeletVersion
	n.Status.NodeInfo.KubeletVersion = f.version
	if _, err := kc.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("upgrading node %s: %w", f.node, err)
	}
	return was, nil
}

// kubeadmConfig writes the ClusterConfiguration of kube-system/kubeadm-config as kubeadm
// does, from the variables kubespray templates into it (roles/kubernetes/control-plane/
// templates/kubeadm-config.*.yaml.j2): all of it at init, only kubernetesVersion at upgrade
// apply (--version alone). The ConfigMap is the site's application apiserver's, which every
// simulated cluster shares: the last init or upgrade wins.
func kubeadmConfig(ctx context.Context, kc kubernetes.Interface, f flags) error {
	cms := kc.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	cm, err := cms.Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: metav1.NamespaceSystem}}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	var c map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &c); err != nil || c == nil || f.clusterName != "" {
		c = map[string]any{"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration", "clusterName": f.clusterName,
			"networking": map[string]any{"dnsDomain": f.dnsDomain, "serviceSubnet": f.serviceSubnet, "podSubnet": f.podSubnet}}
	}
	c["kubernetesVersion"] = f.version
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	cm.Data = map[string]string{"ClusterConfiguration": string(data)}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// remove cordons and drains the node (its pods evicted, as kubectl drain does, so a
// disruption budget can refuse), then deletes its Node; --ungraceful deletes the pods
// outright without cordoning, as the pod garbage collector does for a dead node.
func remove(ctx context.Context, kc kubernetes.Interface, f flags) (string, error) {
	nodes := kc.CoreV1().Nodes()
	_, err := nodes.Get(ctx, f.node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "not registered: nothing to drain or delete", nil
	case err != nil:
		return "", err
	}
	did := "removed ungracefully, not drained"
	if !f.ungraceful {
		if _, err := nodes.Patch(ctx, f.node, types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			return "", fmt.Errorf("cordoning node %s: %w", f.node, err)
		}
	}
	n, err := deletePods(ctx, kc, f.node, !f.ungraceful)
	if err != nil {
		return "", err
	}
	if !f.ungraceful {
		did = fmt.Sprintf("cordoned, drained %d pods", n)
	}
	if err := nodes.Delete(ctx, f.node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("deleting node %s: %w", f.node, err)
	}
	return did, nil
}

// deletePods removes the pods bound to node, evicted or deleted, with grace period 0: no
// kubelet runs them, so none would confirm their end.
func deletePods(ctx context.Context, kc kubernetes.Interface, node string, evict bool) (int, error) {
	pods, err := kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, err
	}
	now := metav1.DeleteOptions{GracePeriodSeconds: new(int64)}
	for _, pod := range pods.Items {
		c := kc.CoreV1().Pods(pod.Namespace)
		if evict {
			err = c.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}, DeleteOptions: &now})
		} else {
			err = c.Delete(ctx, pod.Name, now)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("draining node %s: pod %s/%s: %w", node, pod.Namespace, pod.Name, err)
		}
	}
	return len(pods.Items), nil
}

// downloads prints what kubespray's download role and containerd fetch on a host of arch at
// an offline site, one "ca url" line each: every file of the release from files_repo ("-":
// the host's system trust store, as get_url uses), then every image manifest through the
// containerd mirror of its registry (containerd_registries_mirrors, override_path), with the
// mirror's ca file. The list of files and images is BPA's record of the release
// (kubespray.DownloadsFor); which hosts fetch, and whether they can, is the playbooks'.
func downloads(f flags) (string, error) {
	var vars struct {
		FilesRepo string `json:"files_repo"`
		Mirrors   []struct {
			Prefix  string `json:"prefix"`
			Mirrors []struct {
				Host string  `json:"host"`
				CA   *string `json:"ca"`
			} `json:"mirrors"`
		} `json:"containerd_registries_mirrors"`
	}
	if err := json.Unmarshal([]byte(f.vars), &vars); err != nil {
		return "", fmt.Errorf("--vars: %w", err)
	}
	d, err := kubespray.DownloadsFor(f.release, f.kube, kubespray.ImageArch(f.arch))
	if err != nil {
		return "", err
	}
	var lines []string
	for _, image := range d.Images {
		ref, err := name.ParseReference(image)
		if err != nil {
			return "", fmt.Errorf("image %s: %w", image, err)
		}
		registry := ref.Context().RegistryStr()
		if registry == name.DefaultRegistry {
			registry = "docker.io"
		}
		line := ""
		for _, m := range vars.Mirrors {
			if m.Prefix != registry || len(m.Mirrors) == 0 {
				continue
			}
			ca := "-"
			if m.Mirrors[0].CA != nil {
				ca = *m.Mirrors[0].CA
			}
			line = ca + " " + m.Mirrors[0].Host + "/" + ref.Context().RepositoryStr() + "/manifests/" + ref.Identifier()
			break
		}
		if line == "" {
			return "", fmt.Errorf("image %s: containerd_registries_mirrors has no mirror for %s", image, registry)
		}
		lines = append(lines, line)
	}
	for _, file := range d.Files {
		lines = append(lines, "- "+vars.FilesRepo+"/"+file)
	}
	if len(lines) == 0 {
		return "", errors.New("the release downloads nothing")
	}
	return strings.Join(lines, "\n"), nil
}

// certs writes the certificates kubeadm init/join and the kubelet's TLS bootstrap leave on
// the node, where none are yet: like kubeadm, a second run keeps the ones there. The leaves
// last --validity (a Go duration; empty: a year, kubeadm's).
func certs(f flags) (string, error) {
	validity, err := parseValidity(f.validity)
	if err != nil {
		return "", err
	}
	files, err := simcerts.Files(f.node, f.controlPlane, validity, time.Now())
	if err != nil {
		return "", err
	}
	written := 0
	for path, data := range files {
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return "", err
		}
		written++
	}
	return fmt.Sprintf("%d files written", written), nil
}

// kubeadmCerts is what `kubeadm certs check-expiration` and `kubeadm certs renew all` do to a
// control-plane node's certificates (simcerts.Check, simcerts.Renew): the renewed leaves last
// --validity, as kubeadm's last its own. Like kubeadm, both fail where kubeadm's folder,
// a CA or a leaf is missing.
func kubeadmCerts(f flags, args []string) (string, error) {
	validity, err := parseValidity(f.validity)
	if err != nil {
		return "", err
	}
	var lines []string
	switch strings.Join(args, " ") {
	case "certs check-expiration":
		certs, err := simcerts.Check(simcerts.CertDir)
		if err != nil {
			return "", fmt.Errorf("[check-expiration] %w", err)
		}
		lines = append(lines, "CERTIFICATE                EXPIRES                  CERTIFICATE AUTHORITY")
		for _, c := range certs {
			lines = append(lines, fmt.Sprintf("%-26s %-24s %s", c.Name, c.NotAfter.UTC().Format("Jan 02, 2006 15:04 MST"), c.CA))
		}
	case "certs renew all":
		renewed, err := simcerts.Renew(simcerts.CertDir, validity, time.Now())
		if err != nil {
			return "", fmt.Errorf("[renew] %w", err)
		}
		for _, r := range renewed {
			lines = append(lines, fmt.Sprintf("certificate %s renewed", filepath.Base(r.File)))
		}
		lines = append(lines, "Done renewing certificates. You must restart the kube-apiserver, kube-controller-manager, kube-scheduler and etcd, so that they can use the new certificates.")
	default:
		return "", fmt.Errorf("kubeadm %q is not simulated (certs check-expiration, certs renew all)", strings.Join(args, " "))
	}
	return strings.Join(lines, "\n"), nil
}

// parseValidity is --validity: a Go duration; empty is kubeadm's year.
func parseValidity(s string) (time.Duration, error) {
	if s == "" {
		return simcerts.DefaultValidity, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--validity: %w", err)
	}
	return d, nil
}
