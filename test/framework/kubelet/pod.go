package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// outcome is what the stand-in reports for a pod.
type outcome struct {
	initCode   int32 // non-zero: the pod could not be set up (Argo: node Error)
	initMsg    string
	mainCode   int32
	mainReason string
	mainMsg    string
	waitCode   int32 // non-zero: outputs could not be collected (Argo: node Error)
	waitMsg    string
	podReason  string // set with podMsg when the pod itself failed (deadline)
	podMsg     string
	outputs    *wfv1.Outputs
	started    metav1.Time
}

func initFailure(format string, args ...any) *outcome {
	return &outcome{initCode: 1, initMsg: "simulated kubelet: " + fmt.Sprintf(format, args...)}
}

// runPod runs one pod to completion and reports it; an error means nothing
// could be reported (the pod is gone, or the stand-in is stopping).
func (k *Kubelet) runPod(ctx context.Context, pod *corev1.Pod) error {
	dir := filepath.Join(k.opts.WorkDir, pod.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logs := newPodLogs(dir)
	k.mu.Lock()
	k.dirs[pod.Name] = dir
	if id := pod.Annotations[annotationNodeID]; id != "" {
		k.dirs[id] = dir
	}
	k.logs[pod.Name] = logs
	k.mu.Unlock()

	id, err := k.identity(ctx, pod, dir)
	var out *outcome
	if err != nil {
		out = initFailure("%v", err)
	} else {
		out = k.execute(ctx, pod, dir, id, logs)
	}
	// What the init and wait containers would have said (the stand-in does their work).
	switch {
	case out.initCode != 0:
		logs.Printf(containerInit, "%s", out.initMsg)
	case out.waitCode != 0:
		logs.Printf(containerWait, "%s", out.waitMsg)
	case out.outputs != nil:
		logs.Printf(containerWait, "outputs reported: %d parameter(s) (SIMULATED wait container)", len(out.outputs.Parameters))
	}
	for _, c := range []string{containerInit, containerMain, containerWait} {
		logs.End(c)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("not reported: %w", context.Cause(ctx))
	}
	if out.initCode == 0 {
		if err := k.reportTaskResult(ctx, id, pod, out.outputs); err != nil {
			return fmt.Errorf("report task result: %w", err)
		}
	}
	return k.setStatus(ctx, pod, finalStatus(pod, out))
}

// execute sets the pod up, runs its main container and collects outputs.
func (k *Kubelet) execute(ctx context.Context, pod *corev1.Pod, dir string, id *podIdentity, logs *podLogs) *outcome {
	main := findContainer(pod.Spec.Containers, containerMain)
	if main == nil {
		return initFailure("pod has no %q container", containerMain)
	}
	tmpl, err := k.template(ctx, pod)
	if err != nil {
		return initFailure("read Argo template: %v", err)
	}
	argv, err := emissaryArgv(main)
	if err != nil {
		return initFailure("%v", err)
	}
	pm := newPathMap(filepath.Join(dir, "fs"))
	termFile, err := k.materialize(ctx, pod, main, tmpl, pm)
	if err != nil {
		return initFailure("%v", err)
	}
	cred := k.runAs(pod, main)
	home := "" // the stand-in's own HOME
	if otherUser(cred) {
		home = filepath.Join(dir, "home")
	}
	// Offloaded args (> 128 KiB) come as a JSON file the emissary appends.
	env, argsFile, err := k.env(ctx, pod, main, pm, dir, id.kubeconfig, home)
	if err != nil {
		return initFailure("%v", err)
	}
	if argsFile != "" {
		data, err := os.ReadFile(argsFile)
		var extra []string
		if err == nil {
			err = json.Unmarshal(data, &extra)
		}
		if err != nil {
			return initFailure("offloaded container args: %v", err)
		}
		argv = append(argv, extra...)
	}
	for i := range argv {
		argv[i] = pm.rewrite(argv[i])
	}
	workDir := filepath.Join(dir, "work")
	if main.WorkingDir != "" {
		workDir = pm.host(main.WorkingDir)
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return initFailure("%v", err)
	}
	if otherUser(cred) {
		var emptyDirs []string
		for _, m := range main.VolumeMounts {
			if v := findVolume(pod.Spec.Volumes, m.Name); v != nil && v.EmptyDir != nil {
				emptyDirs = append(emptyDirs, filepath.Join(dir, "volumes", v.Name))
			}
		}
		if err := prepareForUser(dir, pm.root, emptyDirs, workDir, home, id.kubeconfig, cred); err != nil {
			return initFailure("%v", err)
		}
	}

	logs.Printf(containerInit, "volumes, artifacts and environment set up in %s (SIMULATED init container)", dir)
	logs.End(containerInit)

	out := &outcome{started: metav1.Now()}
	runner, argv, resolveErr := k.resolve(main.Image, argv)
	if err := k.setStatus(ctx, pod, runningStatus(pod, out.started)); err != nil {
		return initFailure("mark pod running: %v", err)
	}

	var (
		mu     sync.Mutex // stdout and stderr may be written concurrently
		stdout = &capBuffer{max: 256 << 10}
		stderr = &capBuffer{max: 64 << 10, keepTail: true}
	)
	e := &Exec{
		Pod: pod, Template: tmpl, Image: main.Image, Command: argv, Env: env, Dir: workDir, Credential: cred,
		Stdout: &lockedWriter{mu: &mu, w: io.MultiWriter(logs.Writer(containerMain, "stdout"), stdout)},
		Stderr: &lockedWriter{mu: &mu, w: io.MultiWriter(logs.Writer(containerMain, "stderr"), stderr)},
	}

	runCtx := ctx
	deadlineExceeded := false
	if ads := pod.Spec.ActiveDeadlineSeconds; ads != nil {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, time.Duration(*ads)*time.Second)
		defer cancel()
	}
	var code int
	if resolveErr != nil {
		err = resolveErr
	} else {
		k.logf("running pod %s (SIMULATED: local process, image %s): %s", pod.Name, main.Image, strings.Join(argv, " "))
		code, err = runner(runCtx, e)
		deadlineExceeded = ctx.Err() == nil && runCtx.Err() != nil
	}
	switch {
	case err != nil && ctx.Err() == nil && !deadlineExceeded:
		out.mainCode, out.mainReason, out.mainMsg = 128, "StartError", "simulated kubelet: "+err.Error()
		fmt.Fprintln(e.Stderr, out.mainMsg)
	case deadlineExceeded:
		fmt.Fprintf(e.Stderr, "simulated kubelet: killed after activeDeadlineSeconds=%d\n", *pod.Spec.ActiveDeadlineSeconds)
		// As the kubelet reports it; Argo prefers the pod message for the node.
		out.mainCode, out.mainReason = int32(code), "Error"
		out.podReason, out.podMsg = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
		if code == 0 {
			out.mainCode = 137
		}
	case code != 0:
		out.mainCode, out.mainReason = int32(code), "Error"
		out.mainMsg = terminationMessage(termFile, stderr.String())
	default:
		out.mainReason = "Completed"
		out.mainMsg = terminationMessage(termFile, "")
	}
	k.logf("pod %s exited with code %d (SIMULATED)", pod.Name, out.mainCode)
	k.collectOutputs(pod, tmpl, pm, stdout.String(), out)
	return out
}

