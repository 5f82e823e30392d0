// Package hostfixture shapes BareMetalHosts the way metal3 leaves them, for tests that
// create hosts without the baremetal-operator: BPA claims only hosts whose operating
// system metal3 reports installed (hostmatch.Unfit), so every test host starts that way.
package hostfixture

import (
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
)

// Image is the image the fixture's hosts were provisioned with.
var Image = metal3v1.Image{URL: "http://images.example/ubuntu-22.04.qcow2", Checksum: "http://images.example/ubuntu-22.04.qcow2.sha256sum", ChecksumType: metal3v1.SHA256}

// Provisioned makes h what metal3 leaves after writing Image to the host: spec.image set,
// status.provisioning in state provisioned with that image, powered on and OK. It keeps
// an operationalStatus or error the test set already.
func Provisioned(h *metal3v1.BareMetalHost) *metal3v1.BareMetalHost {
	img := Image
	h.Spec.Image = &img
	h.Spec.Online = true
	h.Status.Provisioning.State = metal3v1.StateProvisioned
	h.Status.Provisioning.Image = img
	h.Status.PoweredOn = true
	if h.Status.OperationalStatus == "" {
		h.Status.OperationalStatus = metal3v1.OperationalStatusOK
	}
	return h
}
