package rig_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// TestKillAndRestart kills the rig's etcd, apiserver and workflow-controller with SIGKILL
// and restarts each: what was stored before is there after (same data dir), the same URL
// serves (same port and certificates), and each restart logs to a file of its own.
func TestKillAndRestart(t *testing.T) {
	r := rig.ForTest(t, rig.Options{WorkflowController: true, MinimalArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := kubernetes.NewForConfigOrDie(r.RESTConfig)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: r.Namespace}}
	_, err := c.CoreV1().ConfigMaps(r.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	read := func() error {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		defer rcancel()
		_, err := c.CoreV1().ConfigMaps(r.Namespace).Get(rctx, "before", metav1.GetOptions{ResourceVersion: ""})
		return err
	}

	require.NoError(t, r.KillEtcd())
	require.Error(t, r.KillEtcd(), "a dead etcd cannot be killed again")
	// A quorum read needs etcd: it fails while etcd is down.
	require.Error(t, read(), "the apiserver reads through a dead etcd")
	require.NoError(t, r.RestartEtcd(ctx))
	require.Eventually(t, func() bool { return read() == nil }, time.Minute, 200*time.Millisecond, "the ConfigMap is back from the same data dir")

	require.NoError(t, r.KillAPIServer())
	require.Error(t, read(), "a dead apiserver answers")
	require.NoError(t, r.RestartAPIServer(ctx))
	require.NoError(t, read(), "the same URL, token and CA after the restart")

	require.NoError(t, r.KillWorkflowController())
	require.NoError(t, r.RestartWorkflowController(ctx))
	for _, log := range []string{"etcd-2.log", "kube-apiserver-2.log", "workflow-controller-2.log"} {
		_, err := os.Stat(filepath.Join(r.LogDir, log))
		require.NoError(t, err, "the restart logs to %s", log)
	}
}