// template decodes the Argo template from the init container's ARGO_TEMPLATE
// (or from the pod's ConfigMap when Argo offloaded a large one).
func (k *Kubelet) template(ctx context.Context, pod *corev1.Pod) (*wfv1.Template, error) {
	init := findContainer(pod.Spec.InitContainers, containerInit)
	if init == nil {
		return nil, nil
	}
	for _, e := range init.Env {
		if e.Name != envTemplate {
			continue
		}
		raw := e.Value
		if raw == "offloaded" {
			cm, err := k.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			raw = cm.Data[envTemplate]
		}
		var t wfv1.Template
		if err := json.Unmarshal([]byte(raw), &t); err != nil {
			return nil, err
		}
		return &t, nil
	}
	return nil, nil
}

// emissaryArgv strips Argo's `argoexec emissary ... --` wrapper from the main
// container's command line.
func emissaryArgv(c *corev1.Container) ([]string, error) {
	argv := append(append([]string{}, c.Command...), c.Args...)
	if len(argv) < 2 || filepath.Base(argv[0]) != "argoexec" || argv[1] != "emissary" {
		// Resource, data and other templates run argoexec itself.
		if len(argv) > 1 && filepath.Base(argv[0]) == "argoexec" {
			return nil, fmt.Errorf("template kind not simulated (argoexec %s)", argv[1])
		}
		return argv, nil
	}
	for i, a := range argv {
		if a == "--" {
			return argv[i+1:], nil
		}
	}
	return nil, errors.New("argoexec emissary command without --")
}

