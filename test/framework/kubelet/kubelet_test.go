package kubelet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	wfclientset "github.com/argoproj/argo-workflows/v3/pkg/client/clientset/versioned"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/test/framework/kubelet"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// env is one rig with the workflow-controller and a stand-in kubelet, shared
// by the subtests.
type env struct {
	r       *rig.Rig
	k       *kubelet.Kubelet
	wf      wfclientset.Interface
	kube    kubernetes.Interface
	flaky   atomic.Int32 // calls of the "flaky" runner
	sleeper chan struct{}
}

func TestWorkflowsOnSimulatedKubelet(t *testing.T) {
	// Minimal CRDs: a 3 s start instead of 13 s; test/rig covers the full ones.
	r := rig.ForTest(t, rig.Options{WorkflowController: true, MinimalArgoCRDs: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := &env{r: r, wf: wfclientset.NewForConfigOrDie(r.RESTConfig), kube: kubernetes.NewForConfigOrDie(r.RESTConfig), sleeper: make(chan struct{}, 1)}

	_, err := e.kube.CoreV1().ServiceAccounts(r.Namespace).Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "wf-runner"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// What steps may do as wf-runner: report results like Argo's executor
	// (create and patch task results) and, for the client step, write a
	// ConfigMap. The stand-in acts as wf-runner (AsServiceAccount).
	_, err = e.kube.RbacV1().Roles(r.Namespace).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "wf-runner"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.kube.RbacV1().RoleBindings(r.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wf-runner"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "wf-runner"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "wf-runner", Namespace: r.Namespace}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = e.kube.CoreV1().ConfigMaps(r.Namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "greeting"}, Data: map[string]string{"word": "bonjour"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tlsConfig, err := r.KubeletTLSConfig()
	require.NoError(t, err)
	// Pods that set runAsUser run as that user, who must reach the pod dirs
	// (a t.TempDir() and its parent are 0700).
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(work), work} {
		require.NoError(t, os.Chmod(d, 0o711))
	}

	e.k, err = kubelet.Start(ctx, kubelet.Options{
		TLSConfig:        tlsConfig,
		Config:           r.RESTConfig,
		Kubeconfig:       r.Kubeconfig,
		AsServiceAccount: true,
		Namespace:        r.Namespace,
		Executables:      map[string]string{"sh": "/bin/sh"},
		Runners: map[string]kubelet.Runner{
			// Fails its first run only: exercises Argo retries (a new pod).
			"flaky": func(ctx context.Context, x *kubelet.Exec) (int, error) {
				if e.flaky.Add(1) == 1 {
					fmt.Fprintln(x.Stderr, "flaky: first attempt fails")
					return 1, nil
				}
				fmt.Fprintln(x.Stdout, "flaky: second attempt works")
				return 0, nil
			},
			// A step that uses the API like a real one: KUBECONFIG from the
			// environment, a Secret volume, a Secret env var.
			"kube-client": func(ctx context.Context, x *kubelet.Exec) (int, error) {
				get := func(k string) string {
					for _, kv := range x.Env {
						if v, ok := strings.CutPrefix(kv, k+"="); ok {
							return v
						}
					}
					return ""
				}
				token, err := os.ReadFile(x.Command[2])
				if err != nil {
					return 0, err
				}
				cfg, err := clientcmd.BuildConfigFromFlags("", get("KUBECONFIG"))
				if err != nil {
					return 0, err
				}
				c := kubernetes.NewForConfigOrDie(cfg)
				_, listErr := c.CoreV1().Secrets(get("POD_NAMESPACE")).List(ctx, metav1.ListOptions{})
				_, err = c.CoreV1().ConfigMaps(get("POD_NAMESPACE")).Create(ctx, &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "written-by-step"},
					Data: map[string]string{"token": string(token), "word": get("SECRET_WORD"), "pod": get("POD_NAME"),
						"list-secrets-forbidden": fmt.Sprint(apierrors.IsForbidden(listErr))},
				}, metav1.CreateOptions{})
				if err != nil {
					fmt.Fprintln(x.Stderr, err)
					return 1, nil
				}
				return 0, nil
			},
			// Runs until killed, then says so.
			"sleeper": func(ctx context.Context, x *kubelet.Exec) (int, error) {
				<-ctx.Done()
				e.sleeper <- struct{}{}
				return 143, nil
			},
		},
		WorkDir: work,
		Logf:    t.Logf,
	})
	require.NoError(t, err)
	defer e.k.Stop()

	t.Run("DAG passes an output parameter to the next task", e.testDAG)
	t.Run("failing step surfaces its message", e.testFailure)
	t.Run("retry runs a new pod", e.testRetry)
	t.Run("deadline kills the process", e.testDeadline)
	t.Run("deleted pod kills the process group", e.testDelete)
	t.Run("step uses KUBECONFIG, Secret volume and env", e.testClient)
	t.Run("securityContext: file modes, fsGroup and the process's user", e.testSecurityContext)
	t.Run("argo CLI lists and gets workflows", e.testArgoCLI)
	t.Run("logs through the apiserver: client-go, kubectl, argo", e.testLogs)
	t.Run("logs followed while the step runs", e.testFollow)
	t.Run("kubelet API refuses clients without the apiserver's certificate", e.testKubeletAuth)
}

