package kubelet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestRunAs(t *testing.T) {
	requireRoot(t)
	k := &Kubelet{opts: Options{Logf: t.Logf}}
	pod := &corev1.Pod{}
	c := &corev1.Container{}
	assert.Nil(t, k.runAs(pod, c), "nothing set: the image's user, i.e. the stand-in")

	pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
	assert.Equal(t, &syscall.Credential{Uid: 1000, Gid: 0}, k.runAs(pod, c), "no runAsGroup: gid 0, as the runtime gives a uid the image does not name")

	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](3000), FSGroup: ptr.To[int64](65532), SupplementalGroups: []int64{4000},
	}
	assert.Equal(t, &syscall.Credential{Uid: 1000, Gid: 3000, Groups: []uint32{65532, 4000}}, k.runAs(pod, c))

	c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65533)}
	assert.Equal(t, &syscall.Credential{Uid: 65532, Gid: 65533, Groups: []uint32{65532, 4000}}, k.runAs(pod, c), "the container's fields win")

	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](65532)}
	c.SecurityContext = nil
	assert.Equal(t, &syscall.Credential{Uid: 0, Gid: uint32(os.Getgid()), Groups: []uint32{65532}}, k.runAs(pod, c), "fsGroup alone: the stand-in's user, fsGroup among its groups")

	// An image whose USER the stand-in was told runs as it when nothing sets a user.
	k.opts.ImageUsers = map[string]ImageUser{"ghcr.io/x/bpa": {UID: 65532, GID: 65532}}
	c.Image = "ghcr.io/x/bpa:v1@sha256:0123"
	assert.Equal(t, &syscall.Credential{Uid: 65532, Gid: 65532, Groups: []uint32{65532}}, k.runAs(pod, c), "the image's USER, fsGroup among its groups")
	c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}
	assert.Equal(t, &syscall.Credential{Uid: 1000, Gid: 0, Groups: []uint32{65532}}, k.runAs(pod, c), "runAsUser wins over the image's USER (and its group: gid 0 for a uid the image does not name)")
}

func TestExecRunnerCredential(t *testing.T) {
	requireRoot(t)
	var out bytes.Buffer
	code, err := ExecRunner(context.Background(), &Exec{
		Command: []string{"/bin/sh", "-c", "id -u; id -g; id -G"}, Dir: "/", Env: []string{"PATH=" + os.Getenv("PATH")},
		Stdout: &out, Stderr: &out, Credential: &syscall.Credential{Uid: 1000, Gid: 3000, Groups: []uint32{65532}},
	})
	require.NoError(t, err)
	require.Equal(t, 0, code, out.String())
	assert.Equal(t, "1000\n3000\n3000 65532\n", out.String())
}

func TestSearchable(t *testing.T) {
	requireRoot(t)
	cred := &syscall.Credential{Uid: 1000, Gid: 3000, Groups: []uint32{65532}}
	top := t.TempDir() // 0700, as its parent
	dir := filepath.Join(top, "pod")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.ErrorContains(t, searchable(dir, cred), "uid 1000 cannot reach the pod's directory "+dir+": ")
	for _, d := range []string{filepath.Dir(top), top} {
		require.NoError(t, os.Chmod(d, 0o711))
	}
	require.NoError(t, searchable(dir, cred))

	require.NoError(t, os.Chmod(top, 0o710))
	require.ErrorContains(t, searchable(dir, cred), top+" is mode 0710, owner 0:0")
	require.NoError(t, os.Chown(top, -1, 65532))
	assert.NoError(t, searchable(dir, cred), "a supplementary group's search bit")
	require.NoError(t, os.Chown(top, 1000, -1))
	require.NoError(t, os.Chmod(top, 0o011))
	assert.Error(t, searchable(dir, cred), "the owner's bits apply to the owner, not the group's")
}
