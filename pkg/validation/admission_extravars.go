package validation

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/akraino-edge-stack/bpa/pkg/inventory"
)

// validateExtraVars applies config/admission/extravars.yaml to a Provisioning: every key an
// Ansible variable name other than the connection settings, every value a string, number or
// boolean, or bounded lists and maps of those, with no template marker in any string. The
// checks are pkg/inventory's, which render-inventory and run-kubespray run again on the vars
// file, so lint, admission and the steps refuse the same values.
func validateExtraVars(obj *unstructured.Unstructured) field.ErrorList {
	if obj.GetKind() != "Provisioning" {
		return nil
	}
	vars, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "kubespray", "extraVars")
	m, ok := vars.(map[string]any)
	if !ok {
		return nil // absent, or not a map: the CRD schema says so
	}
	p := field.NewPath("spec", "kubespray", "extraVars")
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		if m[k] == nil {
			continue // the apiserver drops a null variable before admission (it is not nullable)
		}
		if err := inventory.CheckExtraVar(p, k, m[k]); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