// materialize writes the volumes the main container mounts, the raw input
// artifacts and a script template's source into the pod directory, mapping
// their container paths (and those of output parameters and of the
// termination message, returned) in pm.
func (k *Kubelet) materialize(ctx context.Context, pod *corev1.Pod, main *corev1.Container, tmpl *wfv1.Template, pm *pathMap) (string, error) {
	// A real kubelet starts no container until every Secret volume of the pod exists,
	// the executor's token among them (mounted into Argo's containers, not main).
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil || (v.Secret.Optional != nil && *v.Secret.Optional) {
			continue
		}
		if _, err := k.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{}); err != nil {
			return "", fmt.Errorf("volume %s: MountVolume.SetUp failed: %w", v.Name, err)
		}
	}
	volDir := filepath.Join(filepath.Dir(pm.root), "volumes")
	done := map[string]bool{}
	var subPaths [][2]string // volume dir, subPath in it
	for _, m := range main.VolumeMounts {
		vol := findVolume(pod.Spec.Volumes, m.Name)
		if vol == nil {
			return "", fmt.Errorf("volume %q not found", m.Name)
		}
		dir := filepath.Join(volDir, vol.Name)
		if !done[vol.Name] {
			done[vol.Name] = true
			if err := k.writeVolume(ctx, pod, vol, dir); err != nil {
				return "", fmt.Errorf("volume %s: %w", vol.Name, err)
			}
		}
		pm.add(m.MountPath, filepath.Join(dir, m.SubPath))
		if m.SubPath != "" {
			subPaths = append(subPaths, [2]string{dir, filepath.Join(dir, m.SubPath)})
		}
	}
	if tmpl != nil {
		for _, a := range tmpl.Inputs.Artifacts {
			switch {
			case a.Raw != nil:
				if err := writeFile(pm.host(a.Path), []byte(a.Raw.Data)); err != nil {
					return "", err
				}
			case a.Optional:
			default:
				return "", fmt.Errorf("input artifact %q: only raw artifacts are simulated", a.Name)
			}
		}
		for _, p := range tmpl.Outputs.Parameters {
			if p.ValueFrom != nil && p.ValueFrom.Path != "" {
				if err := os.MkdirAll(filepath.Dir(pm.host(p.ValueFrom.Path)), 0o755); err != nil {
					return "", err
				}
			}
		}
	}
	// A step writing its terminationMessagePath (named in its args or env)
	// writes here.
	termPath := main.TerminationMessagePath
	if termPath == "" {
		termPath = corev1.TerminationMessagePathDefault
	}
	termFile := pm.host(termPath)
	if err := os.MkdirAll(filepath.Dir(termFile), 0o755); err != nil {
		return "", err
	}
	// The kubelet mounts a file it created 0666 there, so that a container
	// running as any user can write it (kuberuntime_container.go makeMounts).
	if f, err := os.OpenFile(termFile, os.O_CREATE|os.O_WRONLY, 0o666); err != nil {
		return "", err
	} else if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(termFile, 0o666); err != nil {
		return "", err
	}
	// A subPath that does not exist yet (one holding an artifact does by now)
	// is made a directory with the volume root's mode, setgid and sticky bits
	// included, as kubelet_pods.go makeMounts does (SafeMakeDir with
	// GetMode of the volume).
	for _, sp := range subPaths {
		if _, err := os.Stat(sp[1]); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		root, err := os.Stat(sp[0])
		if err != nil {
			return "", err
		}
		if err := mkdirAll(sp[1], root.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeSticky|os.ModeSetuid)); err != nil {
			return "", err
		}
	}
	// Last, once every path is mapped: a script names paths like args do.
	if tmpl != nil && tmpl.Script != nil {
		script := pm.host(scriptSourcePath)
		if err := writeFile(script, []byte(pm.rewrite(tmpl.Script.Source))); err != nil {
			return "", err
		}
		if err := os.Chmod(script, 0o755); err != nil {
			return "", err
		}
	}
	return termFile, nil
}

