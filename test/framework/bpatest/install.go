// Package bpatest installs BPA's own manifests (CRDs, admission policy) into a test rig.
package bpatest

import (
	_ "embed"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sigs.k8s.io/yaml"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/config"
	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// InstallCRDs creates BPA's CRDs and waits until they are served.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	crds, err := validation.CRDs()
	if err != nil {
		return err
	}
	return createCRDs(ctx, cfg, crds)
}

//go:embed crds/metal3.io_baremetalhosts.yaml
var bareMetalHostCRD []byte

// InstallBareMetalHostCRD creates metal3's BareMetalHost CRD, generated from the pinned
// metal3 API module (`make metal3-crd`).
func InstallBareMetalHostCRD(ctx context.Context, cfg *rest.Config) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(bareMetalHostCRD, crd); err != nil {
		return err
	}
	return createCRDs(ctx, cfg, []*apiextensionsv1.CustomResourceDefinition{crd})
}

func createCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	c, err := apiextensions.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// InstallAdmissionPolicy creates the ValidatingAdmissionPolicies and bindings of
// config/admission. The apiserver loads them asynchronously: callers that depend on them
// should probe with a known-bad object (see WaitForPolicy).
func InstallAdmissionPolicy(ctx context.Context, cfg *rest.Config) error {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(config.AdmissionPolicy()), 4096)
	for {
		var probe struct {
			Kind string `json:"kind"`
		}
		var raw []byte
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj) == 0 {
			continue
		}
		raw, err = jsonMarshal(obj)
		if err != nil {
			return err
		}
		if err := jsonUnmarshal(raw, &probe); err != nil {
			return err
		}
		switch probe.Kind {
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicy{}
			if err := jsonUnmarshal(raw, p); err != nil {
				return err
			}
			if _, err := kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case "ValidatingAdmissionPolicyBinding":
			b := &admissionv1.ValidatingAdmissionPolicyBinding{}
			if err := jsonUnmarshal(raw, b); err != nil {
				return err
			}
			if _, err := kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		case "BPAPolicy":
			p := &bpav1.BPAPolicy{}
			if err := jsonUnmarshal(raw, p); err != nil {
				return err
			}
			if err := CreatePolicy(ctx, cfg, p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected kind %q in config/admission", probe.Kind)
		}
	}
}

// CreatePolicy creates (or replaces the spec of) a BPAPolicy.
func CreatePolicy(ctx context.Context, cfg *rest.Config, p *bpav1.BPAPolicy) error {
	s := runtime.NewScheme()
	if err := bpav1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	err = c.Create(ctx, p.DeepCopy())
	if apierrors.IsAlreadyExists(err) {
		old := &bpav1.BPAPolicy{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), old); err != nil {
			return err
		}
		old.Spec = p.Spec
		return c.Update(ctx, old)
	}
	return err
}

// InstallStepRBAC creates the step accounts, Roles and bindings of config/rbac/steps.yaml
// in ns, so steps run with exactly the rights a deployment gives them. Cluster-scoped
// bindings get ns as a suffix, so several namespaces of one rig can each have theirs.
func InstallStepRBAC(ctx context.Context, c client.Client, ns string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(config.StepRBAC), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		switch u.GetKind() {
		case "ClusterRole":
		case "ClusterRoleBinding":
			u.SetName(u.GetName() + "-" + ns)
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = ns
			}
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		default:
			u.SetNamespace(ns)
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
}
