package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// Exec is one run of a pod's main container, paths already rewritten.
type Exec struct {
	Pod      *corev1.Pod
	Template *wfv1.Template // the Argo template being run; nil if the pod carries none
	Image    string
	Command  []string // argv; Command[0] is resolved through Options.Executables
	Env      []string // KEY=VALUE, the whole environment of the process
	Dir      string   // working directory
	// Credential is the user and groups of the container's securityContext
	// (nil: the stand-in's own). ExecRunner runs the process with it; an
	// in-process Runner may ignore it.
	Credential *syscall.Credential
	Stdout     io.Writer
	Stderr     io.Writer
}

// Runner runs an Exec and returns the container's exit code. An error means
// the container could not start at all (reported as exit code 128,
// reason StartError).
type Runner func(ctx context.Context, e *Exec) (exitCode int, err error)

// killGrace is how long a process gets between SIGTERM and SIGKILL when its
// pod is deleted or exceeds its deadline.
const killGrace = 3 * time.Second

// ExecRunner runs e.Command as a local process in its own process group,
// killed (SIGTERM, then SIGKILL) with the group when ctx ends, and killed by
// the kernel if the test binary dies first.
func ExecRunner(ctx context.Context, e *Exec) (int, error) {
	if len(e.Command) == 0 {
		return 0, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, e.Command[0], e.Command[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = e.Env, e.Dir, e.Stdout, e.Stderr
	// Pdeathsig survives the switch to Credential: the child sets it after
	// setuid (syscall.forkAndExecInChild), which would otherwise clear it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: e.Credential}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = killGrace
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	err := cmd.Wait()
	// Whatever the step forked must not outlive it (as with a container).
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil // as a container runtime reports it
		}
		return st.ExitCode(), nil
	}
	return 0, err
}

// resolve picks how to run a container: an in-process Runner or a local
// binary, keyed by command[0], its base name, the image, or the image
// without tag or digest.
func (k *Kubelet) resolve(image string, argv []string) (Runner, []string, error) {
	type key struct {
		name    string
		isImage bool
	}
	var keys []key
	if len(argv) > 0 {
		keys = append(keys, key{argv[0], false}, key{path.Base(argv[0]), false})
	}
	keys = append(keys, key{image, true}, key{imageName(image), true})
	for _, kk := range keys {
		if r, ok := k.opts.Runners[kk.name]; ok {
			return r, argv, nil
		}
	}
	for _, kk := range keys {
		bin, ok := k.opts.Executables[kk.name]
		if !ok {
			continue
		}
		if kk.isImage {
			return ExecRunner, append([]string{bin}, argv...), nil
		}
		return ExecRunner, append([]string{bin}, argv[1:]...), nil
	}
	first := ""
	if len(argv) > 0 {
		first = argv[0]
	}
	return nil, nil, fmt.Errorf("no local executable for command %q (image %q): map it in kubelet.Options.Executables", first, image)
}

// imageName strips the tag or digest: "quay.io/x/bpa:v1" -> "quay.io/x/bpa".
func imageName(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}
