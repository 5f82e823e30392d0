package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
)

// kubesprayInjector is the site's mutating admission webhook for the pods of its namespace:
// to every container that runs the stand-in kubespray image it adds what the stand-in's
// playbooks read (kubespraysim.Container.SimEnv: the application apiserver's kubeconfig,
// the machines' /etc/kubernetes folders, failure injection, the record of each run) and the
// site's folder, mounted at its own path, where those files are. This is the SIMULATED part's
// plumbing only, in the one container that runs the stand-in: what real kubespray's roles
// would change on the machines, the stand-in changes in their folders. Every other
// container, and everything else of that one, is as Argo made it.
type kubesprayInjector struct{ s *Site }

// injectKubesprayEnv serves the webhook on 127.0.0.1 over TLS the rig's CA vouches for, and
// registers it for pods created in the site's namespace.
func (s *Site) injectKubesprayEnv(ctx context.Context) error {
	tlsConfig, err := s.Rig.ServingTLSConfig("bpa-sim-kubespray-injector")
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: kubesprayInjector{s}, TLSConfig: tlsConfig}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	s.T.Cleanup(func() { _ = srv.Close() })

	url := fmt.Sprintf("https://%s/mutate", l.Addr())
	fail, none := admissionregv1.Fail, admissionregv1.SideEffectClassNone
	hook := &admissionregv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bpa-sim-kubespray-" + s.Namespace},
		Webhooks: []admissionregv1.MutatingWebhook{{
			Name:                    "kubespray.sim.bpa.akraino.org",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: s.Rig.CAData},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: s.Namespace}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	kc, err := kubernetes.NewForConfig(s.Rig.RESTConfig)
	if err != nil {
		return err
	}
	_, err = kc.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, hook, metav1.CreateOptions{})
	return err
}

func (k kubesprayInjector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "want an AdmissionReview", http.StatusBadRequest)
		return
	}
	resp := &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	patch, err := k.patch(review.Request.Object.Raw)
	switch {
	case err != nil:
		resp.Allowed, resp.Result = false, &metav1.Status{Message: "bpa-sim: " + err.Error()}
	case patch != nil:
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	review.Response, review.Request = resp, nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// volume is the name of the site's folder in the pod.
const volume = "bpa-sim-site"

// patch is the JSON patch for pod, or nil when none of its containers runs the stand-in.
func (k kubesprayInjector) patch(raw []byte) ([]byte, error) {
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return nil, err
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	var ops []op
	for i, c := range pod.Spec.Containers {
		if !strings.HasPrefix(c.Image, KubesprayImage+":") {
			continue
		}
		env, err := k.s.kubesprayContainer(c.Image).SimEnv()
		if err != nil {
			return nil, err
		}
		k.s.mu.Lock()
		env = append(env, k.s.kubesprayEnv...)
		k.s.mu.Unlock()
		vars := append([]corev1.EnvVar(nil), c.Env...)
		for _, kv := range env {
			name, value, _ := strings.Cut(kv, "=")
			vars = append(vars, corev1.EnvVar{Name: name, Value: value})
		}
		mounts := append(append([]corev1.VolumeMount(nil), c.VolumeMounts...), corev1.VolumeMount{Name: volume, MountPath: k.s.root})
		base := fmt.Sprintf("/spec/containers/%d", i)
		ops = append(ops, op{"add", base + "/env", vars}, op{"add", base + "/volumeMounts", mounts})
	}
	if ops == nil {
		return nil, nil
	}
	dir := corev1.HostPathDirectory
	vols := append(append([]corev1.Volume(nil), pod.Spec.Volumes...), corev1.Volume{Name: volume,
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: k.s.root, Type: &dir}}})
	return json.Marshal(append(ops, op{"add", "/spec/volumes", vols}))
}

// kubesprayContainer is what a run-kubespray container of image is given: the machines'
// folders as they are when its pod is made.
func (s *Site) kubesprayContainer(image string) kubespraysim.Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	dirs := map[string]string{}
	for ip, h := range s.hosts {
		dirs[ip] = h.KubernetesDir()
	}
	return kubespraysim.Container{
		Image: image, AppKubeconfig: s.appKubeconfig, AppEtcdDir: s.appEtcdDir, KubeDirs: dirs, FailFile: s.FailFile,
		UnmatchedFile: s.UnmatchedFile, RecordDir: s.KubesprayRuns, Agent: s.agent,
	}
}

// File writes data to name in the site's folder, which run-kubespray containers see at the
// same path (for SetKubesprayEnv), and returns its path.
func (s *Site) File(name string, data []byte) string {
	p := filepath.Join(s.dir, name)
	must(s.T, os.WriteFile(p, data, 0o644), "writing "+name)
	return p
}