// env builds the process environment: a few host variables a local process
// needs (PATH, HOME, GOCOVERDIR for coverage of built binaries), the
// container's env with paths rewritten, then KUBECONFIG, POD_NAME and
// POD_NAMESPACE unless the container sets them. It also returns the host
// path of Argo's offloaded-args file, if any. A non-empty home replaces the
// stand-in's HOME and GOCOVERDIR is left out: the process runs as another
// user, who could write to neither.
func (k *Kubelet) env(ctx context.Context, pod *corev1.Pod, c *corev1.Container, pm *pathMap, dir, kubeconfig, home string) ([]string, string, error) {
	vars := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = value
	}
	for _, name := range []string{"PATH", "HOME", "LANG", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(name); ok && (home == "" || name != "GOCOVERDIR") {
			set(name, v)
		}
	}
	if home != "" {
		set("HOME", home)
	}
	// 1777 like a container's /tmp: whatever user the process runs as may use it.
	tmp := filepath.Join(dir, "tmp")
	if err := setupDir(tmp, tmpfsRootPerm); err != nil {
		return nil, "", err
	}
	set("TMPDIR", tmp)
	own := map[string]bool{}
	for _, from := range c.EnvFrom {
		data, err := k.envFrom(ctx, pod.Namespace, from)
		if err != nil {
			return nil, "", err
		}
		for key, v := range data {
			set(from.Prefix+key, pm.rewrite(v))
			own[from.Prefix+key] = true
		}
	}
	for _, e := range c.Env {
		v, err := k.envValue(ctx, pod, e)
		if err != nil {
			return nil, "", fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, pm.rewrite(v))
		own[e.Name] = true
	}
	defaults := [][2]string{{"KUBECONFIG", kubeconfig}, {"POD_NAME", pod.Name}, {"POD_NAMESPACE", pod.Namespace}}
	for _, d := range defaults {
		if !own[d[0]] && d[1] != "" {
			set(d[0], d[1])
		}
	}
	env := make([]string, 0, len(order))
	for _, name := range order {
		env = append(env, name+"="+vars[name])
	}
	return env, vars["ARGO_CONTAINER_ARGS_FILE"], nil
}

func (k *Kubelet) envFrom(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case from.SecretRef != nil:
		s, err := k.kube.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for key, v := range s.Data {
			out[key] = string(v)
		}
	case from.ConfigMapRef != nil:
		cm, err := k.kube.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for key, v := range cm.Data {
			out[key] = v
		}
	}
	return out, nil
}

