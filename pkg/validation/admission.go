package validation

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

var (
	debianName    = regexp.MustCompile(bpav1.DebianPackageNamePattern)
	debianVersion = regexp.MustCompile(bpav1.DebianVersionPattern)
)

// ValidateAdmission applies the rules of config/admission/policy.yaml at CREATE: the cluster
// label, and the shape of Software items. Its agreement with the policy is tested against a
// real kube-apiserver.
func ValidateAdmission(obj *unstructured.Unstructured) field.ErrorList {
	errs := validateClusterLabel(obj)
	errs = append(errs, validateExtraVars(obj)...)
	if obj.GetKind() == "Provisioning" {
		errs = append(errs, validateRestoreRequest(obj)...)
	}
	if obj.GetKind() == "Software" {
		aptSource, _, _ := unstructured.NestedString(obj.Object, "spec", "aptSource")
		for _, list := range []string{"masterSoftware", "workerSoftware"} {
			items, _, _ := unstructured.NestedSlice(obj.Object, "spec", list)
			for i, item := range items {
				p := field.NewPath("spec", list).Index(i)
				errs = append(errs, ValidateSoftwareItem(p, item)...)
				errs = append(errs, validateLatest(p, item, aptSource)...)
			}
		}
	}
	return errs
}

// validateLatest refuses `version: latest` unless packages come from the artifact server's
// repository (spec.aptSource bpa): latest is the newest version that repository holds, and
// nothing else says which versions exist.
func validateLatest(p *field.Path, item any, aptSource string) field.ErrorList {
	m, _ := item.(map[string]any)
	for name, opts := range m {
		o, _ := opts.(map[string]any)
		if o["version"] == bpav1.VersionLatest && aptSource != bpav1.AptSourceBPA {
			return field.ErrorList{field.Invalid(p.Child(name, "version"), bpav1.VersionLatest,
				"latest is the newest version in the artifact server's repository: it needs spec.aptSource: bpa")}
		}
	}
	return nil
}

func validateClusterLabel(obj *unstructured.Unstructured) field.ErrorList {
	if obj.GetKind() == "BPAPolicy" {
		return nil // the site's, of no cluster: the policy matches provisionings, softwares and clusters only
	}
	p := field.NewPath("metadata", "labels", bpav1.ClusterLabel)
	c, ok := obj.GetLabels()[bpav1.ClusterLabel]
	if !ok {
		return field.ErrorList{field.Required(p, "it names the cluster this CR belongs to")}
	}
	if errs := validation.IsDNS1123Label(c); len(errs) > 0 {
		return field.ErrorList{field.Invalid(p, c, "must be an RFC 1123 label (lower-case letters, digits and '-'), because it names Secrets, ConfigMaps and locks")}
	}
	return nil
}

// validateRestoreRequest checks the restore annotation's value, when there is one.
func validateRestoreRequest(obj *unstructured.Unstructured) field.ErrorList {
	v, ok := obj.GetAnnotations()[bpav1.RestoreAnnotation]
	if !ok {
		return nil
	}
	if _, err := translator.ParseRestoreRequest(v); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "annotations").Key(bpav1.RestoreAnnotation), v,
			"must name a snapshot of status.backups (letters, digits, '.', '_', '-'; not a .json record), optionally followed by @ and any token")}
	}
	return nil
}

// ValidateSoftwareItem checks one item in its decoded-JSON form (string or map).
func ValidateSoftwareItem(p *field.Path, item any) field.ErrorList {
	switch v := item.(type) {
	case string:
		return validatePackageName(p, v)
	case map[string]any:
		if len(v) != 1 {
			return field.ErrorList{field.Invalid(p, len(v), "Debian package name: an item with options names exactly one package")}
		}
		var errs field.ErrorList
		for name, opts := range v {
			errs = append(errs, validatePackageName(p, name)...)
			if opts == nil {
				continue
			}
			m, ok := opts.(map[string]any)
			if !ok {
				return append(errs, field.Invalid(p.Child(name), opts, "options must be a map: software item options allow only 'version' and 'state'"))
			}
			for k, val := range m {
				switch k {
				case "version":
					s, _ := val.(string)
					errs = append(errs, ValidatePackageVersion(p.Child(name, "version"), s)...)
				case "state":
					if val != string(bpav1.PackagePresent) && val != string(bpav1.PackageAbsent) {
						errs = append(errs, field.NotSupported(p.Child(name, "state"), val, []string{"present", "absent"}))
					}
				default:
					errs = append(errs, field.Invalid(p.Child(name, k), val, "unknown field: software item options allow only 'version' and 'state'"))
				}
			}
		}
		return errs
	default:
		return field.ErrorList{field.Invalid(p, item, "must be a Debian package name or {<name>: {version: <v>}}")}
	}
}

func validatePackageName(p *field.Path, name string) field.ErrorList {
	if len(name) > bpav1.MaxPackageFieldLength || !debianName.MatchString(name) {
		return field.ErrorList{field.Invalid(p, name, fmt.Sprintf("must be a Debian package name (%s); it cannot end in '-' or '+', which apt-get reads as remove or install", bpav1.DebianPackageNamePattern))}
	}
	return nil
}

// ValidatePackageVersion checks an item's version: Debian version syntax, or latest. Steps
// call it again before building any command, so a value that bypassed admission still
// cannot reach apt-get.
func ValidatePackageVersion(p *field.Path, v string) field.ErrorList {
	if v == bpav1.VersionLatest {
		return nil
	}
	if len(v) > bpav1.MaxPackageFieldLength || !debianVersion.MatchString(v) || strings.HasSuffix(v, "-") {
		return field.ErrorList{field.Invalid(p, v, "must follow Debian version syntax ([epoch:]upstream[-revision], starting with a digit), or be latest")}
	}
	return nil
}
