package hostmatch

import (
	"fmt"
	"strings"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Unfit says why claimant c may not take BareMetalHost b, whatever its nodes ask for: a
// long form naming the field at fault, and a short one for counting hosts in an error.
// Both are empty when c may take it. docs/security.md lists the same rules for operators.
//
// A host c already holds stays its own unless it is being deleted or is in error: the
// state rules guard new claims, and a cluster keeps its nodes while an admin detaches
// metal3 from them, say. A new claim needs a host whose operating system is there and
// whose disk no other tenant left behind:
//   - metal3 provisioned it (state provisioned, with spec.image or spec.customDeploy still
//     set: without them metal3 is about to deprovision it), or something else did (state
//     externally provisioned). BPA runs kubespray over SSH on what is installed, so
//     available, inspecting, deprovisioning and every other state are refused.
//   - it is not detached: metal3 no longer watches a detached host, so its state is stale.
//   - no consumer holds it, and no earlier BPA's label claims it for another cluster.
//   - if a Provisioning of another namespace released it, metal3 has deprovisioned it
//     since (released, below).
//   - graded remediation did not replace it as dead (bpav1.HostUnhealthyAnnotation).
func Unfit(b *metal3v1.BareMetalHost, c Claimant) (why, short string) {
	ref := b.Spec.ConsumerRef
	label, labelled := b.Labels[bpav1.HostClaimLabel]
	ours := c.Owns(ref) || c.LegacyClaim(b)
	switch {
	case b.DeletionTimestamp != nil:
		return "is being deleted", "being deleted"
	case b.Status.OperationalStatus == metal3v1.OperationalStatusError || b.Status.ErrorMessage != "" || b.Status.ErrorType != "":
		switch {
		case b.Status.ErrorMessage != "":
			return "is in error: " + b.Status.ErrorMessage, "in error"
		case b.Status.ErrorType != "":
			return fmt.Sprintf("is in error (status.errorType %s)", b.Status.ErrorType), "in error"
		}
		return "is in error (operationalStatus error)", "in error"
	case ours:
		return "", ""
	case ref != nil:
		return fmt.Sprintf("is used by %s (spec.consumerRef)", Describe(ref)), "used by another consumer"
	case labelled && label == c.Cluster:
		// An earlier BPA's label claim outside the Provisioning's namespace: another
		// tenant's cluster of the same name looks just the same.
		return fmt.Sprintf("is labelled %s=%s by an earlier BPA outside namespace %s, so it may be another tenant's; an admin adopts it by setting its spec.consumerRef", bpav1.HostClaimLabel, label, c.Namespace),
			"label-only claim outside the namespace"
	case labelled:
		return fmt.Sprintf("is claimed by cluster %q (label %s)", label, bpav1.HostClaimLabel), fmt.Sprintf("claimed by cluster %q", label)
	case b.Annotations[bpav1.HostUnhealthyAnnotation] != "":
		return fmt.Sprintf("is marked unhealthy (annotation %s: %s); an admin removes the annotation once the host is repaired", bpav1.HostUnhealthyAnnotation, b.Annotations[bpav1.HostUnhealthyAnnotation]),
			"marked unhealthy"
	}
	if why, short := unfitState(b); why != "" {
		return why, short
	}
	return released(b, c)
}

// unfitState refuses a host whose operating system is not known to be in place.
func unfitState(b *metal3v1.BareMetalHost) (why, short string) {
	if _, ok := b.Annotations[metal3v1.DetachedAnnotation]; ok || b.Status.OperationalStatus == metal3v1.OperationalStatusDetached {
		return fmt.Sprintf("is detached from metal3 (annotation %s), so its state is not kept up to date", metal3v1.DetachedAnnotation), "detached"
	}
	switch state := b.Status.Provisioning.State; state {
	case metal3v1.StateExternallyProvisioned:
		return "", ""
	case metal3v1.StateProvisioned:
		if b.Spec.Image == nil && b.Spec.CustomDeploy == nil {
			return "is provisioned but has no spec.image any more, so metal3 is about to deprovision it", "being deprovisioned"
		}
		return "", ""
	case metal3v1.StateNone:
		return "has no status.provisioning.state: metal3 has not registered it, so nothing says an operating system is installed", "not registered"
	default:
		return fmt.Sprintf("is %s (status.provisioning.state); BPA takes only hosts with an operating system installed: provisioned or externally provisioned", state),
			"in state " + string(state)
	}
}

// released refuses a host that a Provisioning of another namespace released, until metal3
// has deprovisioned it since: a deprovisioning that started at or after the release and
// ended. metal3 records times to the second, so the release time is compared at that
// precision too. A release mark BPA cannot read refuses the host, since nothing then
// says it is clean; an admin who cleaned it by other means removes the annotations.
func released(b *metal3v1.BareMetalHost, c Claimant) (why, short string) {
	from, ok := b.Annotations[bpav1.HostReleasedFromAnnotation]
	if !ok {
		return "", ""
	}
	ns, _, _ := strings.Cut(from, "/")
	at, err := time.Parse(time.RFC3339, b.Annotations[bpav1.HostReleasedAtAnnotation])
	if err != nil {
		return fmt.Sprintf("was released by Provisioning %s, and its annotation %s is not an RFC 3339 time, so BPA cannot tell whether metal3 has deprovisioned it since", from, bpav1.HostReleasedAtAnnotation),
			"released, not deprovisioned"
	}
	if ns == c.Namespace || deprovisionedSince(b, at) {
		return "", ""
	}
	return fmt.Sprintf("was released by Provisioning %s at %s and metal3 has not deprovisioned it since (status.operationHistory.deprovision), so it may still hold that tenant's data",
		from, at.UTC().Format(time.RFC3339)), "released, not deprovisioned"
}

// deprovisionedSince says whether metal3 recorded a finished deprovisioning of b that started
// at or after since.
func deprovisionedSince(b *metal3v1.BareMetalHost, since time.Time) bool {
	d := b.Status.OperationHistory.Deprovision
	if d.Start.IsZero() || d.End.IsZero() || d.End.Before(&d.Start) {
		return false
	}
	return !d.Start.Time.Before(since.Truncate(time.Second))
}
