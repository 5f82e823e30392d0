package hostmatch

import (
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// TestUnfit covers each metal3 state and mark that keeps a host from a new claim, and the
// ones that do not, with the words an operator reads in `bpa hosts` and the step's log.
func TestUnfit(t *testing.T) {
	me := Claimant{Cluster: "c", Namespace: "tenant-b", Name: "p", UID: "uid-b"}
	releasedAt := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	release := func(from string) hostOpt {
		return func(h *metal3v1.BareMetalHost) {
			h.Annotations = map[string]string{bpav1.HostReleasedFromAnnotation: from, bpav1.HostReleasedAtAnnotation: releasedAt.Format(time.RFC3339)}
		}
	}
	deprovisioned := func(start, end time.Time) hostOpt {
		return func(h *metal3v1.BareMetalHost) {
			h.Status.OperationHistory.Deprovision = metal3v1.OperationMetric{Start: metav1.NewTime(start), End: metav1.NewTime(end)}
		}
	}
	state := func(s metal3v1.ProvisioningState) hostOpt {
		return func(h *metal3v1.BareMetalHost) { h.Status.Provisioning.State = s }
	}
	for _, tc := range []struct {
		name  string
		opts  []hostOpt
		short string // "" when the host may be claimed
		long  string // a part of the long form
	}{
		{name: "provisioned with an image", short: ""},
		{name: "externally provisioned", opts: []hostOpt{state(metal3v1.StateExternallyProvisioned), func(h *metal3v1.BareMetalHost) { h.Spec.Image = nil }}},
		{name: "provisioned by customDeploy", opts: []hostOpt{func(h *metal3v1.BareMetalHost) {
			h.Spec.Image, h.Spec.CustomDeploy = nil, &metal3v1.CustomDeploy{Method: "install_coreos"}
		}}},
		{name: "available", opts: []hostOpt{state(metal3v1.StateAvailable)}, short: "in state available", long: "is available (status.provisioning.state)"},
		{name: "inspecting", opts: []hostOpt{state(metal3v1.StateInspecting)}, short: "in state inspecting"},
		{name: "provisioning", opts: []hostOpt{state(metal3v1.StateProvisioning)}, short: "in state provisioning"},
		{name: "deprovisioning", opts: []hostOpt{state(metal3v1.StateDeprovisioning)}, short: "in state deprovisioning"},
		{name: "never registered", opts: []hostOpt{state(metal3v1.StateNone)}, short: "not registered", long: "status.provisioning.state"},
		{name: "image removed, not yet deprovisioning", opts: []hostOpt{func(h *metal3v1.BareMetalHost) { h.Spec.Image = nil }}, short: "being deprovisioned", long: "no spec.image"},
		{name: "errorType", opts: []hostOpt{func(h *metal3v1.BareMetalHost) { h.Status.ErrorType = metal3v1.ProvisioningError }}, short: "in error", long: "status.errorType provisioning error"},
		{name: "detached by annotation", opts: []hostOpt{func(h *metal3v1.BareMetalHost) {
			h.Annotations = map[string]string{metal3v1.DetachedAnnotation: ""}
		}}, short: "detached", long: metal3v1.DetachedAnnotation},
		{name: "detached status", opts: []hostOpt{func(h *metal3v1.BareMetalHost) { h.Status.OperationalStatus = metal3v1.OperationalStatusDetached }}, short: "detached"},
		{name: "released by another namespace", opts: []hostOpt{release("tenant-a/p")}, short: "released, not deprovisioned",
			long: "was released by Provisioning tenant-a/p at 2026-11-27T10:00:00Z and metal3 has not deprovisioned it since"},
		{name: "released, deprovisioned before the release", opts: []hostOpt{release("tenant-a/p"), deprovisioned(releasedAt.Add(-time.Hour), releasedAt.Add(-time.Minute))},
			short: "released, not deprovisioned"},
		{name: "released, deprovisioning still running", opts: []hostOpt{release("tenant-a/p"), deprovisioned(releasedAt.Add(time.Minute), time.Time{})},
			short: "released, not deprovisioned"},
		{name: "released, deprovisioned since (the same second)", opts: []hostOpt{release("tenant-a/p"), deprovisioned(releasedAt, releasedAt.Add(time.Second))}},
		{name: "released by its own namespace (Retain)", opts: []hostOpt{release("tenant-b/other")}},
		{name: "released, unreadable time", opts: []hostOpt{release("tenant-a/p"), func(h *metal3v1.BareMetalHost) { h.Annotations[bpav1.HostReleasedAtAnnotation] = "yesterday" }},
			short: "released, not deprovisioned", long: "not an RFC 3339 time"},
		{name: "ours, whatever its state", opts: []hostOpt{state(metal3v1.StateAvailable), func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = me.ConsumerRef() }}},
		{name: "ours but in error", opts: []hostOpt{opError, func(h *metal3v1.BareMetalHost) { h.Spec.ConsumerRef = me.ConsumerRef() }}, short: "in error"},
		{name: "another consumer's", opts: []hostOpt{func(h *metal3v1.BareMetalHost) {
			h.Spec.ConsumerRef = &corev1.ObjectReference{Kind: "Metal3Machine", Namespace: "capi", Name: "m"}
		}}, short: "used by another consumer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bmh("host-a", tc.opts...)
			long, short := Unfit(&h, me)
			assert.Equal(t, tc.short, short, long)
			assert.Contains(t, long, tc.long)
		})
	}
}
