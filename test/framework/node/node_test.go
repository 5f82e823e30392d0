package node_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/node"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// TestRealNode runs pods in real containers on one node (a node takes about a minute to
// start, so its checks share it), then stops it and looks for anything left on the machine.
func TestRealNode(t *testing.T) {
	links, before := whenNoNode(t, interfaces), sysctls(t)
	n := node.ForTest(t, rig.Options{WorkflowController: true, MinimalArgoCRDs: true})
	e := &env{t: t, n: n, ns: n.Rig.Namespace, c: kubernetes.NewForConfigOrDie(n.Rig.RESTConfig)}
	require.NoError(t, n.WaitServiceAccount(e.ctx(), e.ns), "kube-controller-manager creates ServiceAccount default and ConfigMap kube-root-ca.crt")
	assert.Equal(t, before, sysctls(t), "the kubelet changed none of the machine's sysctls it wants (it runs with protectKernelDefaults false)")

	t.Run("secret volume mode read inside the container, and kubectl logs", e.secretMode)
	t.Run("images pulled from the registry through the hosts.toml mirror", e.pulledThroughMirror)
	t.Run("projected token reaches the apiserver through the kubernetes Service", e.serviceAccountToken)
	t.Run("Argo's executor passes an output parameter between two steps", e.workflowOutputParameter)
	t.Run("a DAG task's raw artifact argument reaches each attempt's file, resolved in every node's inputs", e.rawArtifactArgument)
	t.Run("a retry expression reads the exit code: 3 (a changed CR) runs once, 2 is retried", e.retryByExitCode)
	t.Run("pods run in the node's processes, and a container straight on containerd in its cgroup root", e.podsRun)
	t.Run("a pod reaches a simulated host on the bridge, which reaches nothing beyond it", e.simulatedHost)
	t.Run("the bridge keeps its MAC address as ports come and go", e.bridgeMAC)
	t.Run("a pod runs on across kill -9 of containerd and of the kubelet, each restarted", e.daemonsKilled)

	t.Run("Stop leaves nothing on the machine", func(t *testing.T) {
		dir := n.Rig.Dir
		require.NoError(t, n.Stop())
		// No other test's node may start meanwhile.
		release, err := node.Exclusive(e.ctx())
		require.NoError(t, err)
		defer func() { require.NoError(t, release()) }()
		_, err = os.Stat("/sys/class/net/bpanode0")
		assert.True(t, os.IsNotExist(err), "bridge bpanode0 removed (stat: %v)", err)
		assert.Equal(t, links, interfaces(t), "network interfaces as before: no pod's or simulated host's veth, so no pod netns")
		left, err := node.IPTablesLeftovers()
		require.NoError(t, err)
		assert.Empty(t, left, "KUBE-* or CNI-* chains in iptables")
		mounts, err := os.ReadFile("/proc/self/mountinfo")
		require.NoError(t, err)
		assert.NotContains(t, string(mounts), dir, "mounts under the node's dir")
		cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/bpa-node")
		assert.Empty(t, cgroups, "cgroups")
		_, err = os.Stat(dir)
		assert.True(t, os.IsNotExist(err), "%s removed (stat: %v)", dir, err)
		for _, d := range []string{"/run/containerd", "/var/lib/cni"} {
			entries, err := os.ReadDir(d)
			assert.True(t, os.IsNotExist(err) || len(entries) > 0, "%s: the empty mount point made for the node is left (%v)", d, err)
		}
		assert.Empty(t, processesOf(t, n.Rig.BinDir), "processes of the bin dir's binaries")
	})
}

type env struct {
	t  *testing.T
	n  *node.Node
	ns string
	c  kubernetes.Interface
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

// runPod creates a busybox pod running script and returns its final phase.
func (e *env) runPod(t *testing.T, name, script string, mutate func(*corev1.Pod)) corev1.PodPhase {
	ctx := e.ctx()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: node.BusyboxImage,
				Command: []string{"sh", "-c", script},
			}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	_, err := e.c.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var phase corev1.PodPhase
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.c.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, nil
	}), "pod %s ends", name)
	return phase
}

