package leases

import (
	"fmt"
	"net"
	"sort"
	"strings"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// FromBareMetalHost returns the addresses metal3 inspection recorded on the host's NICs
// (status.hardware.nics[].ip), by MAC. A dual-stack NIC is listed once per address; the
// IPv4 address is preferred because the DHCP files, and so the rest of BPA, are IPv4.
// The leases never expire: they are as current as the host's status.
func FromBareMetalHost(h *metal3v1.BareMetalHost) map[string]Lease {
	out := map[string]Lease{}
	if h.Status.HardwareDetails == nil {
		return out
	}
	for _, nic := range h.Status.HardwareDetails.NIC {
		mac, ok := NormalizeMAC(nic.MAC)
		if !ok {
			continue
		}
		ip := net.ParseIP(strings.TrimSpace(nic.IP))
		if ip == nil {
			continue
		}
		if old, seen := out[mac]; seen && net.ParseIP(old.IP).To4() != nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		out[mac] = Lease{MAC: mac, IP: ip.String(), Hostname: h.Status.HardwareDetails.Hostname}
	}
	return out
}

// MissingError lists the hosts whose MAC has no current lease. resolve-leases fails with
// it so that Argo retries: DHCP may simply not have answered yet.
type MissingError struct {
	Hosts []bpav1.HostStatus
}

func (e *MissingError) Error() string {
	parts := make([]string, len(e.Hosts))
	for i, h := range e.Hosts {
		mac := h.MAC
		if mac == "" {
			mac = "<no MAC>"
		}
		parts[i] = fmt.Sprintf("%s (node %s, BareMetalHost %s)", mac, h.Name, h.BareMetalHost)
	}
	return fmt.Sprintf("no current lease for %d MAC(s): %s", len(parts), strings.Join(parts, ", "))
}

// MACs returns the missing MACs, sorted.
func (e *MissingError) MACs() []string {
	out := make([]string, 0, len(e.Hosts))
	for _, h := range e.Hosts {
		out = append(out, h.MAC)
	}
	sort.Strings(out)
	return out
}

// Resolve returns a copy of hosts with each IP set from the lease of its MAC, or a
// *MissingError naming every host without one (not just the first, so one retry report
// says everything). lookup is consulted per host, so a per-host source (the host's own
// NICs) and a global one (a leases file) fit the same call.
func Resolve(hosts []bpav1.HostStatus, lookup func(h bpav1.HostStatus, mac string) (Lease, bool)) ([]bpav1.HostStatus, error) {
	out := make([]bpav1.HostStatus, len(hosts))
	var missing []bpav1.HostStatus
	for i, h := range hosts {
		h.Roles = append([]string(nil), h.Roles...)
		mac, ok := NormalizeMAC(h.MAC)
		var l Lease
		if ok {
			h.MAC = mac
			l, ok = lookup(h, mac)
		}
		if !ok {
			missing = append(missing, h)
		}
		h.IP = l.IP
		out[i] = h
	}
	if len(missing) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i].MAC < missing[j].MAC })
		return nil, &MissingError{Hosts: missing}
	}
	return out, nil
}

// InMap looks MACs up in one MAC-to-lease map, e.g. a parsed leases file.
func InMap(m map[string]Lease) func(bpav1.HostStatus, string) (Lease, bool) {
	return func(_ bpav1.HostStatus, mac string) (Lease, bool) {
		l, ok := m[mac]
		return l, ok
	}
}

// OnBareMetalHosts looks each host's MAC up on the NICs of the BareMetalHost it was
// matched to, so that a MAC reused on another host can never lend it its address.
func OnBareMetalHosts(bmhs []metal3v1.BareMetalHost) func(bpav1.HostStatus, string) (Lease, bool) {
	byName := make(map[string]map[string]Lease, len(bmhs))
	for i := range bmhs {
		byName[bmhs[i].Name] = FromBareMetalHost(&bmhs[i])
	}
	return func(h bpav1.HostStatus, mac string) (Lease, bool) {
		l, ok := byName[h.BareMetalHost][mac]
		return l, ok
	}
}
