package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/test/framework/node"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

var (
	nodePods = flag.Int("node-pods", 30, "pods BenchmarkNodePodStart starts, and floor containers beside them (below 100, p99 is the slowest)")
	nodeWave = flag.Int("node-wave", 3, "pods (or floor containers) BenchmarkNodePodStart starts at once")
)

// BenchmarkNodePodStart measures, on one real node (test/framework/node: kubelet,
// containerd, runc, the CNI bridge), how long a pod takes from its create to Running, and
// what the node costs in memory.
//
// Pods start in waves of -node-wave (3) at once, -node-pods (30) in all, each wave waiting
// for the last to be Running, so that the figure is a start and not a queue on two cores.
// Each pod runs `sleep` from the node's busybox image, already pulled (an untimed pod pulls
// it first), with its ServiceAccount token mounted as every pod's is; the pods stay until
// the end. The floor, side by side: the same container, image and runc started straight on
// the node's containerd (Node.RunContainer, `ctr run -d`), in waves of the same size that
// alternate with the pods' (which goes first alternates too), each removed after its wave.
// The ratios say what the apiserver round trips, the scheduler, the kubelet, the pod
// sandbox (pause container, network namespace, CNI) and the token volume add to a
// container's start.
//
//   - pod-p50-ms, pod-p99-ms: the client's wall, from just before the create to the moment
//     its watch sees the pod Running (nearest rank: below 100 pods, p99 is the slowest);
//   - ctr-p50-ms, ctr-p99-ms: the floor's wall, from the start of `ctr run` to its return
//     once the task has started; p50-ratio, p99-ratio: pod over floor;
//   - server-p50-s, server-p99-s: the container's startedAt less the pod's
//     creationTimestamp, as the apiserver stores them: in whole seconds, so ±1 s;
//   - idle-kubelet-MiB, idle-containerd-MiB: VmRSS once the node is Ready, before any pod;
//     kubelet-MiB, containerd-MiB: with the pods running; after-kubelet-MiB,
//     after-containerd-MiB: once they are deleted and their shims have exited (shims-gone-s
//     after the pods left the API, which they do before their sandboxes are removed;
//     after-shims: those left if three minutes were not enough);
//   - shims, shims-MiB, shims-pss-MiB: the containerd shims running the pods (one per pod),
//     their VmRSS summed (which counts the binary's shared pages once per shim) and their
//     proportional set size summed (which shares them out);
//   - apiserver-MiB: the rig's kube-apiserver's VmRSS with the pods running, and
//     node-over-apiserver: kubelet plus containerd over it, for scale (no target exists).
func BenchmarkNodePodStart(b *testing.B) {
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x")
	}
	if *nodePods < 1 || *nodeWave < 1 {
		b.Fatal("-node-pods and -node-wave must be positive")
	}
	n := node.ForTest(b, rig.Options{MinimalArgoCRDs: true})
	idle := readNodeMemory(b, n)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	e := nodeEnv(b, n.Rig)
	c := kubernetes.NewForConfigOrDie(e.cfg)
	ns := n.Rig.Namespace
	waitCtx, waitCancel := context.WithTimeout(ctx, time.Minute)
	defer waitCancel()
	must(b, n.WaitServiceAccount(waitCtx, ns), "waiting for ServiceAccount default and ConfigMap kube-root-ca.crt")
	seen := newRunningPods()
	e.watch(b, ns, &corev1.Pod{}, seen.observe)

	// Untimed: the first pod pulls the image (through the node's registry mirror), which
	// the floor's containers then find in place; and one container of each warms the paths.
	startPods(ctx, b, c, seen, ns, "warm", 1)
	startContainers(ctx, b, n, "warm", 1)

	var pods, ctrs []time.Duration
	for w := 0; len(pods) < *nodePods; w++ {
		size := min(*nodeWave, *nodePods-len(pods))
		pw := func() { pods = append(pods, startPods(ctx, b, c, seen, ns, "w"+strconv.Itoa(w), size)...) }
		cw := func() { ctrs = append(ctrs, startContainers(ctx, b, n, "w"+strconv.Itoa(w), size)...) }
		if w%2 == 0 {
			pw()
			cw()
		} else {
			cw()
			pw()
		}
	}
	server := serverStarts(ctx, b, c, ns)
	loaded := readNodeMemory(b, n)
	apiserver, _, _, err := memory(rigPid(b, n.Rig, "kube-apiserver"))
	must(b, err, "the kube-apiserver's memory")
	deleteAllPods(ctx, b, c, ns)
	after, shimsGone := awaitShimsGone(b, n)

	b.ReportMetric(0, "ns/op")
	podP50, podP99, ctrP50, ctrP99 := percentile(pods, 50), percentile(pods, 99), percentile(ctrs, 50), percentile(ctrs, 99)
	b.ReportMetric(ms(podP50), "pod-p50-ms")
	b.ReportMetric(ms(podP99), "pod-p99-ms")
	b.ReportMetric(ms(ctrP50), "ctr-p50-ms")
	b.ReportMetric(ms(ctrP99), "ctr-p99-ms")
	b.ReportMetric(float64(podP50)/float64(ctrP50), "p50-ratio")
	b.ReportMetric(float64(podP99)/float64(ctrP99), "p99-ratio")
	b.ReportMetric(percentile(server, 50).Seconds(), "server-p50-s")
	b.ReportMetric(percentile(server, 99).Seconds(), "server-p99-s")
	b.ReportMetric(idle.kubelet, "idle-kubelet-MiB")
	b.ReportMetric(idle.containerd, "idle-containerd-MiB")
	b.ReportMetric(loaded.kubelet, "kubelet-MiB")
	b.ReportMetric(loaded.containerd, "containerd-MiB")
	b.ReportMetric(float64(loaded.shims), "shims")
	b.ReportMetric(loaded.shimsRSS, "shims-MiB")
	b.ReportMetric(loaded.shimsPSS, "shims-pss-MiB")
	b.ReportMetric(after.kubelet, "after-kubelet-MiB")
	b.ReportMetric(after.containerd, "after-containerd-MiB")
	b.ReportMetric(float64(after.shims), "after-shims")
	b.ReportMetric(shimsGone.Seconds(), "shims-gone-s")
	b.ReportMetric(apiserver, "apiserver-MiB")
	b.ReportMetric((loaded.kubelet+loaded.containerd)/apiserver, "node-over-apiserver")
}

