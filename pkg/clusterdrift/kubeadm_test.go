package clusterdrift

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

const kubeadmYAML = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: cluster.local
kubernetesVersion: v1.31.4
networking:
  dnsDomain: cluster.local
  serviceSubnet: 10.233.0.0/18
  podSubnet: 10.233.64.0/18
`

func TestKubeadm(t *testing.T) {
	applied := &bpav1.AppliedState{KubernetesVersion: "1.31.4", Immutable: map[string]string{
		"cluster_name": "cluster.local", "dns_domain": "cluster.local", "kube_service_addresses": "10.233.0.0/18", "kube_pods_subnet": "10.233.64.0/18"}}
	drift, err := Kubeadm(kubeadmYAML, applied, "1.32.5")
	require.NoError(t, err)
	assert.Empty(t, drift)

	changed := strings.NewReplacer("v1.31.4", "v1.32.0", "10.233.64.0/18", "10.244.0.0/16").Replace(kubeadmYAML)
	drift, err = Kubeadm(changed, applied, "1.32.5")
	require.NoError(t, err)
	assert.Equal(t, []string{`kubernetesVersion is "1.32.0", BPA applied "1.31.4"`, `networking.podSubnet is "10.244.0.0/16", BPA applied "10.233.64.0/18"`}, drift)

	// kubeadm-config at the upgrade's target: an upgrade that stopped part way.
	drift, err = Kubeadm(changed, applied, "v1.32.0")
	require.NoError(t, err)
	assert.Equal(t, []string{`networking.podSubnet is "10.244.0.0/16", BPA applied "10.233.64.0/18"`}, drift)

	// What BPA has not recorded (a cluster from before it kept immutable values) is not compared.
	drift, err = Kubeadm(changed, &bpav1.AppliedState{KubernetesVersion: "1.32.0"}, "1.33.1")
	require.NoError(t, err)
	assert.Empty(t, drift)

	_, err = Kubeadm("kubernetesVersion: [", applied, "")
	assert.ErrorContains(t, err, "not kubeadm's ClusterConfiguration")
}

func TestKubeadmConfig(t *testing.T) {
	_, err := KubeadmConfig(context.Background(), fake.NewClientset())
	assert.ErrorContains(t, err, "kube-system/kubeadm-config not found")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: KubeadmConfigMap, Namespace: "kube-system"}, Data: map[string]string{"ClusterConfiguration": kubeadmYAML}}
	data, err := KubeadmConfig(context.Background(), fake.NewClientset(cm))
	require.NoError(t, err)
	assert.Equal(t, kubeadmYAML, data)
}
