package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Volume contents, file modes and ownership as a real kubelet produces them
// (k8s.io/kubernetes v1.34 pkg/volume: secret, configmap, downwardapi,
// projected, emptydir, util/atomic_writer.go and volume_linux.go). A step that
// a real kubelet would hand an unreadable or too-open file must get that file
// here too: the stand-in once wrote every file 0644 and so hid an SSH key
// mounted 0440, which OpenSSH refuses.
//
// Not simulated: the atomic writer's layout (files are written in place, not
// as symlinks into a ..data directory), tmpfs, read-only bind mounts, and
// the fsUser of projected service account tokens.

const (
	// defaultVolumeMode is the mode of a file that sets neither its own mode
	// nor the volume's defaultMode. The apiserver defaults defaultMode to it
	// (corev1.SecretVolumeSourceDefaultMode and its ConfigMap, downwardAPI and
	// projected twins), so a pod read back from the API always carries it;
	// the kubelet itself refuses a nil defaultMode.
	defaultVolumeMode int32 = 0o644

	// volume_linux.go: with an fsGroup, every file and directory of a volume
	// gets group fsGroup and these bits ORed in: roMask for the read-only
	// (atomic-writer) volumes, rwMask for emptyDir; directories also get
	// setgid and execMask.
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)

	// emptydir/empty_dir.go setupDir: an emptyDir (and the emptyDir a
	// ConfigMap volume wraps) is a 0777 directory.
	emptyDirPerm = os.FileMode(0o777)
	// A memory-backed emptyDir (and the one Secret, downwardAPI and projected
	// volumes wrap) is a tmpfs mounted without a mode option: its root is 1777.
	tmpfsRootPerm = os.ModeSticky | 0o777
)

// fileProjection is one file of an atomic-writer volume (util.FileProjection).
type fileProjection struct {
	data []byte
	mode int32
}

// writeVolume sets up one volume of pod in dir as the kubelet's volume plugin
// would, fsGroup ownership included.
func (k *Kubelet) writeVolume(ctx context.Context, pod *corev1.Pod, vol *corev1.Volume, dir string) error {
	var fsGroup *int64
	if sc := pod.Spec.SecurityContext; sc != nil {
		// fsGroupChangePolicy is not read: the Secret, ConfigMap, downwardAPI,
		// projected and emptyDir plugins pass a nil policy to
		// SetVolumeOwnership (only persistent volumes honour it), so their
		// ownership is always changed recursively.
		fsGroup = sc.FSGroup
	}
	switch {
	case vol.Secret != nil:
		payload, err := k.secretPayload(ctx, pod.Namespace, vol.Secret.SecretName, vol.Secret.Items, vol.Secret.DefaultMode, vol.Secret.Optional)
		if err != nil {
			return err
		}
		return writeAtomic(dir, payload, tmpfsRootPerm, fsGroup)
	case vol.ConfigMap != nil:
		payload, err := k.configMapPayload(ctx, pod.Namespace, vol.ConfigMap.Name, vol.ConfigMap.Items, vol.ConfigMap.DefaultMode, vol.ConfigMap.Optional)
		if err != nil {
			return err
		}
		return writeAtomic(dir, payload, emptyDirPerm, fsGroup)
	case vol.DownwardAPI != nil:
		payload, err := k.downwardAPIPayload(pod, vol.DownwardAPI.Items, vol.DownwardAPI.DefaultMode)
		if err != nil {
			return err
		}
		return writeAtomic(dir, payload, tmpfsRootPerm, fsGroup)
	case vol.Projected != nil:
		payload, err := k.projectedPayload(ctx, pod, vol.Projected)
		if err != nil {
			return err
		}
		return writeAtomic(dir, payload, tmpfsRootPerm, fsGroup)
	case vol.EmptyDir != nil:
		perm := emptyDirPerm
		if vol.EmptyDir.Medium == corev1.StorageMediumMemory {
			perm = tmpfsRootPerm
		}
		if err := setupDir(dir, perm); err != nil {
			return err
		}
		return setVolumeOwnership(dir, fsGroup, false)
	default:
		k.logf("volume %s: type not simulated, mounted as an empty directory", vol.Name)
		return os.MkdirAll(dir, 0o755)
	}
}

// setupDir creates a volume's root with exactly perm (chmod: the umask does
// not apply), as empty_dir.go setupDir does.
func setupDir(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	return os.Chmod(dir, perm)
}

// writeAtomic writes an atomic-writer volume: the wrapped emptyDir (root perm,
// fsGroup applied read-write by the emptyDir plugin), then each file with
// exactly its mode (atomic_writer.go writePayloadToDir chmods after writing,
// so the umask does not apply; missing parents are created 0755), then the
// volume's own read-only fsGroup pass over everything.
func writeAtomic(dir string, payload map[string]fileProjection, rootPerm os.FileMode, fsGroup *int64) error {
	if err := setupDir(dir, rootPerm); err != nil {
		return err
	}
	if err := setVolumeOwnership(dir, fsGroup, false); err != nil {
		return err
	}
	for p, f := range payload {
		full := filepath.Join(dir, p)
		if err := mkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(f.mode) & (os.ModePerm)
		if err := os.WriteFile(full, f.data, mode); err != nil {
			return err
		}
		if err := os.Chmod(full, mode); err != nil {
			return err
		}
	}
	return setVolumeOwnership(dir, fsGroup, true)
}