func (k *Kubelet) envValue(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar) (string, error) {
	src := e.ValueFrom
	switch {
	case src == nil:
		return e.Value, nil
	case src.FieldRef != nil:
		return fieldRef(pod, src.FieldRef.FieldPath), nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := k.kube.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil || s.Data[ref.Key] == nil {
			if ref.Optional != nil && *ref.Optional {
				return "", nil
			}
			return "", fmt.Errorf("secret %s key %s: %v", ref.Name, ref.Key, err)
		}
		return string(s.Data[ref.Key]), nil
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := k.kube.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		v, ok := "", false
		if err == nil {
			v, ok = cm.Data[ref.Key]
		}
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("configmap %s key %s: %v", ref.Name, ref.Key, err)
		}
		return v, nil
	}
	return "", nil // resourceFieldRef: no resources are simulated
}

func fieldRef(pod *corev1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "status.podIP", "status.hostIP":
		return "127.0.0.1"
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if strings.HasPrefix(path, prefix+"['") && strings.HasSuffix(path, "']") {
			return m[strings.TrimSuffix(strings.TrimPrefix(path, prefix+"['"), "']")]
		}
	}
	return ""
}

// collectOutputs reads output parameters as Argo's wait container does:
// file content with one trailing newline trimmed, else valueFrom.default.
// A missing file without default fails the wait container (Argo: node
// Error) when main succeeded; after a failed main it is just left out.
func (k *Kubelet) collectOutputs(pod *corev1.Pod, tmpl *wfv1.Template, pm *pathMap, stdout string, out *outcome) {
	if tmpl == nil {
		return
	}
	outputs := tmpl.Outputs.DeepCopy()
	var params []wfv1.Parameter
	for _, p := range outputs.Parameters {
		if p.ValueFrom == nil || p.ValueFrom.Path == "" {
			params = append(params, p)
			continue
		}
		data, err := os.ReadFile(pm.host(p.ValueFrom.Path))
		switch {
		case err == nil:
			p.Value = wfv1.AnyStringPtr(strings.TrimSuffix(string(data), "\n"))
		case p.ValueFrom.Default != nil:
			p.Value = p.ValueFrom.Default
		case out.mainCode == 0 && out.waitCode == 0:
			out.waitCode = 1
			out.waitMsg = fmt.Sprintf("output parameter %q: %v", p.Name, err)
			continue
		default:
			continue
		}
		params = append(params, p)
	}
	outputs.Parameters = params
	var required []string
	for _, a := range outputs.Artifacts {
		if !a.Optional {
			required = append(required, a.Name)
		}
	}
	outputs.Artifacts = nil
	if len(required) > 0 && out.mainCode == 0 && out.waitCode == 0 {
		// Argo would wait forever for them: fail loudly instead.
		out.waitCode = 1
		out.waitMsg = fmt.Sprintf("simulated kubelet: output artifacts are not simulated (%s)", strings.Join(required, ", "))
	}
	wait := findContainer(pod.Spec.Containers, containerWait)
	if wait != nil && envOf(wait, envIncludeScript) == "true" {
		res := strings.TrimSuffix(stdout, "\n")
		outputs.Result = &res
	}
	out.outputs = outputs
}

// reportTaskResult creates the pod's WorkflowTaskResult, marked complete, as
// Argo's executor does from the wait container.
func (k *Kubelet) reportTaskResult(ctx context.Context, id *podIdentity, pod *corev1.Pod, outputs *wfv1.Outputs) error {
	nodeID := pod.Annotations[annotationNodeID]
	if nodeID == "" {
		return errors.New("pod has no node-id annotation")
	}
	var owners []metav1.OwnerReference
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Workflow" {
			owners = append(owners, metav1.OwnerReference{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID})
		}
	}
	tr := &wfv1.WorkflowTaskResult{
		ObjectMeta: metav1.ObjectMeta{
			Name:      nodeID,
			Namespace: pod.Namespace,
			Labels: map[string]string{
				labelWorkflow:         pod.Labels[labelWorkflow],
				labelOutputsCompleted: "true",
			},
			OwnerReferences: owners,
		},
		NodeResult: wfv1.NodeResult{Outputs: outputs},
	}
	c := id.wf.ArgoprojV1alpha1().WorkflowTaskResults(pod.Namespace)
	_, err := c.Create(ctx, tr, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A merge patch, as the executor does: its RBAC is create and patch.
		patch, err := json.Marshal(&wfv1.WorkflowTaskResult{
			ObjectMeta: metav1.ObjectMeta{Labels: tr.Labels},
			NodeResult: tr.NodeResult,
		})
		if err != nil {
			return err
		}
		_, err = c.Patch(ctx, nodeID, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	return err
}

// setStatus replaces the pod status (retrying conflicts with the
// controller's label and annotation patches).
func (k *Kubelet) setStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	pods := k.kube.CoreV1().Pods(pod.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != pod.UID {
			return fmt.Errorf("pod %s was replaced", pod.Name)
		}
		cur.Status = status
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func runningStatus(pod *corev1.Pod, started metav1.Time) corev1.PodStatus {
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		StartTime: &started,
		PodIP:     "127.0.0.1",
		HostIP:    "127.0.0.1",
		Message:   "",
	}
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "simulated",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: started, FinishedAt: started}},
		})
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: "simulated", Ready: true, Started: ptrTrue(),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	return st
}

