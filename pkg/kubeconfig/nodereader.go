package kubeconfig

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// NodeReader is the account, in the application cluster's kube-system, whose token the
// controller reads the cluster's Nodes with (graded remediation, docs/remediation.md), and
// the name of its ClusterRole and binding.
const NodeReader = "bpa-node-reader"

// NodeReaderKey is the staging Secret's key for the node-reader kubeconfig, which
// publish-kubeconfig publishes as NodeReaderSecretName.
const NodeReaderKey = "node-reader"

// NodeReaderTokenSeconds is how long a node-reader token lasts: a year. Every verify (each
// run of the spec) issues a new one; a cluster not run for a year shows NodesUnread.
const NodeReaderTokenSeconds = 365 * 24 * 3600

// nodeReaderRules are all the node-reader may do: read Nodes.
var nodeReaderRules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}

// EnsureNodeReader makes, with the cluster's admin client, the node-reader account, its
// ClusterRole (nodeReaderRules, and nothing else: an existing one is put back to them) and
// binding (to that role only), and returns a kubeconfig of admin's server and CA (admin is the cluster's
// rebuilt admin configuration, RESTConfig's) with a new token of the account.
func EnsureNodeReader(ctx context.Context, cs kubernetes.Interface, admin *rest.Config) ([]byte, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: NodeReader, Namespace: metav1.NamespaceSystem}}
	if _, err := cs.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("ServiceAccount kube-system/%s: %w", NodeReader, err)
	}
	if err := ensureNodeReaderRole(ctx, cs); err != nil {
		return nil, err
	}
	if err := ensureNodeReaderBinding(ctx, cs); err != nil {
		return nil, err
	}
	tr, err := cs.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, NodeReader, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](NodeReaderTokenSeconds)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token of kube-system/%s: %w", NodeReader, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[NodeReader] = &clientcmdapi.Cluster{Server: admin.Host, TLSServerName: admin.ServerName, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos[NodeReader] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[NodeReader] = &clientcmdapi.Context{Cluster: NodeReader, AuthInfo: NodeReader}
	cfg.CurrentContext = NodeReader
	return clientcmd.Write(*cfg)
}

// ensureNodeReaderBinding binds the account to its ClusterRole, and to nothing else: an
// existing binding of the name to another role (say cluster-admin) is replaced, since a
// binding's role cannot be changed, and its subjects are put back to the account.
func ensureNodeReaderBinding(ctx context.Context, cs kubernetes.Interface) error {
	bindings := cs.RbacV1().ClusterRoleBindings()
	want := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: NodeReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: NodeReader},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: NodeReader, Namespace: metav1.NamespaceSystem}}}
	_, err := bindings.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var have *rbacv1.ClusterRoleBinding
		if have, err = bindings.Get(ctx, NodeReader, metav1.GetOptions{}); err == nil {
			if have.RoleRef == want.RoleRef {
				have.Subjects = want.Subjects
				_, err = bindings.Update(ctx, have, metav1.UpdateOptions{})
			} else if err = bindings.Delete(ctx, NodeReader, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID}}); err == nil {
				_, err = bindings.Create(ctx, want, metav1.CreateOptions{})
			}
		}
	}
	if err != nil {
		return fmt.Errorf("ClusterRoleBinding %s: %w", NodeReader, err)
	}
	return nil
}

// ensureNodeReaderRole creates the ClusterRole, or puts an existing one back to
// nodeReaderRules: a wider one would make the controller's credential an admin's.
func ensureNodeReaderRole(ctx context.Context, cs kubernetes.Interface) error {
	roles := cs.RbacV1().ClusterRoles()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: NodeReader}, Rules: nodeReaderRules}
	_, err := roles.Create(ctx, role, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var have *rbacv1.ClusterRole
		if have, err = roles.Get(ctx, NodeReader, metav1.GetOptions{}); err == nil {
			have.Rules, have.AggregationRule = nodeReaderRules, nil
			_, err = roles.Update(ctx, have, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("ClusterRole %s: %w", NodeReader, err)
	}
	return nil
}