// mkdirAll is os.MkdirAll with perm applied exactly to the directories it creates.
func mkdirAll(dir string, perm os.FileMode) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := mkdirAll(filepath.Dir(dir), perm); err != nil {
		return err
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(dir, perm)
}

// setVolumeOwnership is volume_linux.go's SetVolumeOwnership and
// changeFilePermission: with an fsGroup, every path in dir gets group fsGroup
// (lchown), and every non-symlink its mode ORed with roMask (read-only
// volumes) or rwMask, directories also with setgid and execMask.
func setVolumeOwnership(dir string, fsGroup *int64, readOnly bool) error {
	if fsGroup == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(*fsGroup)); err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return nil // chmod would change the target's mode
		}
		mask := rwMask
		if readOnly {
			mask = roMask
		}
		if info.IsDir() {
			mask |= os.ModeSetgid | execMask
		}
		return os.Chmod(path, info.Mode()|mask)
	})
}

func modeOr(mode *int32, def int32) int32 {
	if mode != nil {
		return *mode
	}
	return def
}

// makePayload is secret.MakePayload and configmap.MakePayload: every key with
// defaultMode, or only the items, each with its own mode or defaultMode; a
// missing item key fails the volume unless it is optional.
func makePayload(kind string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool) (map[string]fileProjection, error) {
	def := modeOr(defaultMode, defaultVolumeMode)
	payload := map[string]fileProjection{}
	if len(items) == 0 {
		for key, v := range data {
			payload[key] = fileProjection{data: v, mode: def}
		}
		return payload, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			// The plugins' own messages.
			if kind == "configmap" {
				return nil, fmt.Errorf("configmap references non-existent config key: %s", it.Key)
			}
			return nil, fmt.Errorf("references non-existent secret key: %s", it.Key)
		}
		payload[it.Path] = fileProjection{data: v, mode: modeOr(it.Mode, def)}
	}
	return payload, nil
}

func (k *Kubelet) secretPayload(ctx context.Context, ns, name string, items []corev1.KeyToPath, defaultMode *int32, optionalP *bool) (map[string]fileProjection, error) {
	optional := optionalP != nil && *optionalP
	s, err := k.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && optional:
		s = &corev1.Secret{} // an optional Secret that is missing mounts empty
	case err != nil:
		return nil, err
	}
	return makePayload("secret", s.Data, items, defaultMode, optional)
}

func (k *Kubelet) configMapPayload(ctx context.Context, ns, name string, items []corev1.KeyToPath, defaultMode *int32, optionalP *bool) (map[string]fileProjection, error) {
	optional := optionalP != nil && *optionalP
	cm, err := k.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && optional:
		cm = &corev1.ConfigMap{}
	case err != nil:
		return nil, err
	}
	data := map[string][]byte{}
	for key, v := range cm.Data {
		data[key] = []byte(v)
	}
	for key, v := range cm.BinaryData {
		data[key] = v
	}
	return makePayload("configmap", data, items, defaultMode, optional)
}

// downwardAPIPayload is downwardapi.CollectData for the fields the stand-in
// knows (fieldRef); resourceFieldRef files are left out (no resources are
// simulated).
func (k *Kubelet) downwardAPIPayload(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) (map[string]fileProjection, error) { //nolint:unparam // the shape of the other payload functions, which can fail
	def := modeOr(defaultMode, defaultVolumeMode)
	payload := map[string]fileProjection{}
	for _, it := range items {
		if it.FieldRef == nil {
			k.logf("downwardAPI file %s: resourceFieldRef not simulated, left out", it.Path)
			continue
		}
		payload[filepath.Clean(it.Path)] = fileProjection{data: []byte(volumeFieldRef(pod, it.FieldRef.FieldPath)), mode: modeOr(it.Mode, def)}
	}
	return payload, nil
}

// volumeFieldRef is a fieldRef's value in a downwardAPI file: the whole label
// or annotation map is allowed there, one key="value" line per key, sorted
// (fieldpath.FormatMap).
func volumeFieldRef(pod *corev1.Pod, path string) string {
	var m map[string]string
	switch path {
	case "metadata.labels":
		m = pod.Labels
	case "metadata.annotations":
		m = pod.Annotations
	default:
		return fieldRef(pod, path)
	}
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, key := range keys {
		lines = append(lines, fmt.Sprintf("%v=%q", key, m[key]))
	}
	return strings.Join(lines, "\n")
}

// projectedPayload is projected.collectData for Secret, ConfigMap and
// downwardAPI sources, all with the projected volume's defaultMode; service
// account tokens and cluster trust bundles are not simulated (left out).
func (k *Kubelet) projectedPayload(ctx context.Context, pod *corev1.Pod, src *corev1.ProjectedVolumeSource) (map[string]fileProjection, error) {
	payload := map[string]fileProjection{}
	for _, s := range src.Sources {
		var part map[string]fileProjection
		var err error
		switch {
		case s.Secret != nil:
			part, err = k.secretPayload(ctx, pod.Namespace, s.Secret.Name, s.Secret.Items, src.DefaultMode, s.Secret.Optional)
		case s.ConfigMap != nil:
			part, err = k.configMapPayload(ctx, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, src.DefaultMode, s.ConfigMap.Optional)
		case s.DownwardAPI != nil:
			part, err = k.downwardAPIPayload(pod, s.DownwardAPI.Items, src.DefaultMode)
		default:
			k.logf("projected volume source not simulated (only secret, configMap, downwardAPI), left out")
		}
		if err != nil {
			return nil, err
		}
		for p, f := range part {
			payload[p] = f
		}
	}
	return payload, nil
}
