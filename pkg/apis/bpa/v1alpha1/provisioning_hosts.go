package v1alpha1

// HostNamespace is the namespace the Provisioning's BareMetalHosts live in:
// spec.bareMetalHostNamespace, else the CR's own. The controller (releasing hosts), `bpa
// plan` and the steps (claiming them) all ask it here, so they never look in different places.
func (p *Provisioning) HostNamespace() string {
	if p.Spec.BareMetalHostNamespace != "" {
		return p.Spec.BareMetalHostNamespace
	}
	return p.Namespace
}
