package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

const bpaImage = "ghcr.io/akraino-edge-stack/bpa"

// TestInstallManifests builds config/default (what `make deploy` applies) with the real
// kustomize, retagged as a release would be, and applies it to a real kube-apiserver with
// Argo's CRDs: every object must be accepted, and the controller, its step image and every
// step of the WorkflowTemplates must name the same bpa build.
func TestInstallManifests(t *testing.T) {
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	kustomize := filepath.Join(root, "bin", "kustomize")
	if _, err := os.Stat(kustomize); err != nil {
		t.Fatalf("%s is missing: run `make tools` (hack/build-tools.sh kustomize)", kustomize)
	}

	// A copy of config/ and workflowtemplates/ whose image tag a release would set.
	work := t.TempDir()
	for _, dir := range []string{"config", "workflowtemplates"} {
		out, err := exec.Command("cp", "-r", filepath.Join(root, dir), work).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	const tag = "v1.2.3-test"
	kfile := filepath.Join(work, "config", "default", "kustomization.yaml")
	k, err := os.ReadFile(kfile)
	require.NoError(t, err)
	require.Contains(t, string(k), "newTag: latest")
	require.NoError(t, os.WriteFile(kfile, []byte(strings.Replace(string(k), "newTag: latest", "newTag: "+tag, 1)), 0o644))
	out, err := exec.Command(kustomize, "build", filepath.Join(work, "config", "default")).Output()
	require.NoError(t, err, "kustomize build config/default")
	objs, err := validation.ReadDocuments(out)
	require.NoError(t, err)

	// One build everywhere.
	var images []string
	for _, o := range objs {
		images = append(images, bpaImages(o)...)
	}
	assert.Len(t, images, 23, "the controller, BPA_STEP_IMAGE, bpa serve and every bpa step container")
	for _, img := range images {
		assert.Equal(t, bpaImage+":"+tag, img)
	}

	// Every object is accepted by a real apiserver, CRDs first.
	r := rig.ForTest(t, rig.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scheme := scheme.New()
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(r.RESTConfig, client.Options{Scheme: scheme})
	require.NoError(t, err)
	apply := func(o *unstructured.Unstructured) {
		t.Helper()
		require.NoError(t, c.Patch(ctx, o, client.Apply, client.FieldOwner("install-test"), client.ForceOwnership),
			"%s %s", o.GetKind(), o.GetName())
	}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
			apply(o)
		}
	}
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}), "CRD %s never established", o.GetName())
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "Namespace" {
			apply(o)
		}
	}
	assert.Equal(t, map[string]int{
		"Namespace": 1, "CustomResourceDefinition": 5, "ArtifactIndex": 1, "ServiceAccount": 21, "ClusterRole": 7, "ClusterRoleBinding": 3,
		"Role": 16, "RoleBinding": 16, "Deployment": 2, "ValidatingAdmissionPolicy": 8, "ValidatingAdmissionPolicyBinding": 8,
		"WorkflowTemplate": 2, "BPAPolicy": 1, "Secret": 3, "PersistentVolumeClaim": 1, "Service": 2,
	}, kinds)
}

// bpaImages lists the bpa images an object names: container images (at any depth: the
// Deployment's pod template, the WorkflowTemplates' steps and init containers) and the
// controller's BPA_STEP_IMAGE.
func bpaImages(o *unstructured.Unstructured) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if img, ok := v["image"].(string); ok && strings.HasPrefix(img, bpaImage+":") {
				out = append(out, img)
			}
			if v["name"] == "BPA_STEP_IMAGE" {
				if img, ok := v["value"].(string); ok {
					out = append(out, img)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(o.Object)
	return out
}

// TestS3BackupComponent builds config/serve with its backups-s3 component, as an admin
// enables it: bpa serve's command line must parse (every flag is bpa serve's), each file it
// names must be in the Secret's read-only mount, and that Secret no other container mounts.
func TestS3BackupComponent(t *testing.T) {
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	work := t.TempDir()
	out, err := exec.Command("cp", "-r", filepath.Join(root, "config"), work).CombinedOutput()
	require.NoError(t, err, string(out))
	kfile := filepath.Join(work, "config", "serve", "kustomization.yaml")
	k, err := os.ReadFile(kfile)
	require.NoError(t, err)
	enabled := strings.Replace(strings.Replace(string(k), "# components:", "components:", 1), "#   - backups-s3", "  - backups-s3", 1)
	require.NotEqual(t, string(k), enabled, "the commented component in config/serve/kustomization.yaml")
	require.NoError(t, os.WriteFile(kfile, []byte(enabled), 0o644))
	out, err = exec.Command(filepath.Join(root, "bin", "kustomize"), "build", filepath.Join(work, "config", "serve")).Output()
	require.NoError(t, err, "kustomize build config/serve with backups-s3")
	objs, err := validation.ReadDocuments(out)
	require.NoError(t, err)
	var dep appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "bpa-artifacts" {
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &dep))
		}
	}
	require.NotEmpty(t, dep.Spec.Template.Spec.Containers)
	c := dep.Spec.Template.Spec.Containers[0]
	serve, _, err := cli.NewRootCommand().Find(c.Args[:1])
	require.NoError(t, err)
	require.NoError(t, serve.ParseFlags(c.Args[1:]), "bpa serve's own flags")
	const mount = "/etc/bpa-artifacts/backups-s3"
	var m *corev1.VolumeMount
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == mount {
			m = &c.VolumeMounts[i]
		}
	}
	require.NotNil(t, m)
	assert.True(t, m.ReadOnly)
	for _, f := range []string{"backup-s3-ca-file", "backup-s3-access-key-id-file", "backup-s3-secret-access-key-file"} {
		v, err := serve.Flags().GetString(f)
		require.NoError(t, err)
		assert.Equal(t, mount, filepath.Dir(v), f)
	}
	endpoint, _ := serve.Flags().GetString("backup-s3-endpoint")
	assert.True(t, strings.HasPrefix(endpoint, "https://"))
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == m.Name {
			require.NotNil(t, v.Secret)
			assert.Equal(t, "bpa-artifacts-backups-s3", v.Secret.SecretName)
		}
	}
}
