package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
)

// argoLogs is `argo logs <workflow>`, the real CLI: every step pod's main container, each
// line prefixed with its pod's name (<workflow>-<template>-<hash>).
func (e *env) argoLogs(t *testing.T, workflow string) string {
	t.Helper()
	out, err := e.Argo(e.ctx, "logs", workflow, "--no-color")
	require.NoError(t, err, out)
	return out
}

// assertLogLines checks that some line of template's pods in argo's output matches each
// pattern.
func assertLogLines(t *testing.T, logs, template string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		assert.Regexp(t, "(?m)^\\S*-"+regexp.QuoteMeta(template)+"-\\d+: .*"+p, logs, "argo logs: %s says %q", template, p)
	}
}

// assertProvisioningLogs: `argo logs` shows what each step of a finished run did, and
// `kubectl logs` on the run-kubespray pod shows (SIMULATED) kubespray's own output.
func (e *env) assertProvisioningLogs(t *testing.T, p *bpav1.Provisioning) {
	t.Helper()
	logs := e.argoLogs(t, p.Status.Workflow.Name)
	master := firstMaster(p)
	assertLogLines(t, logs, "discover-hosts", fmt.Sprintf("%d nodes placed on", len(p.Status.Hosts)),
		"node "+master.Name+": .*BareMetalHost "+e.Namespace+"/"+master.BareMetalHost)
	resolve := "resolve-leases"
	if p.Spec.Leases != nil && p.Spec.Leases.HostPath != "" {
		resolve = "resolve-leases-from-file"
	}
	assertLogLines(t, logs, resolve, "hosts resolved from leases found", "node "+master.Name+": MAC .* has IP "+regexp.QuoteMeta(master.IP))
	assertLogLines(t, logs, "run-kubespray", "playbook cluster.yml on every host", `TASK \[sim : SIMULATED kubeadm init`,
		"changed: \\["+master.Name+"\\]", "PLAY RECAP")
	assertLogLines(t, logs, "verify", "node "+master.Name+" .*: Ready")
	assertLogLines(t, logs, "publish-kubeconfig", "published Secret "+kubeconfig.PublishedSecretName(p.Labels["cluster"]))

	pod := e.stepPod(t, p.Status.Workflow.Name, "run-kubespray")
	out, err := exec.CommandContext(e.ctx, "kubectl", "--kubeconfig", e.Rig.Kubeconfig, "-n", e.Namespace, "logs", pod).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `SIMULATED kubespray v[0-9.]+ cluster\.yml`, string(out), "kubectl logs %s", pod)
	assert.Contains(t, string(out), "PLAY RECAP", "kubectl logs %s", pod)
}

// stepPod is the name of the (last) pod of a Workflow that ran template.
func (e *env) stepPod(t *testing.T, workflow, template string) string {
	t.Helper()
	pods, err := e.kube(t).CoreV1().Pods(e.Namespace).List(e.ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + workflow})
	require.NoError(t, err)
	var names []string
	for _, p := range pods.Items {
		if regexp.MustCompile("^" + regexp.QuoteMeta(workflow+"-"+template) + "-\\d+$").MatchString(p.Name) {
			names = append(names, p.Name)
		}
	}
	require.NotEmpty(t, names, "a %s pod of %s", template, workflow)
	sort.Strings(names)
	return names[len(names)-1]
}

func (e *env) kube(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(e.Rig.RESTConfig)
	require.NoError(t, err)
	return c
}

// stepLogs are the logs of every container of every pod in the namespace, as pods/log
// serves them, for the secret scan.
func (e *env) stepLogs(t *testing.T) string {
	t.Helper()
	kc := e.kube(t)
	pods, err := kc.CoreV1().Pods(e.Namespace).List(e.ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var b strings.Builder
	for _, p := range pods.Items {
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			// Logs of a pod deleted meanwhile are gone, as in a real cluster.
			data, err := kc.CoreV1().Pods(e.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(e.ctx)
			if err == nil {
				b.Write(data)
			}
		}
	}
	return b.String()
}

// assertFanOutNames: Argo names each host's install-software node after the host, in the
// real Workflow, and `argo logs` shows each host's result.
func (e *env) assertFanOutNames(t *testing.T, s *bpav1.Software) {
	t.Helper()
	wf := &wfv1.Workflow{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: s.Status.Workflow.Name}, wf))
	var names []string
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypeRetry && strings.HasPrefix(n.DisplayName, "install-software(") {
			names = append(names, n.DisplayName)
		}
	}
	sort.Strings(names)
	var want []string
	for i, h := range s.Status.HostSoftware {
		want = append(want, fmt.Sprintf("install-software(%d:%s)", i, h.Name))
	}
	assert.Equal(t, want, names, "one readable node per host (hosts and items are both sorted by name)")

	logs := e.argoLogs(t, wf.Name)
	for _, h := range s.Status.HostSoftware {
		assertLogLines(t, logs, "resolve-nodes", "node "+h.Name+" \\("+regexp.QuoteMeta(h.IP)+"\\), roles ")
		assertLogLines(t, logs, "install-software", regexp.QuoteMeta(h.Name+" ("+h.IP+"): Succeeded"))
		assertLogLines(t, logs, "verify-software", regexp.QuoteMeta(h.Name+" ("+h.IP+"): Succeeded"))
	}
}
