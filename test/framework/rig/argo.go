package rig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// ArgoVersion is the Argo release hack/tools/argo pins; the executor image
// named in pods must match the controller.
const ArgoVersion = "v3.7.18"

// installArgoCRDs creates every CRD from <BinDir>/argo-crds, or its minimal/
// subfolder (the controller waits for an informer per kind), and waits until they are Established.
// Created, not applied: the workflows CRD (~3 MB) exceeds the client-side
// apply annotation limit.
func (r *Rig) installArgoCRDs(ctx context.Context) error {
	return r.InstallArgoCRDs(ctx, r.opts.MinimalArgoCRDs)
}

// InstallArgoCRDs installs Argo's CRDs (the minimal ones when minimal) into a running rig,
// as an admin installing Argo after BPA would.
func (r *Rig) InstallArgoCRDs(ctx context.Context, minimal bool) error {
	dir := filepath.Join(r.BinDir, "argo-crds")
	if minimal {
		dir = filepath.Join(dir, "minimal")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (run hack/build-tools.sh): %v", dir, err)
	}
	c, err := apiextensions.NewForConfig(r.RESTConfig)
	if err != nil {
		return err
	}
	// Concurrently: the apiserver spends seconds compiling each big schema.
	names := make([]string, len(files))
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names[i], errs[i] = createCRD(ctx, c, f)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Two minutes: the apiserver compiles the full schemas (~3 MB for workflows) before it
	// serves them, which took over 30 s on two busy cores.
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// UninstallArgoCRDs deletes Argo's CRDs from a running rig, as an admin uninstalling Argo
// would (every Workflow goes with its CRD), and waits until they are gone.
func (r *Rig) UninstallArgoCRDs(ctx context.Context) error {
	c, err := apiextensions.NewForConfig(r.RESTConfig)
	if err != nil {
		return err
	}
	argoCRDs := func(ctx context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
		list, err := c.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var crds []apiextensionsv1.CustomResourceDefinition
		for _, crd := range list.Items {
			if crd.Spec.Group == "argoproj.io" {
				crds = append(crds, crd)
			}
		}
		return crds, nil
	}
	crds, err := argoCRDs(ctx)
	if err != nil {
		return err
	}
	// The apiserver's CRD finalizer lists a CRD's instances before it lets the CRD go, and
	// a list while the CRD's watch cache still initializes fails ("storage is
	// (re)initializing"); the finalizer then backs off, and CRDs created seconds before
	// have stayed Terminating for minutes (operator-framework/operator-controller#1437).
	// So first wait until each kind is served from the watch cache (resourceVersion "0"),
	// as it is on any cluster that has run for a while.
	dyn, err := dynamic.NewForConfig(r.RESTConfig)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: crd.Spec.Versions[0].Name, Resource: crd.Spec.Names.Plural}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{ResourceVersion: "0", Limit: 1})
			return err == nil, nil
		}); err != nil {
			return fmt.Errorf("%s not served from the watch cache: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := c.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete CRD %s: %w", crd.Name, err)
		}
	}
	var left []apiextensionsv1.CustomResourceDefinition
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		now, err := argoCRDs(ctx)
		if err != nil {
			return false, err
		}
		left = now
		return len(left) == 0, nil
	})
	if err != nil {
		var why []string
		for _, crd := range left {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Terminating {
					why = append(why, fmt.Sprintf("%s: %s: %s", crd.Name, cond.Reason, cond.Message))
				}
			}
		}
		return fmt.Errorf("Argo's CRDs not gone (%s): %w", strings.Join(why, "; "), err)
	}
	return nil
}

func createCRD(ctx context.Context, c apiextensions.Interface, file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	return crd.Name, nil
}

// controllerConfig is the workflow-controller ConfigMap. Every value is a YAML
// document (a bare `enabled: false` line is rejected). Metrics and telemetry
// off keep the controller off port 9090, so rigs can run side by side.
var controllerConfig = map[string]string{
	"metricsConfig":   "enabled: false\n",
	"telemetryConfig": "enabled: false\n",
}

// startWorkflowController runs Argo's controller in namespace argo, managing every
// namespace: sites that share a node each run in a namespace of their own. It also listens on :6060 (healthz, hard-coded); when two
// rigs run at once the second one only logs that the port is taken.
func (r *Rig) startWorkflowController(ctx context.Context) error {
	if err := r.ensureNamespace(ctx, ArgoNamespace); err != nil {
		return err
	}
	c, err := kubernetes.NewForConfig(r.RESTConfig)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap", Namespace: ArgoNamespace},
		Data:       controllerConfig,
	}
	if _, err := c.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return r.runWorkflowController(ctx)
}

