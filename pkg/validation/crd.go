// Package validation checks BPA objects offline with the same code the kube-apiserver runs
// for custom resources: the embedded CRDs' structural schemas, pruning (unknown fields),
// defaulting, OpenAPI validation, list-type invariants and CEL rules, all from
// k8s.io/apiextensions-apiserver. Running the apiserver's own validators, rather than a copy
// of the rules, is what keeps `bpa lint` and admission in agreement.
package validation

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/config"
)

// kindValidator holds what the apiserver derives from one CRD version.
type kindValidator struct {
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

var (
	loadOnce   sync.Once
	validators map[schema.GroupVersionKind]*kindValidator
	loadErr    error
)

// CRDs returns the embedded CustomResourceDefinitions.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(config.CRDs, "crd/bases")
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := fs.ReadFile(config.CRDs, path.Join("crd/bases", e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

func load() {
	crds, err := CRDs()
	if err != nil {
		loadErr = err
		return
	}
	validators = map[schema.GroupVersionKind]*kindValidator{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			kv, err := newKindValidator(v.Schema)
			if err != nil {
				loadErr = fmt.Errorf("CRD %s version %s: %w", crd.Name, v.Name, err)
				return
			}
			validators[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = kv
		}
	}
}

func newKindValidator(v1 *apiextensionsv1.CustomResourceValidation) (*kindValidator, error) {
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1, internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	sv, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	return &kindValidator{
		structural: structural,
		schema:     sv,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}, nil
}

// Known reports whether gvk is one of BPA's kinds.
func Known(gvk schema.GroupVersionKind) bool {
	loadOnce.Do(load)
	_, ok := validators[gvk]
	return ok
}

// ValidateObject runs the apiserver's create-time checks on obj, in the apiserver's order:
// prune unknown fields (reported, as `kubectl apply` does with strict field validation),
// drop non-nullable nulls, apply defaults, then schema, list-type and CEL validation.
// obj is modified in place (defaulted and pruned), as the apiserver would store it.
func ValidateObject(ctx context.Context, obj *unstructured.Unstructured) field.ErrorList {
	loadOnce.Do(load)
	if loadErr != nil {
		return field.ErrorList{field.InternalError(nil, loadErr)}
	}
	gvk := obj.GroupVersionKind()
	kv, ok := validators[gvk]
	if !ok {
		return field.ErrorList{field.NotSupported(field.NewPath("kind"), gvk.Kind, []string{"Provisioning", "Software", "Cluster"})}
	}

	var errs field.ErrorList
	unknown := structuralpruning.PruneWithOptions(obj.Object, kv.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	sort.Strings(unknown)
	for _, p := range unknown {
		if strings.HasPrefix(p, "metadata.") || p == "status" || strings.HasPrefix(p, "status.") {
			continue
		}
		errs = append(errs, field.Invalid(fieldPathOf(p), nil, "unknown field"))
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, kv.structural)
	structuraldefaulting.Default(obj.Object, kv.structural)

	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj.Object, kv.schema)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, kv.structural, obj.Object)...)
	if len(errs) == 0 {
		// Like the apiserver, skip CEL once the schema failed: rules assume a valid shape.
		celErrs, _ := kv.cel.Validate(ctx, nil, kv.structural, obj.Object, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	return errs
}

// fieldPathOf turns a pruning path such as "spec.masters[0].master.cpux" into a field.Path.
func fieldPathOf(p string) *field.Path {
	parts := strings.Split(p, ".")
	fp := field.NewPath(parts[0])
	for _, part := range parts[1:] {
		fp = fp.Child(part)
	}
	return fp
}
