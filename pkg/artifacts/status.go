package artifacts

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// ClusterStatus is what GET /api/v1/status/NAMESPACE/CLUSTER returns: the installation
// status of one cluster, its Provisionings' and Softwares' status as the controller keeps it.
type ClusterStatus struct {
	Namespace     string                                  `json:"namespace"`
	Cluster       string                                  `json:"cluster"`
	Provisionings []NamedStatus[bpav1.ProvisioningStatus] `json:"provisionings"`
	Softwares     []NamedStatus[bpav1.SoftwareStatus]     `json:"softwares"`
	// Hosts are the packages the Softwares track (version: latest) on each host: installed,
	// target, and whether they differ (status_latest.go).
	Hosts []HostPackages `json:"hosts"`
}

// NamedStatus is one CR's name and status.
type NamedStatus[S any] struct {
	Name   string `json:"name"`
	Status S      `json:"status"`
}

// serveStatus answers only a caller who may get both kinds in that namespace, so the
// server's own wider read access never shows another namespace to anyone.
func (s *Server) serveStatus(w http.ResponseWriter, r *http.Request, rest string) {
	ns, cluster, ok := strings.Cut(rest, "/")
	if s.opts.Status == nil || r.Method != http.MethodGet || !ok ||
		len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Label(cluster)) > 0 {
		http.NotFound(w, r)
		return
	}
	u, ok := s.opts.Auth.authenticate(w, r)
	if !ok {
		return
	}
	for _, res := range []string{"provisionings", "softwares"} {
		if !s.opts.Auth.authorize(w, r, u, "list", res, ns) {
			return
		}
	}
	sel := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{bpav1.ClusterLabel: cluster}}
	var provs bpav1.ProvisioningList
	var sws bpav1.SoftwareList
	if err := s.opts.Status.List(r.Context(), &provs, sel...); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if err := s.opts.Status.List(r.Context(), &sws, sel...); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out := ClusterStatus{Namespace: ns, Cluster: cluster,
		Provisionings: []NamedStatus[bpav1.ProvisioningStatus]{}, Softwares: []NamedStatus[bpav1.SoftwareStatus]{}}
	for _, p := range provs.Items {
		out.Provisionings = append(out.Provisionings, NamedStatus[bpav1.ProvisioningStatus]{p.Name, p.Status})
	}
	for _, sw := range sws.Items {
		out.Softwares = append(out.Softwares, NamedStatus[bpav1.SoftwareStatus]{sw.Name, sw.Status})
	}
	out.Hosts = trackedHosts(sws.Items)
	writeJSON(w, out)
}
