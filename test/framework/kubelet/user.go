package kubelet

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
)

// The user a step runs as. A container runtime starts the main process with
// the uid and gid of the effective securityContext (the container's fields
// over the pod's) and with supplementary groups fsGroup and
// supplementalGroups (kuberuntime/security_context.go
// determineEffectiveSecurityContext). The stand-in does the same with
// SysProcAttr.Credential when it runs as root, so a step that a real cluster
// would deny a file (a 0440 key without fsGroup, a root-owned directory) is
// denied here too.
//
// A field left unset means "the image's USER". The stand-in has no image: it
// takes the image's user from Options.ImageUsers (the rig names BPA's image,
// user 65532:65532, hack/images.NonRoot), and otherwise runs the step as itself
// (root in the rig).

// ImageUser is the uid and gid an image's USER names.
type ImageUser struct{ UID, GID int64 }

// runAs is the credential of pod's container c, or nil to run it as the
// stand-in (nothing set, or the stand-in is not root and cannot switch).
func (k *Kubelet) runAs(pod *corev1.Pod, c *corev1.Container) *syscall.Credential {
	var uid, gid *int64
	var groups []uint32
	if sc := pod.Spec.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
		if sc.FSGroup != nil {
			groups = append(groups, uint32(*sc.FSGroup))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, uint32(g))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	if u, ok := k.opts.ImageUsers[imageName(c.Image)]; ok && uid == nil {
		uid = &u.UID
		if gid == nil {
			gid = &u.GID
		}
	}
	if uid == nil && gid == nil && len(groups) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		k.logf("pod %s: securityContext user and groups not enforced: the stand-in is not root", pod.Name)
		return nil
	}
	cred := &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Groups: groups}
	if uid != nil {
		cred.Uid = uint32(*uid)
		// A uid the image's /etc/passwd does not name gets gid 0 from the
		// runtime (containerd, CRI-O); the stand-in has no /etc/passwd to ask.
		cred.Gid = 0
	}
	if gid != nil {
		cred.Gid = uint32(*gid)
	}
	return cred
}

// otherUser: the process loses the stand-in's (root's) access to files.
func otherUser(cred *syscall.Credential) bool {
	return cred != nil && cred.Uid != uint32(os.Getuid())
}

// prepareForUser makes what the stand-in itself created for the pod usable by
// cred's user, as a real pod's would be: the container's own filesystem (the
// stand-in has no image; what it made under fs/ — output-parameter
// directories, raw artifacts, the script — belongs to the user, as if the
// image had granted it), what it put into the emptyDirs in place of Argo's
// executor or of the step (artifacts, output-parameter directories; the
// emptyDir itself stays as the kubelet makes it), the working directory,
// HOME, and the service account kubeconfig (the token a real pod mounts is
// readable by its user). TMPDIR is already 1777, like /tmp; Secret,
// ConfigMap, downwardAPI and projected volumes are left exactly as a kubelet
// makes them.
func prepareForUser(podDir, fsRoot string, emptyDirs []string, workDir, home, kubeconfig string, cred *syscall.Credential) error {
	if err := searchable(podDir, cred); err != nil {
		return err
	}
	uid, gid := int(cred.Uid), int(cred.Gid)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	var owned, ownedKeepGroup []string
	for _, root := range append([]string{fsRoot}, emptyDirs...) {
		if err := filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
			switch {
			case err != nil:
			case root == fsRoot:
				owned = append(owned, path)
			case path != root:
				// The group stays: in an emptyDir with fsGroup (setgid) the
				// user's own mkdir would get the fsGroup too.
				ownedKeepGroup = append(ownedKeepGroup, path)
			}
			return err
		}); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	for _, p := range ownedKeepGroup {
		if err := os.Lchown(p, uid, -1); err != nil {
			return err
		}
	}
	owned = append(owned, home)
	if rel, err := filepath.Rel(podDir, workDir); err == nil && !strings.HasPrefix(rel, "..") && !strings.HasPrefix(rel, "volumes") {
		owned = append(owned, workDir)
	}
	if rel, err := filepath.Rel(podDir, kubeconfig); kubeconfig != "" && err == nil && !strings.HasPrefix(rel, "..") {
		owned = append(owned, kubeconfig)
	}
	for _, p := range owned {
		if err := os.Lchown(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// searchable fails, saying which directory and why, when cred's user may not
// reach dir (every directory from / down needs its search bit for the user):
// the pod's files live under the stand-in's WorkDir, which must be
// traversable by the pod's user (a t.TempDir() is 0700).
func searchable(dir string, cred *syscall.Credential) error {
	var chain []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	slices.Reverse(chain)
	for _, d := range chain {
		info, err := os.Stat(d)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		bit := os.FileMode(0o001)
		switch {
		case st.Uid == cred.Uid:
			bit = 0o100
		case st.Gid == cred.Gid || slices.Contains(cred.Groups, st.Gid):
			bit = 0o010
		}
		if info.Mode()&bit == 0 {
			return fmt.Errorf("uid %d cannot reach the pod's directory %s: %s is mode %04o, owner %d:%d (the stand-in's WorkDir must be traversable by the pod's user)",
				cred.Uid, dir, d, info.Mode().Perm(), st.Uid, st.Gid)
		}
	}
	return nil
}
