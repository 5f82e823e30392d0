package kubeconfig

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Names and types of the Secrets the kubeconfig travels in. See pkg/steps/verify for the
// hand-over between verify and publish-kubeconfig.
const (
	// SecretKey is the key holding the kubeconfig, in both Secrets (Cluster API's convention).
	SecretKey = "value"
	// PublishedSecretType is Cluster API's type for a cluster's kubeconfig Secret.
	PublishedSecretType corev1.SecretType = "cluster.x-k8s.io/secret"
	// WorkflowAnnotation on the published Secret names the Workflow that published it, so a
	// retried publish-kubeconfig can tell its own earlier work from a stale Secret.
	WorkflowAnnotation = "bpa.akraino.org/workflow"
)

// StagingSecretName is the Secret verify leaves for publish-kubeconfig in the same Workflow.
// The controller deletes it by this name too when the Workflow goes.
func StagingSecretName(workflow string) string { return workflow + "-admin-conf" }

// PublishedSecretName is the cluster's kubeconfig Secret, `<cluster>-kubeconfig`.
func PublishedSecretName(cluster string) string { return cluster + "-kubeconfig" }

// NodeReaderSecretName is `<cluster>-node-reader`: a kubeconfig of the cluster whose token
// may only get, list and watch Nodes, which the controller's remediation reads them with
// (docs/remediation.md).
func NodeReaderSecretName(cluster string) string { return cluster + "-node-reader" }

// addressConfigMapSuffix follows the cluster's name in its address ConfigMap's.
const addressConfigMapSuffix = "-configmap"

// AddressConfigMapName is the ConfigMap of node addresses, `<cluster>-configmap`.
func AddressConfigMapName(cluster string) string { return cluster + addressConfigMapSuffix }

// AddressConfigMapCluster is the cluster whose address ConfigMap is named name, and false
// for a name that is no address ConfigMap's.
func AddressConfigMapCluster(name string) (string, bool) {
	return strings.CutSuffix(name, addressConfigMapSuffix)
}