const dagWorkflow = `
metadata: {name: dag}
spec:
  serviceAccountName: wf-runner
  entrypoint: main
  templates:
  - name: main
    outputs:
      parameters:
      # Referencing b's result makes Argo capture it (ARGO_INCLUDE_SCRIPT_OUTPUT).
      - {name: b-result, valueFrom: {parameter: "{{tasks.b.outputs.result}}"}}
    dag:
      tasks:
      - {name: a, template: produce}
      - name: b
        template: consume
        dependencies: [a]
        arguments:
          parameters: [{name: msg, value: "{{tasks.a.outputs.parameters.msg}}"}]
  - name: produce
    container:
      image: busybox
      command: [sh, -c]
      args: ["echo hello-from-a > /tmp/out/msg.txt; echo \"$(cat /etc/greeting/word) $POD_NAMESPACE\" > /tmp/out/cm.txt"]
      volumeMounts:
      - {name: greeting, mountPath: /etc/greeting}
    volumes:
    - name: greeting
      configMap: {name: greeting}
    outputs:
      parameters:
      - {name: msg, valueFrom: {path: /tmp/out/msg.txt}}
      - {name: cm, valueFrom: {path: /tmp/out/cm.txt}}
  - name: consume
    inputs:
      parameters: [{name: msg}]
      artifacts:
      - {name: conf, path: /work/conf.txt, raw: {data: "raw-artifact-data"}}
    script:
      image: busybox
      command: [sh]
      source: |
        echo "got {{inputs.parameters.msg}} and $(cat /work/conf.txt)"
`

func (e *env) testDAG(t *testing.T) {
	wf := e.run(t, dagWorkflow)
	require.Equal(t, wfv1.WorkflowSucceeded, wf.Status.Phase, wf.Status.Message)
	a := node(t, wf, "a")
	assert.Equal(t, "hello-from-a", param(t, a, "msg"))
	assert.Equal(t, "bonjour "+e.r.Namespace, param(t, a, "cm"), "ConfigMap volume and POD_NAMESPACE")
	b := node(t, wf, "b")
	require.NotNil(t, b.Outputs.Result)
	assert.Equal(t, "got hello-from-a and raw-artifact-data", *b.Outputs.Result)
	assert.Contains(t, e.k.Log(b.ID), "got hello-from-a", "per-pod log kept")
	assert.Equal(t, "got hello-from-a and raw-artifact-data", param(t, node(t, wf, "dag"), "b-result"))
}

const failingWorkflow = `
metadata: {name: failing}
spec:
  serviceAccountName: wf-runner
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: stderr, template: stderr}
      - {name: termlog, template: termlog}
  - name: stderr
    container:
      image: busybox
      command: [sh, -c, "echo noise >&2; echo 'boom: disk on fire' >&2; exit 3"]
  - name: termlog
    container:
      image: busybox
      command: [sh, -c, "echo 'from the termination log' > /dev/termination-log; echo other >&2; exit 2"]
`

func (e *env) testFailure(t *testing.T) {
	wf := e.run(t, failingWorkflow)
	require.Equal(t, wfv1.WorkflowFailed, wf.Status.Phase)
	n := node(t, wf, "stderr")
	assert.Equal(t, wfv1.NodeFailed, n.Phase)
	assert.Equal(t, "main: Error (exit code 3): boom: disk on fire", n.Message)
	assert.Equal(t, "3", *n.Outputs.ExitCode)
	n = node(t, wf, "termlog")
	assert.Equal(t, "main: Error (exit code 2): from the termination log", n.Message)
}

const retryWorkflow = `
metadata: {name: retry}
spec:
  serviceAccountName: wf-runner
  entrypoint: flaky
  templates:
  - name: flaky
    retryStrategy: {limit: "2"}
    container: {image: tools, command: [flaky]}
`

func (e *env) testRetry(t *testing.T) {
	wf := e.run(t, retryWorkflow)
	require.Equal(t, wfv1.WorkflowSucceeded, wf.Status.Phase, wf.Status.Message)
	assert.Equal(t, int32(2), e.flaky.Load(), "one pod per attempt, each run once")
}

