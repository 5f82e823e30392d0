package kubespray

import (
	"fmt"
	"strings"
)

// CELRule is the CRD rule (on ProvisioningSpec) that keeps spec.kubernetes.version within the
// chosen kubespray release's range, generated from Profiles; the marker in
// pkg/apis/bpa/v1alpha1 must be exactly this (TestCRDHoldsTheProfiles). A version is compared
// as minor*1000+patch (the first part, "1" or "v1", is not read); an unknown release is left
// to the enum on spec.kubespray.version. It holds no empty string literal: gofmt would turn
// one into a typographic quote in the marker.
func CELRule() string {
	var ranges []string
	for _, p := range Profiles {
		for patch := range p.KubeMax {
			lo, hi := p.KubeRange(patch)
			ranges = append(ranges, fmt.Sprintf("'%s.%d': [%d, %d]", p.Minor, patch, lo.Minor*1000+lo.Patch, hi.Minor*1000+hi.Patch))
		}
	}
	// A version of the wrong syntax is the field pattern's to refuse; int() would fail on it.
	return "!has(self.kubernetes) || !has(self.kubernetes.version) || !self.kubernetes.version.matches('^v?1[.][0-9]{1,3}[.][0-9]{1,3}$') || " +
		"[{" + strings.Join(ranges, ", ") + "}].all(m, " +
		"[has(self.kubespray) && has(self.kubespray.version) ? self.kubespray.version : '" + DefaultVersion + "'].all(r, !(r in m) || " +
		"[self.kubernetes.version.split('.')].all(p, int(p[1]) * 1000 + int(p[2]) >= m[r][0] && int(p[1]) * 1000 + int(p[2]) <= m[r][1])))"
}

// CELMessage is CELRule's message: it names every supported range.
func CELMessage() string {
	return "Kubernetes version outside the chosen kubespray release's range (" + SupportedRanges() + ")"
}