// runWorkflowController starts Argo's controller process (again, after a kill) and waits
// for it to have loaded its configuration.
func (r *Rig) runWorkflowController(ctx context.Context) error {
	image := r.opts.ExecutorImage
	if image == "" {
		image = "quay.io/argoproj/argoexec:" + ArgoVersion
	}
	return r.wfc.start(func(name string) (*Process, error) {
		p, err := r.Spawn(name,
			[]string{
				"LEADER_ELECTION_DISABLE=true",
				// Pod and task-result events requeue a Workflow after this delay
				// (default 10 s, so a two-step DAG took 20 s; Argo's own e2e tests use
				// 1s). Each step pod ends in a few such events; Argo copes with an
				// informer a little behind (a conflicting update is requeued).
				"DEFAULT_REQUEUE_TIME=250ms",
			},
			"workflow-controller",
			"--kubeconfig="+r.Kubeconfig,
			"--namespace="+ArgoNamespace,
			"--executor-image="+image,
		)
		if err != nil {
			return nil, err
		}
		// No readiness endpoint of its own (:6060 may belong to another rig): the
		// log line follows a successful config load; informers sync right after
		// and Workflows created meanwhile are picked up by the initial list.
		return p, waitFor(ctx, p, 60*time.Second, func(context.Context) error {
			if grepFile(p.logPath, "Starting Workflow Controller") {
				return nil
			}
			return fmt.Errorf("no %q in log yet", "Starting Workflow Controller")
		})
	})
}

// Argo runs the real argo CLI against the rig in r.Namespace (ArgoIn).
func (r *Rig) Argo(ctx context.Context, args ...string) (string, error) {
	return r.ArgoIn(ctx, r.Namespace, args...)
}

// ArgoIn runs the real argo CLI against the rig (KUBECONFIG, ARGO_NAMESPACE=ns,
// ARGO_SERVER unset so it talks to the apiserver directly) and returns its
// stdout; the error carries stderr.
func (r *Rig) ArgoIn(ctx context.Context, ns string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(r.BinDir, "argo"), args...)
	env := []string{"KUBECONFIG=" + r.Kubeconfig, "ARGO_NAMESPACE=" + ns}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ARGO_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("argo %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// StartArgoServer runs `argo server` (Argo's API and web UI) in server auth mode without
// TLS, on 127.0.0.1:port (0: a free port), for r.Namespace, and returns its base URL.
// Server auth mode hands the rig's admin identity to anyone who connects, which is why
// hack/build-tools.sh builds this argo to listen on loopback only (upstream listens on
// every interface). It serves the UI of bin/argo-ui when that was built.
func (r *Rig) StartArgoServer(ctx context.Context, port int) (string, error) {
	var url string
	err := retryPorts(func() error {
		p := port
		if p == 0 {
			p = freePort()
		}
		url = fmt.Sprintf("http://127.0.0.1:%d", p)
		proc, err := r.Spawn("argo-server", []string{"KUBECONFIG=" + r.Kubeconfig}, "argo", "server",
			"--auth-mode=server", "--secure=false", fmt.Sprintf("--port=%d", p),
			// Its configuration is the controller's ConfigMap, in the controller's namespace.
			"--namespace="+ArgoNamespace, "--namespaced", "--managed-namespace="+r.Namespace)
		if err != nil {
			return err
		}
		return waitFor(ctx, proc, 60*time.Second, func(ctx context.Context) error {
			return httpGetOK(ctx, nil, url+"/api/v1/version", "")
		})
	})
	return url, err
}

// ArgoUIMissing says why binDir has no Argo web UI (argo-ui/index.html, which
// hack/build-tools.sh builds and embeds in argo), or "" when it has one: the one line the
// build left in argo-ui.unavailable when it could not build it (GitHub out of reach, say),
// else what to run.
func ArgoUIMissing(binDir string) string {
	if _, err := os.Stat(filepath.Join(binDir, "argo-ui", "index.html")); err == nil {
		return ""
	}
	if line, err := os.ReadFile(filepath.Join(binDir, "argo-ui.unavailable")); err == nil {
		return strings.TrimSpace(string(line))
	}
	return "Argo's web UI was not built (bin/argo-ui/index.html missing): run hack/build-tools.sh argo-ui argo, " +
		"which needs Node.js >= 20 (hack/deps.sh --ui says what is missing)"
}