// kubectlLogs is `kubectl logs` with the rig's admin kubeconfig: apiserver, then the
// kubelet's API on the node's address.
func (e *env) kubectlLogs(t *testing.T, args ...string) string {
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", e.n.Rig.Kubeconfig, "-n", e.ns, "logs"}, args...)...).CombinedOutput()
	require.NoError(t, err, "kubectl logs: %s", out)
	return string(out)
}

func (e *env) secretMode(t *testing.T) {
	_, err := e.c.CoreV1().Secrets(e.ns).Create(e.ctx(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "key"},
		StringData: map[string]string{"id_ed25519": "not a real key"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	phase := e.runPod(t, "secret-mode", `echo "mode $(stat -L -c %a /secret/id_ed25519)"`, func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "key", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "key", DefaultMode: ptr.To[int32](0o440)}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "key", MountPath: "/secret"}}
	})
	assert.Equal(t, corev1.PodSucceeded, phase)
	assert.Equal(t, "mode 440\n", e.kubectlLogs(t, "secret-mode"))
}

// pulledThroughMirror: the node holds no image until a pod asks for it (nothing is
// imported), so the first pod's image was pulled, by its original name, from the node's
// registry: the kubelet's Pulled event says how long it took.
func (e *env) pulledThroughMirror(t *testing.T) {
	events, err := e.c.CoreV1().Events(e.ns).List(e.ctx(), metav1.ListOptions{FieldSelector: "reason=Pulled,involvedObject.name=secret-mode"})
	require.NoError(t, err)
	require.Len(t, events.Items, 1, "one Pulled event for pod secret-mode")
	msg := events.Items[0].Message
	assert.Contains(t, msg, "Successfully pulled image \""+node.BusyboxImage+"\"", "pulled, not already present")
	t.Logf("kubelet: %s", msg)
	out, err := e.n.Ctr(e.ctx(), "images", "ls", "-q")
	require.NoError(t, err)
	assert.Contains(t, out, node.PauseImage, "the sandbox image, pulled by containerd's CRI")
}

func (e *env) serviceAccountToken(t *testing.T) {
	phase := e.runPod(t, "whoami", `echo "service $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"; probe whoami`, nil)
	logs := e.kubectlLogs(t, "whoami")
	assert.Equal(t, corev1.PodSucceeded, phase, logs)
	assert.Equal(t, fmt.Sprintf("service %s:443\nsystem:serviceaccount:%s:default\n", rig.KubernetesServiceIP, e.ns), logs)
}

// produceTemplate writes its pod's name, prefixed with passed-, to its output parameter msg.
const produceTemplate = `  - name: produce
    container:
      image: ` + node.BusyboxImage + `
      command: [sh, -c, "printf 'passed-%s' $(hostname) > /tmp/out.txt"]
    outputs:
      parameters: [{name: msg, valueFrom: {path: /tmp/out.txt}}]
`

// twoSteps passes produce's output parameter, read by Argo's wait container from a file the
// step wrote, to consume.
const twoSteps = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: two-steps}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - name: produce
        template: produce
    - - name: consume
        template: consume
        arguments:
          parameters: [{name: msg, value: "{{steps.produce.outputs.parameters.msg}}"}]
` + produceTemplate + `  - name: consume
    inputs:
      parameters: [{name: msg}]
    container:
      image: ` + node.BusyboxImage + `
      command: [sh, -c, "echo got: {{inputs.parameters.msg}}"]
