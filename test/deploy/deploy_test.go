// Package deploy installs BPA onto a real node (test/framework/node) as users install it:
// `kustomize build config/default` with its images retagged to the images hack/images
// builds, applied as `make deploy` applies it, and its Deployments' pods Ready on the node.
package deploy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/akraino-edge-stack/bpa/hack/images"
	"github.com/akraino-edge-stack/bpa/test/framework/node"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// ns is where config/default installs BPA.
const ns = "bpa-system"

// bpaTag is the tag the test gives the bpa image it builds.
const bpaTag = "deploy-test"

type env struct {
	t    *testing.T
	n    *node.Node
	c    kubernetes.Interface
	root string
	// bpaImage is the bpa image's ref, as config/default's Deployments name it;
	// kubesprayImage the stand-in kubespray image's.
	bpaImage, kubesprayImage string
}

// TestDeploy deploys BPA on a real node, then runs the shipped run-kubespray template's
// pod on it (key_test.go). The node and the deployment are shared.
func TestDeploy(t *testing.T) {
	n := node.ForTest(t, rig.Options{Namespace: ns, WorkflowController: true, MinimalArgoCRDs: true})
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	e := &env{t: t, n: n, c: kubernetes.NewForConfigOrDie(n.Rig.RESTConfig), root: root}
	e.pushImages(t, "bpa", "kubespray")
	t.Run("config/default's controller and bpa serve are Ready on the node", e.deploy)
	t.Run("run-kubespray's key as the container sees it", e.runKubesprayKey)
	t.Run("run-kubespray's pod logs in to a simulated host on the pod network", e.sshToHost)
	t.Run("run-kubespray through Argo's executor: its key copy 0600, used by ansible's OpenSSH", e.runKubespray)
}

func (e *env) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	e.t.Cleanup(cancel)
	return ctx
}

// pushImages builds the named hack/images images (the bpa image into the test's own
// folder, as it is this tree's bpa) and pushes them to the node's registry.
func (e *env) pushImages(t *testing.T, names ...string) {
	start := time.Now()
	o, err := images.Options{Root: e.root, Dir: filepath.Join(e.n.Rig.BinDir, "images"), BPATag: bpaTag,
		Argoexec: filepath.Join(e.n.Rig.BinDir, "argoexec")}.Defaults()
	require.NoError(t, err)
	var built []images.Built
	for _, name := range names {
		o := o
		if name == "bpa" {
			o.Dir = t.TempDir()
		}
		b, err := images.Build(e.ctx(10*time.Minute), o, []string{name}, t.Logf)
		require.NoError(t, err, "make images")
		built = append(built, b...)
	}
	e.bpaImage, e.kubesprayImage = built[0].Spec.Refs[0], built[1].Spec.Refs[0]
	pushed := time.Now()
	require.NoError(t, e.n.Push(e.ctx(5*time.Minute), built...))
	t.Logf("images %v built in %s, pushed in %s", names, pushed.Sub(start).Round(100*time.Millisecond), time.Since(pushed).Round(100*time.Millisecond))
}

func (e *env) deploy(t *testing.T) {
	ctx := e.ctx(5 * time.Minute)
	e.adminSetup(t)
	overlay := e.kustomize(t)
	start := time.Now()
	e.apply(t, overlay)
	for _, d := range []string{"bpa-controller", "bpa-artifacts"} {
		e.waitReady(t, ctx, d)
		t.Logf("deployment %s Ready on %s %s after apply", d, node.Name, time.Since(start).Round(100*time.Millisecond))
	}
}

// kustomize writes an overlay of config/default in a temporary folder that only retags
// the bpa image, as a user's would, and checks what it builds.
func (e *env) kustomize(t *testing.T) string {
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(e.root, "config", "default"))
	require.NoError(t, err)
	repo, tag, _ := strings.Cut(e.bpaImage, ":"+bpaTag)
	require.Empty(t, tag)
	overlay := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\nimages:\n- {name: %s, newTag: %s}\n",
		rel, repo, bpaTag)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644))
	out, err := exec.Command(filepath.Join(e.n.Rig.BinDir, "kustomize"), "build", dir).Output()
	require.NoError(t, err, "kustomize build: %s", exitStderr(err))
	require.Contains(t, string(out), "image: "+e.bpaImage+"\n")
	require.NotContains(t, string(out), "bpa:latest")
	return dir
}

// apply installs the overlay as `make deploy` installs config/ (hack/deploy.sh).
func (e *env) apply(t *testing.T, overlay string) {
	cmd := exec.Command(filepath.Join(e.root, "hack", "deploy.sh"), overlay)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.n.Rig.Kubeconfig, "KUSTOMIZE="+filepath.Join(e.n.Rig.BinDir, "kustomize"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/deploy.sh: %s", out)
}

// waitReady waits for deployment name to have all its replicas Ready, each on the node.
func (e *env) waitReady(t *testing.T, ctx context.Context, name string) {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := e.c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d/%d ready; %s", d.Status.ReadyReplicas, *d.Spec.Replicas, e.podsState(ctx, d))
		return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == *d.Spec.Replicas &&
			d.Status.UpdatedReplicas == *d.Spec.Replicas, nil
	})
	require.NoError(t, err, "deployment %s: %s", name, last)
	pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=bpa"})
	require.NoError(t, err)
	for _, p := range pods.Items {
		require.Equal(t, node.Name, p.Spec.NodeName, "pod %s", p.Name)
	}
}

// podsState says, for a deployment that is not Ready yet, what its pods wait for.
func (e *env) podsState(ctx context.Context, d *appsv1.Deployment) string {
	sel := metav1.FormatLabelSelector(d.Spec.Selector)
	pods, err := e.c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range pods.Items {
		st := string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				st += " " + string(c.Type) + ": " + c.Message
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				st += fmt.Sprintf(" %s waiting %s %s", c.Name, w.Reason, w.Message)
			}
			if c.LastTerminationState.Terminated != nil {
				st += fmt.Sprintf(" %s last exit %d %s", c.Name, c.LastTerminationState.Terminated.ExitCode, c.LastTerminationState.Terminated.Message)
			}
		}
		s = append(s, p.Name+": "+st)
	}
	return strings.Join(s, "; ")
}

// adminSetup is what config/serve asks an admin to provide before bpa serve can start:
// the Secret bpa-artifacts-tls, and a volume for the claim bpa-artifacts (the rig has no
// storage provisioner): a hostPath PersistentVolume in the node's dir, owned by bpa's
// user, as a site's local-storage volume would be.
func (e *env) adminSetup(t *testing.T) {
	ctx := e.ctx(time.Minute)
	_, err := e.c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		require.Contains(t, err.Error(), "already exists")
	}
	crt, key := selfSigned(t, "bpa-artifacts."+ns+".svc")
	_, err = e.c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bpa-artifacts-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	dir := filepath.Join(e.n.Dir, "volumes", "bpa-artifacts")
	require.NoError(t, os.MkdirAll(dir, 0o750))
	require.NoError(t, os.Chown(dir, images.NonRoot, images.NonRoot))
	_, err = e.c.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "bpa-artifacts"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "bpa-artifacts"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// selfSigned is a self-signed serving certificate for host, PEM.
func selfSigned(t *testing.T, host string) (crt, key []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	require.NoError(t, err)
	kd, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// exitStderr is what a failed command wrote to stderr.
func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
