package kubeconfig

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// On a real kube-apiserver: the node-reader kubeconfig names the admin's server and CA, and
// its token may get, list and watch Nodes and nothing else (not a Secret, not a Pod, not a
// write to a Node). A ClusterRole widened behind BPA's back is put back to Nodes only, a
// binding of its name to another role is replaced, and
// each call issues a token that works.
func TestNodeReaderReadsOnlyNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	app, err := r.StartAppAPIServer(ctx)
	require.NoError(t, err)
	admin, err := kubernetes.NewForConfig(app.RESTConfig)
	require.NoError(t, err)
	_, err = admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Someone widened the role before BPA's first verify.
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: NodeReader},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// And bound its name to cluster-admin (a binding's role cannot be changed, only replaced).
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: NodeReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: NodeReader, Namespace: metav1.NamespaceSystem}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	for round := range 2 {
		conf, err := EnsureNodeReader(ctx, admin, app.RESTConfig)
		require.NoError(t, err, "round %d", round)
		rc, err := RESTConfig(conf)
		require.NoError(t, err, "the kubeconfig passes BPA's own rules")
		assert.Equal(t, app.RESTConfig.Host, rc.Host)
		cs, err := kubernetes.NewForConfig(rc)
		require.NoError(t, err)
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "round %d", round)
		assert.Len(t, nodes.Items, 1)
		_, err = cs.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})
		assert.NoError(t, err)
		for what, err := range map[string]error{
			"list Secrets":  ignore(cs.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})),
			"list Pods":     ignore(cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})),
			"delete a Node": cs.CoreV1().Nodes().Delete(ctx, "w1", metav1.DeleteOptions{}),
			"create a Node": ignore(cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})),
			"read its role": ignore(cs.RbacV1().ClusterRoles().Get(ctx, NodeReader, metav1.GetOptions{})),
		} {
			assert.True(t, apierrors.IsForbidden(err), "round %d: %s: %v", round, what, err)
		}
	}
}

func ignore[T any](_ T, err error) error { return err }