`

// executorRights gives the namespace's default account what Argo's executor needs: its wait
// container reports outputs as WorkflowTaskResults.
func (e *env) executorRights(t *testing.T) {
	ctx := e.ctx()
	_, err := e.c.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"}, Verbs: []string{"create", "patch"}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = e.c.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "argo-executor"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "default", Namespace: e.ns}},
	}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// runWorkflow creates the Workflow text names and waits for it to end, returning it; it
// fails t unless it Succeeded.
func (e *env) runWorkflow(t *testing.T, ctx context.Context, text string) *unstructured.Unstructured {
	var wf unstructured.Unstructured
	require.NoError(t, yaml.Unmarshal([]byte(text), &wf.Object))
	wfs := dynamic.NewForConfigOrDie(e.n.Rig.RESTConfig).Resource(schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}).Namespace(e.ns)
	start := time.Now()
	_, err := wfs.Create(ctx, &wf, metav1.CreateOptions{})
	require.NoError(t, err)
	var phase string
	var got *unstructured.Unstructured
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if got, err = wfs.Get(ctx, wf.GetName(), metav1.GetOptions{}); err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(got.Object, "status", "phase")
		return phase == "Succeeded" || phase == "Failed" || phase == "Error", nil
	}))
	t.Logf("Workflow %s %s in %s", wf.GetName(), phase, time.Since(start).Round(100*time.Millisecond))
	status, _ := yaml.Marshal(got.Object["status"])
	require.Equal(t, "Succeeded", phase, "%s", status)
	return got
}

// workflowNodes runs the Workflow text until it succeeds and returns its nodes by name.
func (e *env) workflowNodes(t *testing.T, text string) map[string]wfv1.NodeStatus {
	e.executorRights(t)
	got := e.runWorkflow(t, e.ctx(), text)
	var wf wfv1.Workflow
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &wf))
	byName := map[string]wfv1.NodeStatus{}
	for _, n := range wf.Status.Nodes {
		byName[n.Name] = n
	}
	return byName
}

func (e *env) workflowOutputParameter(t *testing.T) {
	ctx := e.ctx()
	e.executorRights(t)
	e.runWorkflow(t, ctx, twoSteps)

	pods, err := e.c.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=two-steps"})
	require.NoError(t, err)
	var consume, produce string
	for _, p := range pods.Items {
		switch {
		case strings.Contains(p.Name, "consume"):
			consume = p.Name
		case strings.Contains(p.Name, "produce"):
			produce = p.Name
		}
	}
	require.NotEmpty(t, consume, "consume's pod")
	// Argo's emissary logs its own line after the step's.
	logs := e.kubectlLogs(t, consume, "-c", "main")
	assert.Equal(t, "got: passed-"+produce, strings.Split(logs, "\n")[0],
		"consume got the parameter produce wrote (its hostname is its pod's name): %s", logs)
}

// rawArtifactDAG passes produce's output parameter to consume as a raw artifact only, as
// BPA's DAGs pass run-kubespray its inventory. consume is retried (its first attempt fails):
// Argo keeps the inputs in the Retry node and in each attempt's pod node.
const rawArtifactDAG = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: raw-artifact}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - name: produce
        template: produce
      - name: consume
        template: consume
        depends: produce
        arguments:
          artifacts: [{name: msg, raw: {data: "{{tasks.produce.outputs.parameters.msg}}"}}]
` + produceTemplate + `  - name: consume
    inputs:
      artifacts: [{name: msg, path: /bpa/in/msg.txt}]
    retryStrategy: {limit: "1", retryPolicy: Always}
    container:
      image: ` + node.BusyboxImage + `
      command: [sh, -c, 'echo "got: $(cat /bpa/in/msg.txt)"; test {{retries}} -gt 0']
`

