package artifacts

import (
	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// HostPackages is, for one Software and one host of the cluster, each package the Software
// tracks (`version: latest`): what the host has, by the Software's last run there, and what
// it should have, the newest version the Software's current (or last) run installs.
type HostPackages struct {
	Software string           `json:"software"`
	Host     string           `json:"host"`
	Packages []TrackedPackage `json:"packages"`
}

// TrackedPackage is one tracked package on one host. Differs is true while the host has
// another version than the target (none, an older one, or a newer one from elsewhere, which
// latest never downgrades).
type TrackedPackage struct {
	Name      string `json:"name"`
	Installed string `json:"installed"`
	Target    string `json:"target"`
	Differs   bool   `json:"differs"`
}

// trackedHosts lists the tracked packages of every host of the Softwares, in their order
// and the hosts' (the status keeps hosts sorted by name).
func trackedHosts(sws []bpav1.Software) []HostPackages {
	out := []HostPackages{}
	for _, sw := range sws {
		target := map[string]string{}
		for _, v := range sw.Status.Latest {
			target[v.Name] = v.Version
		}
		if len(target) == 0 {
			continue
		}
		for _, h := range sw.Status.HostSoftware {
			hp := HostPackages{Software: sw.Name, Host: h.Name, Packages: []TrackedPackage{}}
			for _, p := range h.Packages {
				if t, ok := target[p.Name]; ok && p.Wanted == bpav1.VersionLatest {
					hp.Packages = append(hp.Packages, TrackedPackage{Name: p.Name, Installed: p.Installed, Target: t, Differs: p.Installed != t})
				}
			}
			out = append(out, hp)
		}
	}
	return out
}
