package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	"k8s.io/utils/ptr"
)

// keyCheck runs in the run-kubespray container: the mode of the mounted key as the
// container sees it, then real OpenSSH (the kubespray image's ssh-keygen, as ansible's ssh
// would) judging it.
const keyCheck = `key=/etc/bpa/ssh/ssh-privatekey
echo "mode $(stat -L -c %a $key) uid $(id -u)"
if ssh-keygen -y -f $key >/dev/null; then echo "openssh: accepted"; else echo "openssh: refused"; fi`

// runKubesprayKey runs the pod of the run-kubespray template config/default installed (the
// WorkflowTemplate as the cluster holds it: volumes, defaultMode, securityContext, the
// bpa-binary init container), with the stand-in kubespray image, on the real node, and
// reads the key from inside the container. Then once more with the template's mode
// widened to 0440 (what an fsGroup does to it), which OpenSSH must refuse: the check can
// fail.
func (e *env) runKubesprayKey(t *testing.T) {
	ctx := e.ctx(5 * time.Minute)
	e.sshSecret(t)
	tmpl := e.shippedTemplate(t, ctx, "bpa-provision", "run-kubespray")

	pod := e.podOf(t, tmpl, "key-as-shipped", "site-ssh", keyCheck)
	logs := e.runToEnd(t, ctx, pod)
	assert.Equal(t, "mode 400 uid 0\nopenssh: accepted\n", logs, "the key as the shipped template mounts it")

	widened := e.podOf(t, tmpl, "key-0440", "site-ssh", keyCheck)
	for i := range widened.Spec.Volumes {
		if s := widened.Spec.Volumes[i].Secret; s != nil {
			s.DefaultMode = ptr.To[int32](0o440)
		}
	}
	logs = e.runToEnd(t, ctx, widened)
	assert.Contains(t, logs, "mode 440 uid 0\n")
	assert.Contains(t, logs, "UNPROTECTED PRIVATE KEY FILE")
	assert.Contains(t, logs, "openssh: refused")
}

// sshSecret creates the Secret a Provisioning's spec.ssh names: a new ed25519 key, no
// known_hosts.
func (e *env) sshSecret(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "deploy-test", "-f", filepath.Join(dir, "id")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	key, err := os.ReadFile(filepath.Join(dir, "id"))
	require.NoError(t, err)
	e.secret(t, "site-ssh", key, nil)
}

// argoTemplate is the part of an Argo template that becomes the pod.
type argoTemplate struct {
	AutomountServiceAccountToken *bool                      `json:"automountServiceAccountToken"`
	SecurityContext              *corev1.PodSecurityContext `json:"securityContext"`
	InitContainers               []corev1.Container         `json:"initContainers"`
	Container                    corev1.Container           `json:"container"`
	Volumes                      []corev1.Volume            `json:"volumes"`
}

// shippedTemplate reads template name of WorkflowTemplate wt from the cluster.
func (e *env) shippedTemplate(t *testing.T, ctx context.Context, wt, name string) argoTemplate {
	gvr := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflowtemplates"}
	u, err := dynamic.NewForConfigOrDie(e.n.Rig.RESTConfig).Resource(gvr).Namespace(ns).Get(ctx, wt, metav1.GetOptions{})
	require.NoError(t, err)
	templates, _, err := unstructured.NestedSlice(u.Object, "spec", "templates")
	require.NoError(t, err)
	for _, tm := range templates {
		if m, _ := tm.(map[string]any); m["name"] == name {
			data, err := json.Marshal(m)
			require.NoError(t, err)
			var a argoTemplate
			require.NoError(t, json.Unmarshal(data, &a))
			return a
		}
	}
	t.Fatalf("WorkflowTemplate %s has no template %s", wt, name)
	return argoTemplate{}
}

// podOf is the pod Argo would make of a, without Argo's own containers and artifacts:
// the template's input parameters filled in (the ssh Secret sshSecret, the kubespray
// image), and the main container running script instead of the step.
func (e *env) podOf(t *testing.T, a argoTemplate, name, sshSecret, script string) *corev1.Pod {
	data, err := json.Marshal(a)
	require.NoError(t, err)
	s := strings.NewReplacer("{{inputs.parameters.ssh-secret}}", sshSecret,
		"{{inputs.parameters.kubespray-image}}", e.kubesprayImage).Replace(string(data))
	require.NotContains(t, s, "{{inputs.parameters.ssh-secret}}")
	// Into a new value: unmarshalling into a would fill the caller's slices.
	a = argoTemplate{}
	require.NoError(t, json.Unmarshal([]byte(s), &a))
	require.Equal(t, e.kubesprayImage, a.Container.Image, "the template runs the CR's kubespray image")
	main := a.Container
	main.Name, main.Command, main.Args = "main", []string{"sh", "-c", script}, nil
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
			AutomountServiceAccountToken: a.AutomountServiceAccountToken, SecurityContext: a.SecurityContext,
			InitContainers: a.InitContainers, Containers: []corev1.Container{main}, Volumes: a.Volumes,
		},
	}
}

// runToEnd runs pod to its end and returns its main container's log.
func (e *env) runToEnd(t *testing.T, ctx context.Context, pod *corev1.Pod) string {
	_, err := e.c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var last string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = string(p.Status.Phase)
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed, nil
	}), "pod %s: %s", pod.Name, last)
	require.Equal(t, string(corev1.PodSucceeded), last, "pod %s", pod.Name)
	logs, err := e.c.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	require.NoError(t, err)
	return string(logs)
}