// rawArtifactArgument: the file each attempt of consume reads holds what produce wrote, and
// the Workflow's status records it resolved in the inputs of the Retry node and of each
// attempt (test/bench's finishedStatus models this to size a 1,000-node run).
func (e *env) rawArtifactArgument(t *testing.T) {
	ctx := e.ctx()
	byName := e.workflowNodes(t, rawArtifactDAG)

	pods, err := e.c.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=raw-artifact"})
	require.NoError(t, err)
	podOf := map[string]string{} // node name -> pod name
	for _, p := range pods.Items {
		podOf[p.Annotations["workflows.argoproj.io/node-name"]] = p.Name
	}
	produce := podOf["raw-artifact.produce"]
	require.NotEmpty(t, produce, "produce's pod: %v", podOf)
	want := "passed-" + produce

	retry := byName["raw-artifact.consume"]
	assert.Equal(t, wfv1.NodeTypeRetry, retry.Type)
	require.Len(t, retry.Children, 2, "a failed attempt and the one after it")
	for _, name := range []string{"raw-artifact.consume", "raw-artifact.consume(0)", "raw-artifact.consume(1)"} {
		n := byName[name]
		require.NotNil(t, n.Inputs, name)
		assert.Empty(t, n.Inputs.Parameters, name)
		require.Len(t, n.Inputs.Artifacts, 1, name)
		a := n.Inputs.Artifacts[0]
		assert.Equal(t, "msg", a.Name, name)
		assert.Equal(t, "/bpa/in/msg.txt", a.Path, "%s: the template's path", name)
		require.NotNil(t, a.Raw, name)
		assert.Equal(t, want, a.Raw.Data, "%s records the data resolved", name)
	}
	for i, phase := range []wfv1.NodePhase{wfv1.NodeFailed, wfv1.NodeSucceeded} {
		name := fmt.Sprintf("raw-artifact.consume(%d)", i)
		assert.Equal(t, phase, byName[name].Phase, name)
		pod := podOf[name]
		require.NotEmpty(t, pod, "%s's pod: %v", name, podOf)
		logs := e.kubectlLogs(t, pod, "-c", "main")
		assert.Equal(t, "got: "+want, strings.Split(logs, "\n")[0], "%s read the file: %s", name, logs)
	}
}

// retryExitCodeDAG runs one template that exits with its input, under the retry strategy
// of BPA's steps that check their run's generation (workflowtemplates.NotChangedExpression).
var retryExitCodeDAG = `apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: retry-exit-code}
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - {name: changed, template: exit, continueOn: {failed: true}, arguments: {parameters: [{name: code, value: "` + strconv.Itoa(stepio.ExitChanged) + `"}]}}
      - {name: failed, template: exit, continueOn: {failed: true}, arguments: {parameters: [{name: code, value: "2"}]}}
  - name: exit
    inputs: {parameters: [{name: code}]}
    retryStrategy: {limit: "1", retryPolicy: Always, expression: '` + workflowtemplates.NotChangedExpression + `'}
    container:
      image: ` + node.BusyboxImage + `
      command: [sh, -c, 'exit {{inputs.parameters.code}}']
`

// retryByExitCode: Argo's lastRetry.exitCode is the container's, so a step that found its CR
// changed (exit 3) runs once, and any other failure is retried.
func (e *env) retryByExitCode(t *testing.T) {
	byName := e.workflowNodes(t, retryExitCodeDAG)
	for task, attempts := range map[string]int{"changed": 1, "failed": 2} {
		n := byName["retry-exit-code."+task]
		assert.Equal(t, wfv1.NodeTypeRetry, n.Type, task)
		assert.Equal(t, wfv1.NodeFailed, n.Phase, task)
		assert.Len(t, n.Children, attempts, "%s's attempts", task)
	}
}

