package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/akraino-edge-stack/bpa/test/framework/node"
)

// daemonsKilled runs a pod across a kill -9 of containerd and of the kubelet, each restarted:
// the container (its shim outlives containerd) finishes, and the restarted kubelet reports
// it Succeeded.
func (e *env) daemonsKilled(t *testing.T) {
	ctx := e.ctx()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "outlives-daemons"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers:                    []corev1.Container{{Name: "main", Image: node.BusyboxImage, Command: []string{"sh", "-c", "sleep 10; echo done"}}},
		},
	}
	_, err := e.c.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	e.waitPod(t, ctx, pod.Name, corev1.PodRunning)
	require.NoError(t, e.n.KillContainerd())
	require.Error(t, e.n.KillContainerd(), "a dead containerd cannot be killed again")
	require.NoError(t, e.n.RestartContainerd(ctx))
	require.NoError(t, e.n.KillKubelet())
	require.NoError(t, e.n.RestartKubelet(ctx))
	e.waitPod(t, ctx, pod.Name, corev1.PodSucceeded)
}

func (e *env) waitPod(t *testing.T, ctx context.Context, name string, want corev1.PodPhase) {
	var phase corev1.PodPhase
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.c.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil // the apiserver is fine; a transient error is retried
		}
		phase = p.Status.Phase
		return phase == want, nil
	})
	require.NoError(t, err, "pod %s: phase %s, want %s", name, phase, want)
}
