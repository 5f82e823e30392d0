// Package kubelet is a SIMULATED kubelet for the test rig (test/rig): no
// containers, no images, no isolation. It watches the pods Argo creates for
// Workflow steps and runs each pod's `main` container command as a LOCAL
// PROCESS, then reports the outcome the way Argo's executor and a kubelet
// would, so the real workflow-controller carries the Workflow on:
//
//   - the pod's ConfigMap, Secret and emptyDir volumes, Argo's raw input
//     artifacts and script sources are written into a per-pod directory, and
//     every mount path, artifact path, output-parameter path and the
//     termination-message path is rewritten to that directory in the
//     command, args and env values, so step code needs no test hooks; volume
//     files get the modes and fsGroup ownership a real kubelet gives them
//     (defaultMode, item modes, fsGroup: volumes.go), and downwardAPI and
//     projected (Secret, ConfigMap, downwardAPI sources) volumes are written;
//   - the command runs with KUBECONFIG (the rig's), POD_NAME and
//     POD_NAMESPACE set, as the securityContext's runAsUser, runAsGroup,
//     fsGroup and supplementalGroups when the stand-in is root (user.go; a
//     user left to the image runs as the stand-in), resolved through
//     Options.Executables or
//     Options.Runners (a container's command or image mapped to a local
//     binary or an in-process fake);
//   - output parameters (valueFrom.path) and, when asked for, the script
//     result are reported in a WorkflowTaskResult, then the pod status is set
//     to Succeeded or Failed with `main` and `wait` container statuses.
//
// What it does not simulate: output artifacts, non-raw input artifacts,
// resource/containerSet templates, probes, resource limits, and signals from
// the controller (Argo stops a running pod through pods/exec, which needs a
// real kubelet; the stand-in kills a process when its pod is deleted or
// outlives spec.activeDeadlineSeconds).
package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	wfclientset "github.com/argoproj/argo-workflows/v3/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Argo's names for pods, containers, labels and env (workflow/common).
const (
	labelWorkflow         = "workflows.argoproj.io/workflow"
	labelOutputsCompleted = "workflows.argoproj.io/report-outputs-completed"
	annotationNodeID      = "workflows.argoproj.io/node-id"
	containerMain         = "main"
	containerInit         = "init"
	containerWait         = "wait"
	envTemplate           = "ARGO_TEMPLATE"
	envIncludeScript      = "ARGO_INCLUDE_SCRIPT_OUTPUT"
	scriptSourcePath      = "/argo/staging/script"
)

// Options configure the stand-in kubelet.
type Options struct {
	// Config is the identity the stand-in uses for pods, ConfigMaps,
	// Secrets and WorkflowTaskResults (the rig's admin RESTConfig).
	Config *rest.Config
	// Kubeconfig is passed to every process as KUBECONFIG, unless the
	// container sets KUBECONFIG itself.
	Kubeconfig string
	// AsServiceAccount runs each process with a token of its pod's service
	// account (a kubeconfig in the pod dir) and reports its task result with
	// that token, as Argo's executor does: RBAC is then checked as in a real
	// cluster. The service account must exist.
	AsServiceAccount bool
	// Namespace whose Workflow pods are run.
	Namespace string
	// Executables maps a container's command[0] (as written, or its base
	// name) to a local binary that replaces it, e.g. "bpa" -> a freshly built
	// bpa, "sh" -> "/bin/sh". A key may also be an image (with or without
	// tag): the binary then stands in for the whole image and receives the
	// container's full command line as its arguments.
	// Commands that resolve through neither map fail the pod: running host
	// binaries by accident would make tests depend on the machine.
	Executables map[string]string
	// Runners maps the same keys as Executables to in-process fakes; they
	// win over Executables. Handy for simulating failures.
	Runners map[string]Runner
	// ImageUsers maps an image, without tag or digest, to the uid and gid its
	// USER names (e.g. "ghcr.io/akraino-edge-stack/bpa" -> {65532, 65532}): what
	// a runtime runs a container as when its securityContext sets no user.
	ImageUsers map[string]ImageUser
	// OnPod, when set, sees every new pod first; returning true means the
	// test handles (or deliberately ignores) it and the stand-in leaves it.
	OnPod func(pod *corev1.Pod) (handled bool)
	// Concurrency is how many pods run at once (default 4).
	Concurrency int
	// WorkDir holds one directory per pod (volumes, logs). Default: a
	// temporary directory removed by Stop; a given WorkDir is kept. A pod
	// that sets runAsUser runs as that user (when the stand-in is root),
	// who must be able to traverse WorkDir: the default one is 0711, a
	// t.TempDir() is not. Such a user must also be able to read
	// Options.Kubeconfig (unless AsServiceAccount) and run the Executables.
	WorkDir string
	// Logf receives the stand-in's own log lines (default: log.Printf).
	Logf func(format string, args ...any)
	// TLSConfig, when set, serves the kubelet API's containerLogs endpoint on 127.0.0.1
	// with it (rig.KubeletTLSConfig), registers a Node named NodeName that points there and
	// binds each pod the stand-in runs to it, so pods/log (kubectl logs, argo logs, the Argo
	// UI) reaches every container's log. Without it, logs stay in the pod dirs.
	TLSConfig *tls.Config
	// NodeName is the Node's name (default "simulated-node-<Namespace>").
	NodeName string
}

