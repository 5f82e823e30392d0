package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
)

// Problem is one thing wrong with one CR, in the words the apiserver would use.
type Problem struct {
	File   string
	Kind   string
	Name   string
	Field  string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s/%s: %s: %s", p.File, p.Kind, p.Name, p.Field, p.Reason)
}

// Document is one BPA object read from a file: its typed form once it is valid.
type Document struct {
	Kind   string
	Name   string
	Object runtime.Object // *Provisioning, *Software or *Cluster; nil when invalid
}

// ReadDocuments splits multi-document YAML (or JSON) into objects, skipping empty documents.
func ReadDocuments(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("document %d: %w", i, err)
		}
		// Whole numbers as int64, as the apiserver decodes them: CEL rules that take an
		// integer field refuse a float64 ("expected int, got float64").
		var m map[string]any
		if err := utiljson.Unmarshal(raw, &m); err != nil {
			return out, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// ValidateFile checks every BPA object in a file against the CRDs and the admission policy,
// and a Provisioning's variables against the chosen kubespray release's assertions
// (ValidateKubesprayVars), and returns the typed objects that passed. Objects of other API groups (BareMetalHosts,
// Secrets) are left alone. The file name is only used in the problems.
func ValidateFile(ctx context.Context, file string, data []byte) ([]Document, []Problem) {
	objs, err := ReadDocuments(data)
	var problems []Problem
	if err != nil {
		problems = append(problems, Problem{File: file, Kind: "-", Name: "-", Field: "-", Reason: err.Error()})
	}
	var docs []Document
	for _, u := range objs {
		if u.GroupVersionKind().Group != bpav1.GroupVersion.Group {
			continue
		}
		doc, errs := ValidateUnstructured(ctx, u)
		if pr, ok := doc.Object.(*bpav1.Provisioning); ok {
			// Past admission: what the chosen kubespray release would refuse of its variables.
			if errs = ValidateKubesprayVars(pr); len(errs) > 0 {
				doc.Object = nil
			}
		}
		for _, e := range errs {
			f := e.Field
			if f == "<nil>" || f == "" {
				f = "<object>" // a rule on the whole object; its reason names the field
			}
			problems = append(problems, Problem{File: file, Kind: doc.Kind, Name: doc.Name, Field: f, Reason: reason(e)})
		}
		docs = append(docs, doc)
	}
	return docs, problems
}

// ValidateUnstructured runs the admission checks on one object and, when it passes, converts
// it to its typed form with the apiserver's defaults applied.
func ValidateUnstructured(ctx context.Context, u *unstructured.Unstructured) (Document, field.ErrorList) {
	u = u.DeepCopy()
	doc := Document{Kind: u.GetKind(), Name: u.GetName()}
	if doc.Name == "" {
		doc.Name = "<no name>"
	}
	var errs field.ErrorList
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(u.GetName(), false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), u.GetName(), msg))
	}
	errs = append(errs, ValidateAdmission(u)...)
	errs = append(errs, ValidateObject(ctx, u)...)
	if len(errs) > 0 {
		return doc, errs
	}
	obj, err := typed(u)
	if err != nil {
		return doc, field.ErrorList{field.Invalid(field.NewPath("spec"), nil, err.Error())}
	}
	// The site policy, as config/admission/site-policy.yaml applies it at admission. A CR
	// read from a file without a namespace is judged as kubectl would create it: in
	// "default".
	pol := PolicyFrom(ctx)
	switch o := obj.(type) {
	case *bpav1.Provisioning:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		errs = append(pol.CheckProvisioning(o), ValidateEtcdBackup(o)...)
		o.Namespace = u.GetNamespace()
	case *bpav1.Software:
		if o.Namespace == "" {
			o.Namespace = "default"
		}
		errs = pol.CheckSoftware(o)
		o.Namespace = u.GetNamespace()
	case *bpav1.BPAPolicy:
		errs = policy.CheckPolicy(&o.Spec)
	}
	if len(errs) > 0 {
		return doc, errs
	}
	doc.Object = obj
	return doc, nil
}

type policyKey struct{}

// WithPolicy makes lint judge CRs by pol instead of the built-in default policy.
func WithPolicy(ctx context.Context, pol policy.Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, pol)
}

// PolicyFrom is the policy lint applies: the one WithPolicy set, or the default.
func PolicyFrom(ctx context.Context) policy.Policy {
	if p, ok := ctx.Value(policyKey{}).(policy.Policy); ok {
		return p
	}
	return policy.Default()
}

func typed(u *unstructured.Unstructured) (runtime.Object, error) {
	var obj runtime.Object
	switch u.GetKind() {
	case "Provisioning":
		obj = &bpav1.Provisioning{}
	case "Software":
		obj = &bpav1.Software{}
	case "Cluster":
		obj = &bpav1.Cluster{}
	case "BPAPolicy":
		obj = &bpav1.BPAPolicy{}
	default:
		return nil, fmt.Errorf("unknown kind %q", u.GetKind())
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// reason renders a field error without repeating its field path.
func reason(e *field.Error) string {
	s := e.ErrorBody()
	return strings.TrimSpace(s)
}
