package kubespray

import (
	"fmt"
	"strings"
)

// CELRule is the CRD rule (on ProvisioningSpec) that keeps spec.kubernetes.version among the
// versions the chosen kubespray release installs, generated from Profiles; the marker in
// pkg/apis/bpa/v1alpha1 must be exactly this (TestCRDHoldsTheProfiles). Each release maps to
// the set of its versions, each written minor*1000+patch (the first part of the version, "1"
// or "v1", is not read), as map keys: a lookup keeps the apiserver's cost estimate low, where
// iterating a list picked at run time, or comparing strings, exceeds it. An unknown release is
// left to the enum on spec.kubespray.version. It holds no empty string literal: gofmt would
// turn one into a typographic quote in the marker.
func CELRule() string {
	var releases []string
	for _, p := range Profiles {
		for patch := range p.patches() {
			var keys []string
			for _, v := range p.KubeVersions(patch) {
				keys = append(keys, fmt.Sprintf("%d: true", v.Minor*1000+v.Patch))
			}
			releases = append(releases, fmt.Sprintf("'%s': {%s}", p.Tag(patch), strings.Join(keys, ", ")))
		}
	}
	// A version of the wrong syntax is the field pattern's to refuse; int() would fail on it.
	return "!has(self.kubernetes) || !has(self.kubernetes.version) || !self.kubernetes.version.matches('^v?1[.][0-9]{1,3}[.][0-9]{1,3}$') || " +
		"[{" + strings.Join(releases, ", ") + "}].all(m, " +
		"[has(self.kubespray) && has(self.kubespray.version) ? self.kubespray.version : '" + DefaultVersion + "'].all(r, !(r in m) || " +
		"[self.kubernetes.version.split('.')].all(p, int(p[1]) * 1000 + int(p[2]) in m[r])))"
}

// CELMessage is CELRule's message: it names every release's versions.
func CELMessage() string {
	return "Kubernetes version not among those the chosen kubespray release installs (" + SupportedVersions() + ")"
}
