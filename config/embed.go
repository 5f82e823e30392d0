// Package config embeds the manifests that the binary needs at run time: the CRDs (for
// offline validation in `bpa lint`) and the admission policies whose rules lint mirrors.
package config

import (
	"bytes"
	"embed"
)

// CRDs holds the generated CustomResourceDefinitions.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS

var (
	//go:embed admission/policy.yaml
	policy []byte
	//go:embed admission/extravars.yaml
	extraVarsPolicy []byte
)

// AdmissionPolicy holds the ValidatingAdmissionPolicies and bindings of config/admission
// (the files its kustomization lists), as one multi-document YAML.
var AdmissionPolicy = bytes.Join([][]byte{policy, extraVarsPolicy}, []byte("\n---\n"))
