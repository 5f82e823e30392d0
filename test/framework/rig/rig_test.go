package rig_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

func TestRig(t *testing.T) {
	rig.RequireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	r, err := rig.Start(ctx, rig.Options{WorkflowController: true})
	require.NoError(t, err)
	t.Logf("rig with workflow-controller up in %s", time.Since(start).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			if t.Failed() {
				t.Log(r.LogTails(40))
			}
			_ = r.Stop()
		}
	}()

	t.Run("apiserver via kubeconfig file", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", r.Kubeconfig)
		require.NoError(t, err)
		c := kubernetes.NewForConfigOrDie(cfg)
		_, err = c.CoreV1().Namespaces().Get(ctx, r.Namespace, metav1.GetOptions{})
		require.NoError(t, err, "namespace %s is created", r.Namespace)
	})

	t.Run("argo CRDs established", func(t *testing.T) {
		c := apiextensions.NewForConfigOrDie(r.RESTConfig)
		crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "workflows.argoproj.io", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "v1alpha1", crd.Spec.Versions[0].Name)
	})

	t.Run("argo CLI", func(t *testing.T) {
		out, err := r.Argo(ctx, "list")
		require.NoError(t, err)
		assert.Contains(t, out, "No workflows found")
		out, err = r.Argo(ctx, "version", "--short")
		require.NoError(t, err)
		assert.Contains(t, out, rig.ArgoVersion)
	})

	t.Run("app apiserver on a simulated node IP", func(t *testing.T) {
		app, err := r.StartAppAPIServer(ctx)
		require.NoError(t, err)
		again, err := r.StartAppAPIServer(ctx)
		require.NoError(t, err)
		assert.Same(t, app, again, "one app apiserver per rig")

		kc, err := app.KubeconfigFor("127.0.1.7")
		require.NoError(t, err)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
		require.NoError(t, err)
		c := kubernetes.NewForConfigOrDie(cfg)
		_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app-only"}}, metav1.CreateOptions{})
		require.NoError(t, err, "TLS verifies for 127.0.1.7 and the admin token works")

		// Each on an etcd of its own: the clusters do not see each other.
		main := kubernetes.NewForConfigOrDie(r.RESTConfig)
		_, err = main.CoreV1().Namespaces().Get(ctx, "app-only", metav1.GetOptions{})
		assert.Error(t, err)
		_, err = c.CoreV1().Namespaces().Get(ctx, r.Namespace, metav1.GetOptions{})
		assert.Error(t, err)
	})

	pids := r.PIDs()
	require.Len(t, pids, 5, "etcd, kube-apiserver, workflow-controller, app-etcd, app-apiserver")
	dir := r.Dir
	stopStart := time.Now()
	require.NoError(t, r.Stop())
	t.Logf("rig stopped in %s", time.Since(stopStart).Round(time.Millisecond))
	stopped = true
	for _, pid := range pids {
		err := syscall.Kill(pid, 0)
		assert.True(t, errors.Is(err, syscall.ESRCH), "process %d still exists after Stop (kill -0: %v)", pid, err)
	}
	_, err = os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "rig dir removed")
	assert.NoError(t, r.Stop(), "Stop is idempotent")
}

func TestStartFailsWithoutTools(t *testing.T) {
	_, err := rig.Start(context.Background(), rig.Options{BinDir: t.TempDir()})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "run hack/build-tools.sh"), err.Error())
}