// Kubelet is a running stand-in kubelet.
type Kubelet struct {
	opts    Options
	kube    kubernetes.Interface
	wf      wfclientset.Interface
	queue   workqueue.TypedInterface[string]
	store   cache.Store
	tempDir bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	seen    map[types.UID]bool               // pods ever claimed: each pod runs once
	running map[types.UID]context.CancelFunc // to kill the process of a deleted pod
	// terminating are the pods whose deletion the stand-in confirms once stopped
	terminating map[types.UID]bool
	dirs        map[string]string   // pod name and Argo node ID -> pod dir
	logs        map[string]*podLogs // pod name -> its containers' logs
	server      *http.Server        // the kubelet API, with Options.TLSConfig
}

// Start starts watching and returns once the pod cache has synced. Stop it
// with Stop (which kills every running process).
func Start(ctx context.Context, opts Options) (*Kubelet, error) {
	if opts.Config == nil || opts.Namespace == "" {
		return nil, fmt.Errorf("simulated kubelet: Options.Config and Options.Namespace are required")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Logf == nil {
		opts.Logf = log.Printf
	}
	k := &Kubelet{
		opts:    opts,
		queue:   workqueue.NewTyped[string](),
		seen:    map[types.UID]bool{},
		running: map[types.UID]context.CancelFunc{},
		dirs:    map[string]string{},
		logs:    map[string]*podLogs{},

		terminating: map[types.UID]bool{},
	}
	if k.opts.NodeName == "" {
		k.opts.NodeName = "simulated-node-" + opts.Namespace
	}
	var err error
	if k.kube, err = kubernetes.NewForConfig(opts.Config); err != nil {
		return nil, err
	}
	if k.wf, err = wfclientset.NewForConfig(opts.Config); err != nil {
		return nil, err
	}
	if k.opts.WorkDir == "" {
		if k.opts.WorkDir, err = os.MkdirTemp("", "bpa-kubelet-"); err != nil {
			return nil, err
		}
		k.tempDir = true
		// Traversable (not listable) by a pod's runAsUser.
		if err := os.Chmod(k.opts.WorkDir, 0o711); err != nil {
			return nil, err
		}
	}

	factory := informers.NewSharedInformerFactoryWithOptions(k.kube, 0,
		informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelWorkflow }))
	inf := factory.Core().V1().Pods().Informer()
	k.store = inf.GetStore()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.enqueue,
		UpdateFunc: func(_, obj any) { k.enqueue(obj) },
		DeleteFunc: k.deleted,
	}); err != nil {
		return nil, err
	}
	startCtx := ctx
	ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		k.Stop()
		return nil, fmt.Errorf("simulated kubelet: pod cache did not sync")
	}
	if opts.TLSConfig != nil {
		port, err := k.serve()
		if err == nil {
			err = k.registerNode(startCtx, port)
		}
		if err != nil {
			k.Stop()
			return nil, fmt.Errorf("simulated kubelet: serve the kubelet API: %w", err)
		}
		k.logf("node %s: kubelet API (containerLogs) on https://127.0.0.1:%d", k.opts.NodeName, port)
	}
	for range opts.Concurrency {
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			for k.next(ctx) {
			}
		}()
	}
	go func() { <-ctx.Done(); k.queue.ShutDown() }()
	k.logf("started: watching Workflow pods in namespace %s, %d at a time, pod dirs under %s",
		opts.Namespace, opts.Concurrency, k.opts.WorkDir)
	return k, nil
}