// nodeEnv is an env on a node's rig, without BPA's CRDs: only pods are measured.
func nodeEnv(b *testing.B, r *rig.Rig) *env {
	cfg := rest.CopyConfig(r.RESTConfig)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{})
	must(b, err, "client")
	return &env{rig: r, cfg: cfg, client: c}
}

// runningPods records when a watch first saw each expected pod Running.
type runningPods struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
	failed  map[string]string
}

func newRunningPods() *runningPods {
	return &runningPods{waiting: map[string]chan struct{}{}, failed: map[string]string{}}
}

// expect returns a channel closed once pod name is seen Running (or ended).
func (r *runningPods) expect(name string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	r.waiting[name] = ch
	return ch
}

func (r *runningPods) observe(o client.Object) {
	p := o.(*corev1.Pod)
	if p.Status.Phase == corev1.PodPending {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch, ok := r.waiting[p.Name]; ok {
		if p.Status.Phase != corev1.PodRunning {
			r.failed[p.Name] = fmt.Sprintf("%s: %s", p.Status.Phase, p.Status.Message)
		}
		delete(r.waiting, p.Name)
		close(ch)
	}
}

func (r *runningPods) failure(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed[name]
}

// startPods creates size pods at once and returns each one's wall from create to Running.
func startPods(ctx context.Context, b *testing.B, c kubernetes.Interface, seen *runningPods, ns, wave string, size int) []time.Duration {
	took := make([]time.Duration, size)
	var g errgroup.Group
	for i := range size {
		g.Go(func() error {
			name := "start-" + wave + "-" + strconv.Itoa(i)
			running := seen.expect(name)
			start := time.Now()
			if _, err := c.CoreV1().Pods(ns).Create(ctx, sleepPod(name), metav1.CreateOptions{}); err != nil {
				return err
			}
			select {
			case <-running:
			case <-time.After(2 * time.Minute):
				return fmt.Errorf("pod %s not Running after 2m", name)
			}
			took[i] = time.Since(start)
			if f := seen.failure(name); f != "" {
				return fmt.Errorf("pod %s ended instead of running: %s", name, f)
			}
			return nil
		})
	}
	must(b, g.Wait(), "pod wave "+wave)
	return took
}

func sleepPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "main", Image: node.BusyboxImage, Command: []string{"sleep", "3600"}}},
		},
	}
}

