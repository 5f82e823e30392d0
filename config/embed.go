// Package config embeds the manifests that the binary needs at run time: the CRDs (for
// offline validation in `bpa lint`) and the admission policy whose rules lint mirrors.
package config

import "embed"

// CRDs holds the generated CustomResourceDefinitions.
//
//go:embed crd/bases/*.yaml
var CRDs embed.FS

// AdmissionPolicy holds the ValidatingAdmissionPolicy and its binding.
//
//go:embed admission/policy.yaml
var AdmissionPolicy []byte