// podsRun starts pods at once and sees each Running, then finds the node's processes
// where Node.Pids says they are (BenchmarkNodePodStart reads their memory there), and a
// container that Node.RunContainer starts (the benchmark's floor) in the node's cgroup
// root. How long a start takes is that benchmark's.
func (e *env) podsRun(t *testing.T) {
	const n = 5
	ctx := e.ctx()
	_, _, before := e.n.Pids()
	for i := range n {
		_, err := e.c.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "run-" + strconv.Itoa(i)},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "main", Image: node.BusyboxImage, Command: []string{"sleep", "60"}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range n {
		name := "run-" + strconv.Itoa(i)
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := e.c.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning, err
		}), "pod %s Running", name)
	}
	kubelet, containerd, shims := e.n.Pids()
	procs := processesOf(t, e.n.Rig.BinDir)
	assert.Equal(t, []int{kubelet}, procs["kubelet"], "Pids' kubelet is the bin dir's one")
	assert.Equal(t, []int{containerd}, procs["containerd"], "Pids' containerd is the bin dir's one")
	assert.Subset(t, procs["containerd-shim-runc-v2"], shims, "Pids' shims are the bin dir's")
	assert.GreaterOrEqual(t, len(slices.DeleteFunc(shims, func(p int) bool { return slices.Contains(before, p) })), n,
		"a new shim for each pod")

	require.NoError(t, e.n.RunContainer(ctx, "floor", node.BusyboxImage, "sleep", "60"))
	tasks, err := e.n.Ctr(ctx, "tasks", "ls")
	require.NoError(t, err)
	var pid string
	for _, l := range strings.Split(tasks, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "floor" && f[2] == "RUNNING" {
			pid = f[1]
		}
	}
	require.NotEmpty(t, pid, "the container runs: %s", tasks)
	cgroup, err := os.ReadFile("/proc/" + pid + "/cgroup")
	require.NoError(t, err)
	assert.Contains(t, string(cgroup), ":/bpa-node/ctr-floor\n", "the container's cgroup is under the node's root")
	require.NoError(t, e.n.RemoveContainer(ctx, "floor"))
	containers, err := e.n.Ctr(ctx, "containers", "ls", "-q")
	require.NoError(t, err)
	assert.NotContains(t, strings.Fields(containers), "floor", "RemoveContainer removed it")
	require.NoError(t, e.c.CoreV1().Pods(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
}

// simulatedHost starts a simulated host on the node's bridge (simhost.StartOn at a
// HostAddress): a pod reads its sshd's banner over the pod network, and the host's own
// network namespace has a route to the bridge's subnet only.
func (e *env) simulatedHost(t *testing.T) {
	addr, err := e.n.HostAddress()
	require.NoError(t, err)
	assert.Equal(t, "10.213.255.254/16", addr.String(), "the first host address is the top of the bridge's subnet")
	h := simhost.NewCluster(t).StartOn("h1", simhost.Network{Bridge: node.Bridge, Address: addr})
	phase := e.runPod(t, "ssh-banner", "echo | nc -w 5 "+h.IP+" 22 | head -c 8", nil)
	assert.Equal(t, corev1.PodSucceeded, phase)
	assert.Equal(t, "SSH-2.0-", e.kubectlLogs(t, "ssh-banner"), "the host's sshd answered the pod")
	out, err := exec.Command("nsenter", "--net="+h.NetNS(), "ip", "route").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "10.213.0.0/16 dev eth0 proto kernel scope link src 10.213.255.254 \n", string(out),
		"no route out of the host's namespace but the bridge's subnet")

	// A second host at the same address fails to start, and leaves the first one's veth.
	msg := fatalOf(t, func(ft framework.T) {
		simhost.NewCluster(ft).StartOn("twin", simhost.Network{Bridge: node.Bridge, Address: addr})
	})
	assert.Contains(t, msg, "is another host at 10.213.255.254?")
	assert.Equal(t, corev1.PodSucceeded, e.runPod(t, "ssh-banner-again", "echo | nc -w 5 "+h.IP+" 22 | head -c 8", nil))
	assert.Equal(t, "SSH-2.0-", e.kubectlLogs(t, "ssh-banner-again"), "the first host still answers")

	// A host whose test dies before Stop: its processes die (Pdeathsig), and its namespace
	// and veth go with them. (Pods' veths, which come and go meanwhile, are left out.)
	links := func() []string {
		return slices.DeleteFunc(interfaces(t), func(l string) bool { return strings.HasPrefix(l, "veth") })
	}
	before := links()
	addr, err = e.n.HostAddress()
	require.NoError(t, err)
	killed := simhost.NewCluster(t).StartOn("killed", simhost.Network{Bridge: node.Bridge, Address: addr})
	assert.Len(t, links(), len(before)+1, "the host's veth on the machine: %v", links())
	require.NoError(t, syscall.Kill(killed.Processes()[0], syscall.SIGKILL))
	assert.Eventually(t, func() bool { return slices.Equal(before, links()) }, 10*time.Second, 50*time.Millisecond,
		"the killed host's veth is gone with its namespace")
}

