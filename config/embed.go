// Package config embeds the manifests that the binary needs at run time: the CRDs (for
// offline validation in `bpa lint`) and the admission policies whose rules lint mirrors.
package config

import "embed"

// CRDs holds the generated CustomResourceDefinitions.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS

//go:embed admission/*.yaml
var admission embed.FS

// AdmissionPolicy returns the manifests of config/admission as one multi-document YAML:
// the ValidatingAdmissionPolicies, their bindings and the default BPAPolicy they read.
func AdmissionPolicy() []byte {
	entries, err := admission.ReadDir("admission")
	if err != nil {
		panic(err) // embedded at build time: cannot fail
	}
	var out []byte
	for _, e := range entries {
		if e.Name() == "kustomization.yaml" {
			continue
		}
		data, err := admission.ReadFile("admission/" + e.Name())
		if err != nil {
			panic(err)
		}
		out = append(append(append(out, "\n---\n"...), data...), '\n')
	}
	return out
}

// StepRBAC holds the step pods' ServiceAccounts, Roles and bindings (config/rbac/steps.yaml),
// which the test rig installs as a deployment would.
//
//go:embed rbac/steps.yaml
var StepRBAC []byte