// Stop kills every running process (without reporting them) and waits for
// the workers; a temporary WorkDir is removed.
func (k *Kubelet) Stop() {
	k.cancel()
	if k.server != nil {
		_ = k.server.Close()
	}
	k.mu.Lock()
	for _, cancel := range k.running {
		cancel()
	}
	k.mu.Unlock()
	k.wg.Wait()
	if k.tempDir {
		_ = os.RemoveAll(k.opts.WorkDir)
	}
}

// PodDir is the directory of a pod the stand-in ran (volumes/, fs/, logs/<container>.log),
// by pod name or Argo node ID; "" if it never ran it.
func (k *Kubelet) PodDir(podOrNode string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dirs[podOrNode]
}

// Log returns the combined stdout and stderr of a pod's main process, by pod
// name or Argo node ID, without timestamps.
func (k *Kubelet) Log(podOrNode string) string {
	dir := k.PodDir(podOrNode)
	if dir == "" {
		return ""
	}
	b, _ := os.ReadFile(newPodLogs(dir).path(containerMain))
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if e, ok := parseEntry(strings.TrimSuffix(line, "\n")); ok {
			out.WriteString(e.line + "\n")
		}
	}
	return out.String()
}

func (k *Kubelet) logf(format string, args ...any) {
	k.opts.Logf("simulated kubelet: "+format, args...)
}

func (k *Kubelet) enqueue(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if ok && pod.DeletionTimestamp != nil && pod.Spec.NodeName == k.opts.NodeName {
		k.terminate(pod)
	}
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
		return
	}
	k.mu.Lock()
	seen := k.seen[pod.UID]
	k.mu.Unlock()
	if !seen {
		k.queue.Add(pod.Namespace + "/" + pod.Name)
	}
}

func (k *Kubelet) deleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	cancel := k.running[pod.UID]
	k.mu.Unlock()
	if cancel != nil {
		k.logf("pod %s deleted while running: killing its process", pod.Name)
		cancel()
	}
}

// terminate finishes the graceful deletion of a pod bound to the stand-in's Node, as a
// kubelet does: the apiserver keeps such a pod until its kubelet has stopped it and deletes
// it with grace period 0.
func (k *Kubelet) terminate(pod *corev1.Pod) {
	k.mu.Lock()
	cancel := k.running[pod.UID]
	already := k.terminating[pod.UID]
	k.terminating[pod.UID] = true
	k.mu.Unlock()
	if already {
		return
	}
	if cancel != nil {
		k.logf("pod %s deleted while running: killing its process", pod.Name)
		cancel()
	}
	go func() {
		ctx, stop := context.WithTimeout(context.Background(), killGrace+30*time.Second)
		defer stop()
		for {
			k.mu.Lock()
			_, running := k.running[pod.UID]
			k.mu.Unlock()
			if !running {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		err := k.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			k.logf("pod %s: confirm deletion: %v", pod.Name, err)
		}
	}()
}

// next runs one queued pod; false once the queue is shut down.
func (k *Kubelet) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	obj, exists, err := k.store.GetByKey(key)
	if err != nil || !exists {
		return true
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if pod.DeletionTimestamp != nil || (pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending) {
		return true
	}
	k.mu.Lock()
	if k.seen[pod.UID] {
		k.mu.Unlock()
		return true
	}
	k.seen[pod.UID] = true
	podCtx, cancel := context.WithCancel(ctx)
	k.running[pod.UID] = cancel
	k.mu.Unlock()
	defer func() {
		cancel()
		k.mu.Lock()
		delete(k.running, pod.UID)
		k.mu.Unlock()
	}()

	if k.opts.OnPod != nil && k.opts.OnPod(pod) {
		k.logf("pod %s handled by the test's OnPod hook", pod.Name)
		return true
	}
	if k.opts.TLSConfig != nil {
		if err := k.bind(podCtx, pod); err != nil {
			k.logf("pod %s: bind to node %s: %v", pod.Name, k.opts.NodeName, err)
			return true
		}
		pod.Spec.NodeName = k.opts.NodeName
	}
	start := time.Now()
	if err := k.runPod(podCtx, pod); err != nil {
		if podCtx.Err() != nil {
			k.logf("pod %s abandoned: %v", pod.Name, err)
		} else {
			k.logf("pod %s: %v", pod.Name, err)
		}
		return true
	}
	k.logf("pod %s done in %s", pod.Name, time.Since(start).Round(time.Millisecond))
	return true
}
