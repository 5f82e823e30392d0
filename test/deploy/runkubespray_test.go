package deploy_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/test/framework/node"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// runKubesprayWorkflow runs the run-kubespray template config/default installed, as Argo
// runs it (its real executor, the bpa-binary init container, the kubespray image), against
// one simulated host on the pod network, with the facts operation: the step's checks, its
// private copy of the key, then ansible-playbook's first login to the host over real
// OpenSSH with that copy. It is the admin's Workflow with a templateRef: the shipped
// admission policy lets a Workflow from bpa-provision run main only, which needs a
// Provisioning, its hosts and a site policy.
const runKubesprayWorkflow = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: run-kubespray}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: run-kubespray
        templateRef: {name: bpa-provision, template: run-kubespray}
        arguments:
          parameters:
          - {name: kubespray-image, value: %q}
          - {name: ssh-secret, value: %q}
          - {name: ssh-user, value: root}
          - {name: ssh-port, value: "22"}
          - {name: insecure-ignore-host-key, value: "false"}
          artifacts:
          - {name: inventory, raw: {data: %q}}
          - {name: extra-vars, raw: {data: %q}}
          - {name: operations, raw: {data: '[{"playbook":"facts"}]'}}
`

// runKubespray: the step's private copy of the key is 0600 as the container reads it, and
// ansible-playbook's SSH connection with it succeeds (the host's sshd accepted the key from
// the pod's address, and the play gathered the host's facts).
func (e *env) runKubespray(t *testing.T) {
	ctx := e.ctx(5 * time.Minute)
	addr, err := e.n.HostAddress()
	require.NoError(t, err)
	cluster := simhost.NewCluster(t)
	h := cluster.StartOn("node1", simhost.Network{Bridge: node.Bridge, Address: addr})
	key, err := os.ReadFile(cluster.ClientKeyPath())
	require.NoError(t, err)
	knownHosts, err := os.ReadFile(cluster.KnownHostsPath())
	require.NoError(t, err)
	e.secret(t, "node1-ssh", key, knownHosts)

	hosts := []bpav1.HostStatus{{Name: h.Name, IP: h.IP, Roles: []string{"master", "worker"}, Etcd: true}}
	ini, _, err := inventory.Render(hosts, inventory.Options{})
	require.NoError(t, err)
	vars, err := inventory.ExtraVars(&bpav1.ProvisioningSpec{})
	require.NoError(t, err)
	text := fmt.Sprintf(runKubesprayWorkflow, e.kubesprayImage, "node1-ssh", ini, vars)

	start := time.Now()
	phase, status := e.runWorkflow(t, ctx, text)
	logs := e.workflowLogs(t, ctx, "run-kubespray")
	t.Logf("run-kubespray Workflow %s in %s", phase, time.Since(start).Round(100*time.Millisecond))
	require.Equal(t, "Succeeded", phase, "status:\n%s\nlogs:\n%s", status, logs)
	assert.Contains(t, logs, "SSH private key for ansible-playbook: /tmp/bpa/ssh/ssh-privatekey, mode 0600\n",
		"the step's copy, as the container reads it")
	assert.Contains(t, logs, "ok: ["+h.Name+"]", "ansible-playbook logged in to the host and gathered its facts")
	assert.Contains(t, h.SSHDLog(), "Accepted publickey for root from 10.213.0.", "the host's sshd accepted the key from the pod network")
}

var workflows = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}

// runWorkflow creates the Workflow text describes and waits for it to end.
func (e *env) runWorkflow(t *testing.T, ctx context.Context, text string) (phase, status string) {
	var wf unstructured.Unstructured
	require.NoError(t, yaml.Unmarshal([]byte(text), &wf.Object))
	wfs := dynamic.NewForConfigOrDie(e.n.Rig.RESTConfig).Resource(workflows).Namespace(ns)
	_, err := wfs.Create(ctx, &wf, metav1.CreateOptions{})
	require.NoError(t, err)
	var got *unstructured.Unstructured
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		if got, err = wfs.Get(ctx, wf.GetName(), metav1.GetOptions{}); err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(got.Object, "status", "phase")
		return phase == "Succeeded" || phase == "Failed" || phase == "Error", nil
	}), "Workflow %s ends (last phase %q)", wf.GetName(), phase)
	out, _ := yaml.Marshal(got.Object["status"])
	return phase, string(out)
}

// workflowLogs are the main containers' logs of workflow's pods, from the real kubelet.
func (e *env) workflowLogs(t *testing.T, ctx context.Context, workflow string) string {
	pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + workflow})
	require.NoError(t, err)
	var b strings.Builder
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			logs, err := e.c.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
			fmt.Fprintf(&b, "--- %s/%s (%v)\n%s", p.Name, c.Name, err, logs)
		}
	}
	return b.String()
}