// finalStatus is the terminal pod status Argo derives the node from: phase,
// the main container's exit code and message ("main: Error (exit code N):
// message" becomes the node message), the wait container's for output errors.
func finalStatus(pod *corev1.Pod, out *outcome) corev1.PodStatus {
	now := metav1.Now()
	started := out.started
	if started.IsZero() {
		started = now
	}
	st := corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &started, PodIP: "127.0.0.1", HostIP: "127.0.0.1"}
	term := func(code int32, reason, msg string) corev1.ContainerState {
		if reason == "" {
			reason = "Completed"
			if code != 0 {
				reason = "Error"
			}
		}
		return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: msg, StartedAt: started, FinishedAt: now,
		}}
	}
	for _, c := range pod.Spec.InitContainers {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "simulated", State: term(0, "", "")}
		if c.Name == containerInit {
			s.State = term(out.initCode, "", out.initMsg)
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, s)
	}
	if out.initCode != 0 {
		st.Phase = corev1.PodFailed
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}},
			})
		}
		return st
	}
	for _, c := range pod.Spec.Containers {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "simulated", State: term(0, "", "")}
		switch c.Name {
		case containerMain:
			s.State = term(out.mainCode, out.mainReason, out.mainMsg)
		case containerWait:
			s.State = term(out.waitCode, "", out.waitMsg)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, s)
	}
	if out.mainCode != 0 || out.waitCode != 0 || out.podReason != "" {
		st.Phase = corev1.PodFailed
		st.Reason, st.Message = out.podReason, out.podMsg
	}
	return st
}

// terminationMessage is what the process wrote to its termination-message
// file, else the last non-empty line of stderr (capped like the kubelet's
// 4 KiB limit).
func terminationMessage(file, stderr string) string {
	msg := ""
	if b, err := os.ReadFile(file); err == nil {
		msg = strings.TrimSpace(string(b))
	}
	if msg == "" {
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		msg = strings.TrimSpace(lines[len(lines)-1])
	}
	if len(msg) > 4096 {
		msg = msg[len(msg)-4096:]
	}
	return msg
}

func findContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}

func findVolume(vs []corev1.Volume, name string) *corev1.Volume {
	for i := range vs {
		if vs[i].Name == name {
			return &vs[i]
		}
	}
	return nil
}

func envOf(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func ptrTrue() *bool { t := true; return &t }

// capBuffer keeps at most max bytes: the head (stdout, for the script
// result) or the tail (stderr, for the failure message).
type capBuffer struct {
	max      int
	keepTail bool
	buf      bytes.Buffer
}

func (c *capBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if c.keepTail {
		c.buf.Write(p)
		if over := c.buf.Len() - c.max; over > 0 {
			c.buf.Next(over)
		}
		return n, nil
	}
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			p = p[:room]
		}
		c.buf.Write(p)
	}
	return n, nil
}

func (c *capBuffer) String() string { return c.buf.String() }

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
