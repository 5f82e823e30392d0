// Package clusterdrift compares a live application cluster with what BPA applied to it
// (status.applied and the vars file render-inventory writes): kubeadm's ClusterConfiguration,
// and the Nodes (the set, kubelet versions, roles, the labels and taints BPA applied). It is
// pure but for KubeadmConfig's one read; the preflight and check-drift steps share it.
package clusterdrift

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The kubeadm-config ConfigMap kubeadm writes, and its key.
const (
	KubeadmConfigMap = "kubeadm-config"
	clusterConfigKey = "ClusterConfiguration"
)

// clusterConfiguration holds the fields of kubeadm's ClusterConfiguration that kubespray
// fills from the variables BPA sets (roles/kubernetes/control-plane/templates/kubeadm-config.*.yaml.j2).
type clusterConfiguration struct {
	KubernetesVersion string `json:"kubernetesVersion"`
	ClusterName       string `json:"clusterName"`
	Networking        struct {
		DNSDomain     string `json:"dnsDomain"`
		ServiceSubnet string `json:"serviceSubnet"`
		PodSubnet     string `json:"podSubnet"`
	} `json:"networking"`
}

// Kubeadm compares kubeadm's ClusterConfiguration (the kubeadm-config ConfigMap's) with what
// BPA applied: the Kubernetes release, and the values of the kubespray variables BPA sets
// that kubeadm keeps (status.applied.immutable; one it has not recorded is not compared).
// Each difference means the cluster was changed behind BPA's back. The release may also be
// target's (empty: none), the one an upgrade leads to: an upgrade that stopped part way
// (kubeadm upgrade apply ran, a node did not come back) leaves it there until verify passes.
func Kubeadm(data string, applied *bpav1.AppliedState, target string) ([]string, error) {
	var c clusterConfiguration
	if err := yaml.Unmarshal([]byte(data), &c); err != nil {
		return nil, fmt.Errorf("kube-system/%s: %s is not kubeadm's ClusterConfiguration: %w", KubeadmConfigMap, clusterConfigKey, err)
	}
	var drift []string
	differ := func(field, got, want string) {
		if want != "" && got != want {
			drift = append(drift, fmt.Sprintf("%s is %q, BPA applied %q", field, got, want))
		}
	}
	if got := strings.TrimPrefix(c.KubernetesVersion, "v"); applied.KubernetesVersion != "" && (target == "" || got != strings.TrimPrefix(target, "v")) {
		differ("kubernetesVersion", got, strings.TrimPrefix(applied.KubernetesVersion, "v"))
	}
	im := applied.Immutable
	differ("clusterName", c.ClusterName, im["cluster_name"])
	differ("networking.dnsDomain", c.Networking.DNSDomain, im["dns_domain"])
	differ("networking.serviceSubnet", c.Networking.ServiceSubnet, im["kube_service_addresses"])
	differ("networking.podSubnet", c.Networking.PodSubnet, im["kube_pods_subnet"])
	return drift, nil
}

// KubeadmConfig reads the ClusterConfiguration from the kubeadm-config ConfigMap.
func KubeadmConfig(ctx context.Context, cs kubernetes.Interface) (string, error) {
	cm, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, KubeadmConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("kube-system/%s not found: kubeadm writes it at init and kubespray's upgrade reads it; restore it (kubeadm init phase upload-config kubeadm) before upgrading", KubeadmConfigMap)
	}
	if err != nil {
		return "", fmt.Errorf("reading kube-system/%s: %w", KubeadmConfigMap, err)
	}
	data, ok := cm.Data[clusterConfigKey]
	if !ok {
		return "", fmt.Errorf("kube-system/%s has no %s", KubeadmConfigMap, clusterConfigKey)
	}
	return data, nil
}
