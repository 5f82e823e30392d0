package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const testNS = "ns"

// volumeKubelet is a stand-in whose API holds a Secret "ssh" (ssh-privatekey,
// known_hosts, other) and a ConfigMap "conf" (a, binary b).
func volumeKubelet(t *testing.T) *Kubelet {
	t.Helper()
	kube := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh", Namespace: testNS}, Data: map[string][]byte{
			"ssh-privatekey": []byte("KEY"), "known_hosts": []byte("HOSTS"), "other": []byte("OTHER"),
		}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: testNS},
			Data: map[string]string{"a": "A"}, BinaryData: map[string][]byte{"b": {0, 1}}},
	)
	return &Kubelet{kube: kube, opts: Options{Logf: t.Logf}}
}

// fileStat is a path's permission bits (setgid and sticky included) and owner.
type fileStat struct {
	Mode     os.FileMode
	UID, GID uint32
}

func statOf(t *testing.T, path string) fileStat {
	t.Helper()
	info, err := os.Lstat(path)
	require.NoError(t, err)
	st := info.Sys().(*syscall.Stat_t)
	return fileStat{Mode: info.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeSticky), UID: st.Uid, GID: st.Gid}
}

// setUp writes vol of a pod with the given fsGroup and returns its directory.
func setUp(t *testing.T, vol corev1.Volume, fsGroup *int64) string {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: testNS, Labels: map[string]string{"b": "2", "a": "1"}}}
	if fsGroup != nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: fsGroup}
	}
	dir := filepath.Join(t.TempDir(), vol.Name)
	require.NoError(t, volumeKubelet(t).writeVolume(context.Background(), pod, &vol, dir))
	return dir
}

// The kubelet owns volume files (it runs as root); so does the stand-in.
var self = uint32(os.Getuid())

func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's group to fsGroup needs root, as the kubelet has")
	}
}

func sshVolume(defaultMode *int32, keyMode *int32) corev1.Volume {
	return corev1.Volume{Name: "ssh", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "ssh", DefaultMode: defaultMode,
		Items: []corev1.KeyToPath{{Key: "ssh-privatekey", Path: "ssh-privatekey", Mode: keyMode}, {Key: "known_hosts", Path: "known_hosts"}},
	}}}
}

func TestSecretVolumeModes(t *testing.T) {
	dir := setUp(t, sshVolume(ptr.To[int32](0o440), nil), nil)
	assert.Equal(t, fileStat{0o440, self, uint32(os.Getgid())}, statOf(t, filepath.Join(dir, "ssh-privatekey")), "defaultMode, exactly, owned by the kubelet")
	assert.Equal(t, fileStat{0o440, self, uint32(os.Getgid())}, statOf(t, filepath.Join(dir, "known_hosts")))
	assert.NoFileExists(t, filepath.Join(dir, "other"), "only the items")
	assert.Equal(t, os.ModeSticky|0o777, statOf(t, dir).Mode, "a Secret volume is a tmpfs: root 1777")
	b, err := os.ReadFile(filepath.Join(dir, "ssh-privatekey"))
	require.NoError(t, err)
	assert.Equal(t, "KEY", string(b))

	dir = setUp(t, sshVolume(ptr.To[int32](0o440), ptr.To[int32](0o400)), nil)
	assert.Equal(t, os.FileMode(0o400), statOf(t, filepath.Join(dir, "ssh-privatekey")).Mode, "an item's mode wins over defaultMode")
	assert.Equal(t, os.FileMode(0o440), statOf(t, filepath.Join(dir, "known_hosts")).Mode)

	dir = setUp(t, corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "ssh", DefaultMode: ptr.To[int32](0o600)}}}, nil)
	for _, f := range []string{"ssh-privatekey", "known_hosts", "other"} {
		assert.Equal(t, os.FileMode(0o600), statOf(t, filepath.Join(dir, f)).Mode, "every key without items: %s", f)
	}
	// Written through the umask: 0777 would come out 0755 without the chmod.
	dir = setUp(t, corev1.Volume{Name: "wide", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "ssh", DefaultMode: ptr.To[int32](0o777), Items: []corev1.KeyToPath{{Key: "other", Path: "sub/dir/other"}},
	}}}, nil)
	assert.Equal(t, os.FileMode(0o777), statOf(t, filepath.Join(dir, "sub/dir/other")).Mode)
	assert.Equal(t, os.FileMode(0o755), statOf(t, filepath.Join(dir, "sub/dir")).Mode, "an item's parent directories")
}

func TestSecretVolumeFSGroup(t *testing.T) {
	requireRoot(t)
	dir := setUp(t, sshVolume(ptr.To[int32](0o440), ptr.To[int32](0o400)), ptr.To[int64](65532))
	assert.Equal(t, fileStat{0o440, 0, 65532}, statOf(t, filepath.Join(dir, "ssh-privatekey")), "0400 | 0440, group fsGroup, owner root")
	assert.Equal(t, fileStat{0o440, 0, 65532}, statOf(t, filepath.Join(dir, "known_hosts")))
	assert.Equal(t, fileStat{os.ModeSticky | os.ModeSetgid | 0o777, 0, 65532}, statOf(t, dir), "root: tmpfs 1777 plus setgid")

	dir = setUp(t, corev1.Volume{Name: "wide", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: "ssh", DefaultMode: ptr.To[int32](0o600), Items: []corev1.KeyToPath{{Key: "other", Path: "sub/other"}},
	}}}, ptr.To[int64](1234))
	assert.Equal(t, fileStat{0o640, 0, 1234}, statOf(t, filepath.Join(dir, "sub/other")), "read-only volume: only 0440 is ORed in")
	assert.Equal(t, fileStat{os.ModeSetgid | 0o755, 0, 1234}, statOf(t, filepath.Join(dir, "sub")), "directories: setgid and 0110 too")
}

