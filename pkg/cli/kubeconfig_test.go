package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/test/framework/artifactstest"
	"github.com/akraino-edge-stack/bpa/test/framework/bpatest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

// Issue 27, item 4, on a real apiserver: `bpa describe -o yaml|json`, `bpa serve
// --kubeconfig F` and `bpa controller --kubeconfig F -n NS` reach the cluster of the
// kubeconfig named on the command line. $KUBECONFIG names a file that does not exist, so
// nothing but the flag leads to the rig.
func TestKubeconfigFlagOnRig(t *testing.T) {
	r := rig.ForTest(t, rig.Options{MinimalArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, bpatest.InstallCRDs(ctx, r.RESTConfig))
	require.NoError(t, bpatest.InstallBareMetalHostCRD(ctx, r.RESTConfig))
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "not-this-one"))

	t.Run("describe -o yaml", func(t *testing.T) { describeAsObjects(ctx, t, r) })
	t.Run("serve --kubeconfig", func(t *testing.T) { serveWithKubeconfig(ctx, t, r) })
	t.Run("controller --kubeconfig", func(t *testing.T) { controllerWithKubeconfig(ctx, t, r) })
}

// describeAsObjects: -o yaml and -o json print the CR, its current Workflow and the
// published objects' metadata as one v1 List, and never the Secret's data.
func describeAsObjects(ctx context.Context, t *testing.T, r *rig.Rig) {
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	require.NoError(t, bpatest.CreateFixture(ctx, c, r.Namespace, "../describe/testdata/provisioning.yaml"))

	args := []string{"describe", "provisioning", "provisioning-sample-xyz", "--kubeconfig", r.Kubeconfig, "-n", r.Namespace, "--history", "0"}
	asYAML, stderr, err := bpa(t, append(args, "-o", "yaml")...)
	require.NoError(t, err, stderr)
	asJSON, _, err := bpa(t, append(args, "-o", "json")...)
	require.NoError(t, err)
	assert.NotContains(t, asYAML, "SECRET-KUBECONFIG-DATA", "a Secret's data is never read")
	fromYAML, err := yaml.YAMLToJSON([]byte(asYAML))
	require.NoError(t, err)
	assert.JSONEq(t, asJSON, string(fromYAML), "the same document in either format")

	var list struct {
		APIVersion, Kind string
		Items            []unstructured.Unstructured
	}
	require.NoError(t, json.Unmarshal([]byte(asJSON), &list))
	assert.Equal(t, "v1", list.APIVersion)
	assert.Equal(t, "List", list.Kind)
	var got []string
	for _, o := range list.Items {
		got = append(got, o.GetAPIVersion()+" "+o.GetKind()+" "+o.GetName())
		assert.Empty(t, o.GetManagedFields(), o.GetName())
		assert.NotContains(t, o.Object, "data", "%s %s: metadata only", o.GetKind(), o.GetName())
	}
	assert.Equal(t, []string{
		"bpa.akraino.org/v1alpha1 Provisioning provisioning-sample-xyz",
		"argoproj.io/v1alpha1 Workflow provisioning-sample-xyz-provision-2", // the current run; --history 0
		"v1 Secret cluster-xyz-kubeconfig",
		"v1 ConfigMap cluster-xyz-configmap",
	}, got)
	phase, _, _ := unstructured.NestedString(list.Items[0].Object, "status", "phase")
	assert.Equal(t, "Succeeded", phase)

	earlier, _, err := bpa(t, "describe", "prov", "provisioning-sample-xyz", "--kubeconfig", r.Kubeconfig, "-n", r.Namespace, "-o", "yaml")
	require.NoError(t, err)
	assert.Contains(t, earlier, "name: provisioning-sample-xyz-provision-1", "an earlier run, with the default --history")
	assert.NotContains(t, earlier, "name: other-provision-1", "another CR's run")
}

// serveWithKubeconfig: the server reviews a reader's token with the apiserver of
// --kubeconfig (before, `unknown flag: --kubeconfig`).
func serveWithKubeconfig(ctx context.Context, t *testing.T, r *rig.Rig) {
	artifactstest.InstallRoles(ctx, t, r)
	token := artifactstest.Token(ctx, t, r, "reader", "bpa-artifacts-reader")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		root := NewRootCommand()
		root.SetArgs([]string{"serve", "--kubeconfig", r.Kubeconfig, "--plain-http", "--listen", addr, "--dir", t.TempDir()})
		root.SetErr(&bytes.Buffer{})
		served <- root.ExecuteContext(serveCtx)
	}()
	get := func() (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/v1/files", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	require.True(t, eventually(t, served, func() bool { _, err := get(); return err == nil }), "bpa serve listening on %s", addr)
	code, err := get()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "the token reviewed by the rig's apiserver, and the reader allowed to list")
	stop()
	require.NoError(t, <-served)
}

// controllerWithKubeconfig: the controller started with --kubeconfig and -n applies BPA's
// WorkflowTemplates into that namespace of that cluster, and stops when its context ends
// (before, `unknown flag: --kubeconfig`).
func controllerWithKubeconfig(ctx context.Context, t *testing.T, r *rig.Rig) {
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		root := NewRootCommand()
		root.SetArgs([]string{"controller", "--kubeconfig", r.Kubeconfig, "-n", r.Namespace,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--zap-log-level", "error"})
		root.SetErr(&bytes.Buffer{})
		done <- root.ExecuteContext(runCtx)
	}()
	var names []string
	require.True(t, eventually(t, done, func() bool {
		var l wfv1.WorkflowTemplateList
		if err := c.List(ctx, &l, client.InNamespace(r.Namespace)); err != nil {
			return false
		}
		names = names[:0]
		for _, w := range l.Items {
			names = append(names, w.Name)
		}
		return len(names) >= 2
	}), "WorkflowTemplates applied in %s", r.Namespace)
	assert.ElementsMatch(t, []string{"bpa-provision", "bpa-software"}, names)
	var elsewhere wfv1.WorkflowTemplateList
	require.NoError(t, c.List(ctx, &elsewhere))
	assert.Len(t, elsewhere.Items, len(names), "-n is the one namespace it watches")
	stop()
	require.NoError(t, <-done)
}

// eventually polls cond until it holds, for up to two minutes, and fails the test at once
// with the command's error if the command running in the background (its result on
// exited) stops first.
func eventually(t *testing.T, exited <-chan error, cond func() bool) bool {
	t.Helper()
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			require.NoError(t, err, "the command stopped")
			require.Fail(t, "the command stopped")
		default:
		}
		if cond() {
			return true
		}
	}
	return false
}