const deadlineWorkflow = `
metadata: {name: deadline}
spec:
  serviceAccountName: wf-runner
  entrypoint: slow
  templates:
  - name: slow
    activeDeadlineSeconds: 2
    container: {image: tools, command: [sleeper]}
`

func (e *env) testDeadline(t *testing.T) {
	wf := e.run(t, deadlineWorkflow)
	require.Equal(t, wfv1.WorkflowFailed, wf.Status.Phase)
	select {
	case <-e.sleeper:
	case <-time.After(5 * time.Second):
		t.Fatal("process not killed at the deadline")
	}
	n := node(t, wf, "deadline")
	assert.Contains(t, n.Message, "Pod was active on the node longer than the specified deadline")
}

const deleteWorkflow = `
metadata: {name: delete}
spec:
  serviceAccountName: wf-runner
  entrypoint: slow
  templates:
  - name: slow
    container: {image: busybox, command: [sh, -c, "sleep 3017 & sleep 3018"]}
`

func (e *env) testDelete(t *testing.T) {
	ctx := context.Background()
	wf := e.submit(t, deleteWorkflow)
	pod := e.waitRunning(t, wf, func() bool { return len(processes("sleep 3017")) > 0 && len(processes("sleep 3018")) > 0 })
	require.NoError(t, e.kube.CoreV1().Pods(e.r.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	// The whole process group goes, the backgrounded sleep included.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(processes("sleep 3017"))+len(processes("sleep 3018")) == 0, nil
	}), "processes of the deleted pod are killed")
}

// waitRunning waits for the (single) pod of wf to be Running and ready() to hold.
func (e *env) waitRunning(t *testing.T, wf *wfv1.Workflow, ready func() bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(e.r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + wf.Name})
		if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false, err
		}
		pod = &pods.Items[0]
		return ready(), nil
	}), "the step of %s runs", wf.Name)
	return pod
}

// processes returns the pids whose command line contains s.
func processes(s string) []string {
	var pids []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		cmdline, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err == nil && strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), s) {
			pids = append(pids, d.Name())
		}
	}
	return pids
}

const clientWorkflow = `
metadata: {name: client}
spec:
  serviceAccountName: wf-runner
  entrypoint: client
  templates:
  - name: client
    container:
      image: bpa
      command: [kube-client, --token-file, /etc/creds/token]
      env:
      - name: SECRET_WORD
        valueFrom: {secretKeyRef: {name: creds, key: word}}
      volumeMounts:
      - {name: creds, mountPath: /etc/creds, readOnly: true}
    volumes:
    - name: creds
      secret: {secretName: creds}
`