func TestSecretVolumeMissing(t *testing.T) {
	k := volumeKubelet(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: testNS}}
	vol := sshVolume(nil, nil)
	vol.Secret.Items = append(vol.Secret.Items, corev1.KeyToPath{Key: "absent", Path: "absent"})
	err := k.writeVolume(context.Background(), pod, &vol, filepath.Join(t.TempDir(), "v"))
	require.EqualError(t, err, "references non-existent secret key: absent")

	vol.Secret.Optional = ptr.To(true)
	dir := filepath.Join(t.TempDir(), "v")
	require.NoError(t, k.writeVolume(context.Background(), pod, &vol, dir), "an optional Secret's missing key is left out")
	assert.FileExists(t, filepath.Join(dir, "known_hosts"))
	assert.NoFileExists(t, filepath.Join(dir, "absent"))

	vol.Secret.SecretName = "absent"
	dir = filepath.Join(t.TempDir(), "v")
	require.NoError(t, k.writeVolume(context.Background(), pod, &vol, dir), "an optional missing Secret mounts empty")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestConfigMapVolumeModes(t *testing.T) {
	// No defaultMode (the apiserver would have set 0644): 0644 whatever the umask.
	old := syscall.Umask(0o077)
	dir := setUp(t, corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "conf"},
	}}}, nil)
	syscall.Umask(old)
	assert.Equal(t, os.FileMode(0o644), statOf(t, filepath.Join(dir, "a")).Mode)
	assert.Equal(t, os.FileMode(0o644), statOf(t, filepath.Join(dir, "b")).Mode, "binaryData too")
	assert.Equal(t, os.FileMode(0o777), statOf(t, dir).Mode, "a ConfigMap volume wraps an emptyDir on disk: 0777")

	dir = setUp(t, corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, DefaultMode: ptr.To[int32](0o400),
		Items: []corev1.KeyToPath{{Key: "a", Path: "x/a", Mode: ptr.To[int32](0o755)}, {Key: "b", Path: "b"}},
	}}}, nil)
	assert.Equal(t, os.FileMode(0o755), statOf(t, filepath.Join(dir, "x/a")).Mode)
	assert.Equal(t, os.FileMode(0o400), statOf(t, filepath.Join(dir, "b")).Mode)

	err := volumeKubelet(t).writeVolume(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS}}, &corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Items: []corev1.KeyToPath{{Key: "c", Path: "c"}},
	}}}, filepath.Join(t.TempDir(), "v"))
	require.EqualError(t, err, "configmap references non-existent config key: c")
}

func TestConfigMapAndEmptyDirFSGroup(t *testing.T) {
	requireRoot(t)
	dir := setUp(t, corev1.Volume{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, DefaultMode: ptr.To[int32](0o600),
	}}}, ptr.To[int64](65532))
	assert.Equal(t, fileStat{0o640, 0, 65532}, statOf(t, filepath.Join(dir, "a")))
	assert.Equal(t, fileStat{os.ModeSetgid | 0o777, 0, 65532}, statOf(t, dir))

	dir = setUp(t, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, ptr.To[int64](65532))
	assert.Equal(t, fileStat{os.ModeSetgid | 0o777, 0, 65532}, statOf(t, dir), "emptyDir: 0777, group fsGroup, setgid")
}

func TestEmptyDirModes(t *testing.T) {
	old := syscall.Umask(0o077)
	dir := setUp(t, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, nil)
	mem := setUp(t, corev1.Volume{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}, nil)
	syscall.Umask(old)
	assert.Equal(t, fileStat{0o777, self, uint32(os.Getgid())}, statOf(t, dir), "any user may write an emptyDir")
	assert.Equal(t, os.ModeSticky|0o777, statOf(t, mem).Mode, "a memory emptyDir is a tmpfs: 1777")
}

func TestDownwardAPIAndProjectedModes(t *testing.T) {
	dir := setUp(t, corev1.Volume{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		DefaultMode: ptr.To[int32](0o444),
		Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: ptr.To[int32](0o400)},
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		},
	}}}, nil)
	assert.Equal(t, os.FileMode(0o400), statOf(t, filepath.Join(dir, "name")).Mode)
	assert.Equal(t, os.FileMode(0o444), statOf(t, filepath.Join(dir, "labels")).Mode)
	b, err := os.ReadFile(filepath.Join(dir, "labels"))
	require.NoError(t, err)
	assert.Equal(t, "a=\"1\"\nb=\"2\"", string(b))

	dir = setUp(t, corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o640),
		Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ssh"},
				Items: []corev1.KeyToPath{{Key: "ssh-privatekey", Path: "key", Mode: ptr.To[int32](0o400)}}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{
				{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}, nil)
	assert.Equal(t, os.FileMode(0o400), statOf(t, filepath.Join(dir, "key")).Mode)
	assert.Equal(t, os.FileMode(0o640), statOf(t, filepath.Join(dir, "a")).Mode, "the projected volume's defaultMode")
	assert.Equal(t, os.FileMode(0o640), statOf(t, filepath.Join(dir, "ns")).Mode)
	b, err = os.ReadFile(filepath.Join(dir, "ns"))
	require.NoError(t, err)
	assert.Equal(t, testNS, string(b))
}