// bridgeMAC: a port with the lowest MAC there is joins the bridge and leaves, and the
// bridge's own MAC stays. (A bridge takes its lowest port's MAC unless one was set, and the
// hosts and pods that cached the old one for the apiservers' address then lose them.)
func (e *env) bridgeMAC(t *testing.T) {
	mac := func() string {
		b, err := os.ReadFile("/sys/class/net/" + node.Bridge + "/address")
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	before := mac()
	out, err := exec.Command("ip", "link", "add", "bpatest-mac0", "address", "00:00:00:00:00:01", "type", "veth", "peer", "name", "bpatest-mac1").CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", "bpatest-mac0").Run() })
	out, err = exec.Command("ip", "link", "set", "bpatest-mac0", "master", node.Bridge, "up").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, before, mac(), "with a port of a lower MAC")
	out, err = exec.Command("ip", "link", "del", "bpatest-mac0").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, before, mac(), "after it left")
}

// fatalT is a framework.T whose Fatalf ends the function fatalOf runs, not the test.
type fatalT struct {
	*testing.T
	msg      string
	cleanups []func()
}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}
func (f *fatalT) Errorf(format string, args ...any) { f.Logf("(expected) "+format, args...) }
func (f *fatalT) Cleanup(fn func())                 { f.cleanups = append(f.cleanups, fn) }
func (f *fatalT) Failed() bool                      { return f.msg != "" }

// fatalOf runs start with a fatalT, then its cleanups, and returns what it was fatal about.
func fatalOf(t *testing.T, start func(framework.T)) string {
	ft := &fatalT{T: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != ft {
				panic(r)
			}
		}()
		start(ft)
	}()
	for i := len(ft.cleanups) - 1; i >= 0; i-- {
		ft.cleanups[i]()
	}
	require.NotEmpty(t, ft.msg, "start failed")
	return ft.msg
}

// processesOf maps the node's programs in binDir to the pids running them.
func processesOf(t *testing.T, binDir string) map[string][]int {
	real, err := filepath.EvalSymlinks(binDir)
	require.NoError(t, err)
	found := map[string][]int{}
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || filepath.Dir(exe) != real {
			continue
		}
		switch b := filepath.Base(exe); b {
		case "kubelet", "containerd", "containerd-shim-runc-v2", "kube-proxy", "runc":
			found[b] = append(found[b], pid)
		}
	}
	return found
}

// whenNoNode returns what f sees while no node runs on the machine (another test's node
// may be running when it is called).
func whenNoNode[V any](t *testing.T, f func(*testing.T) V) V {
	release, err := node.Exclusive(context.Background())
	require.NoError(t, err)
	defer func() { require.NoError(t, release()) }()
	return f(t)
}

// interfaces are the machine's network interfaces but the node's bridge, which a killed
// test may have left (the next node removes it).
func interfaces(t *testing.T) []string {
	ifs, err := net.Interfaces()
	require.NoError(t, err)
	var names []string
	for _, i := range ifs {
		if i.Name != "bpanode0" {
			names = append(names, i.Name)
		}
	}
	return names
}

// sysctls are the machine's values of the global sysctls the kubelet sets when they differ
// from what it wants (1, 10, 1).
func sysctls(t *testing.T) []string {
	var values []string
	for _, f := range []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"} {
		v, err := os.ReadFile("/proc/sys/" + f)
		require.NoError(t, err)
		values = append(values, f+"="+strings.TrimSpace(string(v)))
	}
	return values
}
