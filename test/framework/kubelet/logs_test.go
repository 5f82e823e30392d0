package kubelet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podOf is the pod that ran a Workflow node (Argo's pod names differ from node IDs).
func (e *env) podOf(t *testing.T, wf *wfv1.Workflow, display string) *corev1.Pod {
	t.Helper()
	id := node(t, wf, display).ID
	pods, err := e.kube.CoreV1().Pods(e.r.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + wf.Name})
	require.NoError(t, err)
	for i := range pods.Items {
		if pods.Items[i].Annotations["workflows.argoproj.io/node-id"] == id {
			return &pods.Items[i]
		}
	}
	t.Fatalf("no pod for node %s of %s", display, wf.Name)
	return nil
}

func (e *env) podLog(t *testing.T, pod string, opts corev1.PodLogOptions) string {
	t.Helper()
	b, err := e.kube.CoreV1().Pods(e.r.Namespace).GetLogs(pod, &opts).DoRaw(context.Background())
	require.NoError(t, err, "pods/log of %s", pod)
	return string(b)
}

// testLogs reads the logs of the failing workflow's pods (run by testFailure) through the
// real apiserver, which proxies pods/log to the stand-in's containerLogs on the Node the pod
// is bound to.
func (e *env) testLogs(t *testing.T) {
	ctx := context.Background()
	wf, err := e.wf.ArgoprojV1alpha1().Workflows(e.r.Namespace).Get(ctx, "failing", metav1.GetOptions{})
	require.NoError(t, err)
	pod := e.podOf(t, wf, "stderr")
	node, err := e.kube.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
	require.NoError(t, err, "the pod is bound to the stand-in's Node")
	assert.NotZero(t, node.Status.DaemonEndpoints.KubeletEndpoint.Port)

	assert.Equal(t, "noise\nboom: disk on fire\n", e.podLog(t, pod.Name, corev1.PodLogOptions{Container: "main"}))
	assert.Equal(t, "boom: disk on fire\n", e.podLog(t, pod.Name, corev1.PodLogOptions{Container: "main", TailLines: ptr.To[int64](1)}))
	assert.Equal(t, "noi", e.podLog(t, pod.Name, corev1.PodLogOptions{Container: "main", LimitBytes: ptr.To[int64](3)}))
	stamped := e.podLog(t, pod.Name, corev1.PodLogOptions{Container: "main", Timestamps: true})
	assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z noise\n\S+ boom: disk on fire\n$`, stamped)
	future := metav1.NewTime(time.Now().Add(time.Hour))
	assert.Empty(t, e.podLog(t, pod.Name, corev1.PodLogOptions{Container: "main", SinceTime: &future}))
	assert.Contains(t, e.podLog(t, pod.Name, corev1.PodLogOptions{Container: "wait"}), "SIMULATED wait container")

	// The real clients: kubectl picks main (Argo's default-container annotation); argo logs
	// finds every pod of the workflow and prefixes each line with its node.
	out, err := exec.Command("kubectl", "--kubeconfig", e.r.Kubeconfig, "-n", e.r.Namespace, "logs", pod.Name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "noise\nboom: disk on fire\n", string(out))
	argo, err := e.r.Argo(ctx, "logs", "failing")
	require.NoError(t, err, argo)
	assert.Regexp(t, `stderr.*: boom: disk on fire`, argo)
	assert.Regexp(t, `termlog.*: other`, argo)
}

const followWorkflow = `
metadata: {name: follow}
spec:
  serviceAccountName: wf-runner
  entrypoint: slow
  templates:
  - name: slow
    container:
      image: busybox
      command: [sh, -c, "echo first; sleep 3; echo second"]
`

// testFollow streams a running step's log: lines arrive as written, and the stream ends
// when the container does.
func (e *env) testFollow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wf := e.submit(t, followWorkflow)
	pod := e.waitRunning(t, wf, func() bool { return true })
	start := time.Now()
	stream, err := e.kube.CoreV1().Pods(e.r.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main", Follow: true}).Stream(ctx)
	require.NoError(t, err)
	defer stream.Close()
	first := make([]byte, len("first\n"))
	_, err = io.ReadFull(stream, first)
	require.NoError(t, err)
	assert.Equal(t, "first\n", string(first))
	assert.Less(t, time.Since(start), 2*time.Second, "the first line arrives while the step still runs")
	rest, err := io.ReadAll(stream)
	require.NoError(t, err, "the stream ends when the container does")
	assert.Equal(t, "second\n", string(rest))
}

// testKubeletAuth: the stand-in's kubelet API serves logs only to the apiserver (a client
// certificate of the rig's CA), as a kubelet with --client-ca-file does.
func (e *env) testKubeletAuth(t *testing.T) {
	ctx := context.Background()
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	port := nodes.Items[0].Status.DaemonEndpoints.KubeletEndpoint.Port
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(e.r.CAData))
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/containerLogs/%s/any/main", port, e.r.Namespace))
	if err == nil {
		resp.Body.Close()
	}
	require.Error(t, err, "no client certificate, no logs")
	assert.True(t, strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "tls"), err.Error())
}
