package validation

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// ValidateKubesprayVars runs, on the variables a Provisioning gives kubespray (the vars file
// render-inventory writes: kubespray.extraVars, kubernetes.version, podSubnet, ...), the
// assertions the chosen kubespray release makes on variables before it touches a host
// (kubespray.CheckVars), so that `bpa lint` refuses what kubespray would, as `bpa plan` does.
// Admission does not: the CRD cannot see extraVars' values. Each problem names the field
// without which the assertion passes (an extraVars variable, or spec.PodSubnet,
// spec.kubernetes.version, spec.KUDPlugins), or spec.kubespray.extraVars when no single one.
func ValidateKubesprayVars(p *bpav1.Provisioning) field.ErrorList {
	check := func(spec *bpav1.ProvisioningSpec) ([]error, error) {
		params, err := translator.ProvisioningParameters(&bpav1.Provisioning{ObjectMeta: p.ObjectMeta, Spec: *spec})
		if err != nil {
			return nil, err
		}
		profile, patch, err := kubespray.ProfileForImage(params["kubespray-image"])
		if err != nil {
			return nil, err
		}
		vars, err := inventory.DecodedExtraVars(spec)
		if err != nil {
			return nil, err
		}
		return profile.CheckVars(vars, patch), nil
	}
	violations, err := check(&p.Spec)
	if err != nil {
		return nil // what render-inventory refuses is the other checks' to report
	}
	root := field.NewPath("spec", "kubespray", "extraVars")
	// The fields that become kubespray variables, each with the spec without it: a violation
	// is named after the first whose absence makes it pass.
	type source struct {
		path    *field.Path
		without func(*bpav1.ProvisioningSpec)
	}
	var sources []source
	if p.Spec.Kubespray != nil {
		for _, k := range slices.Sorted(maps.Keys(p.Spec.Kubespray.ExtraVars)) {
			sources = append(sources, source{root.Child(k), func(s *bpav1.ProvisioningSpec) { delete(s.Kubespray.ExtraVars, k) }})
		}
	}
	if p.Spec.PodSubnet != "" {
		sources = append(sources, source{field.NewPath("spec", "PodSubnet"), func(s *bpav1.ProvisioningSpec) { s.PodSubnet = "" }})
	}
	if p.Spec.Kubernetes != nil && p.Spec.Kubernetes.Version != "" {
		sources = append(sources, source{field.NewPath("spec", "kubernetes", "version"), func(s *bpav1.ProvisioningSpec) { s.Kubernetes.Version = "" }})
	}
	if len(p.Spec.KUDPlugins) > 0 {
		sources = append(sources, source{field.NewPath("spec", "KUDPlugins"), func(s *bpav1.ProvisioningSpec) { s.KUDPlugins = nil }})
	}
	var errs field.ErrorList
	for _, e := range violations {
		f := root
		for _, src := range sources {
			without := p.Spec.DeepCopy()
			src.without(without)
			if rest, err := check(without); err == nil && !slices.ContainsFunc(rest, func(r error) bool { return r.Error() == e.Error() }) {
				f = src.path
				break
			}
		}
		errs = append(errs, field.Invalid(f, field.OmitValueType{}, "kubespray would refuse it: "+e.Error()))
	}
	return errs
}