// startContainers starts size floor containers at once on the node's containerd, returns
// each one's wall, and removes them (untimed).
func startContainers(ctx context.Context, b *testing.B, n *node.Node, wave string, size int) []time.Duration {
	took := make([]time.Duration, size)
	var g errgroup.Group
	for i := range size {
		g.Go(func() error {
			start := time.Now()
			err := n.RunContainer(ctx, "floor-"+wave+"-"+strconv.Itoa(i), node.BusyboxImage, "sleep", "3600")
			took[i] = time.Since(start)
			return err
		})
	}
	must(b, g.Wait(), "floor wave "+wave)
	for i := range size {
		must(b, n.RemoveContainer(ctx, "floor-"+wave+"-"+strconv.Itoa(i)), "removing a floor container")
	}
	return took
}

// serverStarts are the timed pods' container startedAt less their creationTimestamp.
func serverStarts(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string) []time.Duration {
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	must(b, err, "listing the pods")
	var out []time.Duration
	for _, p := range pods.Items {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			b.Fatalf("pod %s: no running container: %+v", p.Name, p.Status.ContainerStatuses)
		}
		if p.Name != "start-warm-0" {
			out = append(out, p.Status.ContainerStatuses[0].State.Running.StartedAt.Sub(p.CreationTimestamp.Time))
		}
	}
	return out
}

// deleteAllPods deletes the namespace's pods and waits until they are gone: the kubelet
// has killed their containers and confirmed.
func deleteAllPods(ctx context.Context, b *testing.B, c kubernetes.Interface, ns string) {
	must(b, c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}), "deleting the pods")
	must(b, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	}), "waiting for the pods to be gone")
}

// awaitShimsGone waits up to three minutes for the node's shims to exit, and returns the
// node's memory then and how long it waited.
func awaitShimsGone(b *testing.B, n *node.Node) (nodeMemory, time.Duration) {
	start := time.Now()
	for {
		m := readNodeMemory(b, n)
		if m.shims == 0 || time.Since(start) > 3*time.Minute {
			return m, time.Since(start)
		}
		time.Sleep(time.Second)
	}
}

// nodeMemory is the node's resident memory at one moment, in MiB.
type nodeMemory struct {
	kubelet, containerd, shimsRSS, shimsPSS float64
	shims                                   int
}

func readNodeMemory(b *testing.B, n *node.Node) nodeMemory {
	kubelet, containerd, shims := n.Pids()
	var m nodeMemory
	var err error
	m.kubelet, _, _, err = memory(kubelet)
	must(b, err, "the kubelet's memory")
	m.containerd, _, _, err = memory(containerd)
	must(b, err, "containerd's memory")
	for _, pid := range shims {
		rss, _, _, err := memory(pid)
		pss, pssErr := pssMiB(pid)
		if err = errors.Join(err, pssErr); err != nil && exited(pid) {
			continue // since Pids listed it
		}
		must(b, err, "a shim's memory")
		m.shimsRSS += rss
		m.shimsPSS += pss
		m.shims++
	}
	return m
}

// exited says whether process pid has exited: it is gone, or a zombie (whose status
// holds no memory).
func exited(pid int) bool {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	return err != nil || bytes.Contains(status, []byte("\nState:\tZ"))
}

// pssMiB is a process's proportional set size: its resident pages, each shared one
// divided among the processes that map it.
func pssMiB(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(data) {
		if rest, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
			kb, err := strconv.ParseFloat(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no Pss in /proc/%d/smaps_rollup", pid)
}

// rigPid is the pid of the rig's running process whose program is the bin dir's name.
func rigPid(b *testing.B, r *rig.Rig, name string) int {
	want, err := filepath.EvalSymlinks(filepath.Join(r.BinDir, name))
	must(b, err, name)
	for _, pid := range r.PIDs() {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == want {
			return pid
		}
	}
	b.Fatalf("no running %s in the rig", name)
	return 0
}