func (e *env) testClient(t *testing.T) {
	ctx := context.Background()
	_, err := e.kube.CoreV1().Secrets(e.r.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"token": "s3cr3t", "word": "open-sesame"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	wf := e.run(t, clientWorkflow)
	require.Equal(t, wfv1.WorkflowSucceeded, wf.Status.Phase, wf.Status.Message)
	cm, err := e.kube.CoreV1().ConfigMaps(e.r.Namespace).Get(ctx, "written-by-step", metav1.GetOptions{})
	require.NoError(t, err, "the step reached the apiserver through KUBECONFIG, as wf-runner")
	assert.Equal(t, map[string]string{
		"token": "s3cr3t", "word": "open-sesame", "pod": node(t, wf, "client").ID,
		"list-secrets-forbidden": "true", // RBAC of wf-runner applies, not admin
	}, cm.Data)
}

const securityWorkflow = `
metadata: {name: security}
spec:
  serviceAccountName: wf-runner
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: fsgroup, template: fsgroup}
      - {name: denied, template: denied}
  # As BPA's verify step: a key mounted 0400 for a non-root user, readable
  # through fsGroup (which makes it 0440, group fsGroup).
  - name: fsgroup
    securityContext: {runAsUser: 1000, runAsGroup: 3000, fsGroup: 65532}
    inputs:
      artifacts:
      - {name: in, path: /tmp/in/data.txt, raw: {data: "+artifact"}}
    container:
      image: busybox
      command: [sh, -c]
      args: ["id -u > /tmp/out/id && id -G >> /tmp/out/id && stat -c '%a %u %g' /etc/key/key /tmp /tmp/out > /tmp/out/stat && cat /etc/key/key /tmp/in/data.txt > /tmp/out/read && touch $TMPDIR/t $HOME/h"]
      volumeMounts:
      - {name: key, mountPath: /etc/key, readOnly: true}
      - {name: tmp, mountPath: /tmp}
    volumes:
    - name: key
      secret: {secretName: security-key, defaultMode: 0400, items: [{key: key, path: key}]}
    - {name: tmp, emptyDir: {}}
    outputs:
      parameters:
      - {name: id, valueFrom: {path: /tmp/out/id}}
      - {name: stat, valueFrom: {path: /tmp/out/stat}}
      - {name: read, valueFrom: {path: /tmp/out/read}}
  # 0440 without fsGroup is for root (and group 0: runAsUser alone would run
  # with gid 0, as a runtime gives a uid the image does not name, and read it).
  - name: denied
    securityContext: {runAsUser: 1000, runAsGroup: 1000}
    container:
      image: busybox
      command: [sh, -c, "cat /etc/key/key"]
      volumeMounts: [{name: key, mountPath: /etc/key, readOnly: true}]
    volumes:
    - name: key
      secret: {secretName: security-key, defaultMode: 0440}
`

func (e *env) testSecurityContext(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a step as another user needs root, as the kubelet has")
	}
	_, err := e.kube.CoreV1().Secrets(e.r.Namespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "security-key"}, StringData: map[string]string{"key": "KEY"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	wf := e.run(t, securityWorkflow)
	n := node(t, wf, "fsgroup")
	require.Equal(t, wfv1.NodeSucceeded, n.Phase, n.Message)
	assert.Equal(t, "1000\n3000 65532", param(t, n, "id"), "uid, gid and fsGroup as a supplementary group")
	assert.Equal(t, "440 0 65532\n2777 0 65532\n2755 1000 65532", param(t, n, "stat"),
		"the key 0400|0440, root:fsGroup; the emptyDir 0777 with setgid, root:fsGroup; the output dir the stand-in made is as the user's mkdir would be")
	assert.Equal(t, "KEY+artifact", param(t, n, "read"))

	n = node(t, wf, "denied")
	assert.Equal(t, wfv1.NodeFailed, n.Phase)
	assert.Contains(t, n.Message, "Permission denied")
}

func (e *env) testArgoCLI(t *testing.T) {
	ctx := context.Background()
	out, err := e.r.Argo(ctx, "list")
	require.NoError(t, err)
	for _, name := range []string{"dag", "failing", "retry"} {
		assert.Contains(t, out, name)
	}
	out, err = e.r.Argo(ctx, "get", "dag")
	require.NoError(t, err)
	assert.Regexp(t, `Status:\s+Succeeded`, out)
	out, err = e.r.Argo(ctx, "get", "failing")
	require.NoError(t, err)
	assert.Contains(t, out, "boom: disk on fire")
}

// run submits a Workflow and waits for it to complete.
func (e *env) run(t *testing.T, manifest string) *wfv1.Workflow {
	t.Helper()
	wf := e.submit(t, manifest)
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		wf, err = e.wf.ArgoprojV1alpha1().Workflows(e.r.Namespace).Get(ctx, wf.Name, metav1.GetOptions{})
		return err == nil && wf.Status.Phase.Completed(), err
	})
	if err != nil {
		status, _ := yaml.Marshal(wf.Status)
		t.Fatalf("workflow %s did not complete: %v\n%s", wf.Name, err, status)
	}
	if t.Failed() || os.Getenv("RIG_VERBOSE") != "" {
		status, _ := yaml.Marshal(wf.Status)
		t.Logf("workflow %s status:\n%s", wf.Name, status)
	}
	return wf
}

func (e *env) submit(t *testing.T, manifest string) *wfv1.Workflow {
	t.Helper()
	var wf wfv1.Workflow
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &wf))
	created, err := e.wf.ArgoprojV1alpha1().Workflows(e.r.Namespace).Create(context.Background(), &wf, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// node finds a node by display name.
func node(t *testing.T, wf *wfv1.Workflow, name string) wfv1.NodeStatus {
	t.Helper()
	for _, n := range wf.Status.Nodes {
		if n.DisplayName == name {
			return n
		}
	}
	var names []string
	for _, n := range wf.Status.Nodes {
		names = append(names, n.DisplayName)
	}
	t.Fatalf("no node %q in workflow %s (nodes: %s)", name, wf.Name, strings.Join(names, ", "))
	return wfv1.NodeStatus{}
}

func param(t *testing.T, n wfv1.NodeStatus, name string) string {
	t.Helper()
	require.NotNil(t, n.Outputs, "node %s has outputs", n.DisplayName)
	for _, p := range n.Outputs.Parameters {
		if p.Name == name && p.Value != nil {
			return p.Value.String()
		}
	}
	t.Fatalf("node %s has no output parameter %q", n.DisplayName, name)
	return ""
}
