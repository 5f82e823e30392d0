package rig_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/pkg/etcdbackup"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// etcdClient is an etcd client of endpoint with tlsConfig (nil: plain http), closed with t.
func etcdClient(t *testing.T, endpoint string, tlsConfig *tls.Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsConfig, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// count is how many keys of c's start with prefix.
func count(t *testing.T, ctx context.Context, c *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return resp.Count
}

// TestAppEtcd: the application apiserver stores its objects in an etcd of its own, over TLS
// with client certificates required, never in the rig's; a stop and start of both keeps the
// data, on the same endpoint; and a snapshot restored into the data dir while both are
// stopped rolls back that cluster alone.
func TestAppEtcd(t *testing.T) {
	r := rig.ForTest(t, rig.Options{NoArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app, err := r.StartAppAPIServer(ctx)
	require.NoError(t, err)
	require.NotNil(t, app.Etcd)
	assert.True(t, strings.HasPrefix(app.Etcd.Endpoint, "https://127.0.0.1:"), app.Etcd.Endpoint)

	c := kubernetes.NewForConfigOrDie(app.RESTConfig)
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app-only"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	admin, err := app.Etcd.ClientTLS()
	require.NoError(t, err)
	appEtcd := etcdClient(t, app.Etcd.Endpoint, admin)
	const key = "/registry/namespaces/app-only"
	assert.EqualValues(t, 1, count(t, ctx, appEtcd, key), "the namespace is in the application etcd, at kubeadm's prefix")
	assert.EqualValues(t, 1, count(t, ctx, appEtcd, "/registry/namespaces/kube-system"))

	rigEtcd := etcdClient(t, r.EtcdURL(), nil)
	all, err := rigEtcd.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	require.NoError(t, err)
	require.NotEmpty(t, all.Kvs, "the rig's etcd holds the main apiserver's objects")
	for _, kv := range all.Kvs {
		assert.NotContains(t, string(kv.Key), "app-only", "the application cluster's namespace is not in the rig's etcd")
	}

	t.Run("a client without a certificate is refused", func(t *testing.T) {
		ca, err := os.ReadFile(app.Etcd.CAFile)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(ca))
		anon := etcdClient(t, app.Etcd.Endpoint, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		short, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err = anon.Get(short, key)
		require.Error(t, err, "etcd requires a client certificate")
		_, err = etcdClient(t, strings.Replace(app.Etcd.Endpoint, "https:", "http:", 1), nil).Get(short, key)
		require.Error(t, err, "etcd serves TLS only")
	})

	t.Run("stop and start keep the data", func(t *testing.T) {
		endpoint := app.Etcd.Endpoint
		app.Stop()
		app.Etcd.Stop()
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := etcdClient(t, endpoint, admin).Get(short, key)
		require.Error(t, err, "etcd is stopped")

		require.NoError(t, app.Etcd.Start(ctx))
		require.NoError(t, app.Start(ctx))
		assert.Equal(t, endpoint, app.Etcd.Endpoint)
		_, err = c.CoreV1().Namespaces().Get(ctx, "app-only", metav1.GetOptions{})
		require.NoError(t, err, "the restarted apiserver reads the namespace from the restarted etcd")
	})

	t.Run("a restore replaces the data dir", func(t *testing.T) {
		snap := filepath.Join(t.TempDir(), "snapshot.db")
		_, err := etcdbackup.Save(ctx, etcdClient(t, app.Etcd.Endpoint, admin), snap)
		require.NoError(t, err)
		_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "after-the-snapshot"}}, metav1.CreateOptions{})
		require.NoError(t, err)

		app.Stop()
		app.Etcd.Stop()
		require.NoError(t, os.RemoveAll(app.Etcd.DataDir))
		require.NoError(t, snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
			SnapshotPath: snap, OutputDataDir: app.Etcd.DataDir, Name: app.Etcd.MemberName,
			PeerURLs: []string{app.Etcd.PeerURL}, InitialCluster: app.Etcd.MemberName + "=" + app.Etcd.PeerURL,
			InitialClusterToken: app.Etcd.ClusterToken,
		}))
		require.NoError(t, app.Etcd.Start(ctx))
		require.NoError(t, app.Start(ctx))
		_, err = c.CoreV1().Namespaces().Get(ctx, "app-only", metav1.GetOptions{})
		require.NoError(t, err, "what the snapshot holds is back")
		_, err = c.CoreV1().Namespaces().Get(ctx, "after-the-snapshot", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "what came after the snapshot is gone: %v", err)
		_, err = kubernetes.NewForConfigOrDie(r.RESTConfig).CoreV1().Namespaces().Get(ctx, r.Namespace, metav1.GetOptions{})
		require.NoError(t, err, "the rig's own cluster is untouched")
	})
}
