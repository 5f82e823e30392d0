package stepio

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Drift is check-drift's output (DriftFile): what differs between the live cluster and
// status.applied, one readable line per field, and the Ready condition of every Node (a
// later remediation reads when each turned NotReady).
type Drift struct {
	CheckedAt metav1.Time `json:"checkedAt"`
	// Generation is status.applied's generation the check compared with.
	Generation int64           `json:"generation,omitempty"`
	Fields     []string        `json:"fields,omitempty"`
	Nodes      []NodeReadiness `json:"nodes,omitempty"`
	// Rerun are the lines of Fields that runs put back (spec.driftCheck.reconcile: Apply).
	Rerun *DriftRerun `json:"rerun,omitempty"`
}

// DriftRerun sorts the drift runs put back by the run that does: Provisioning, a rerun of
// the spec (clusterdrift.Nodes says which); Softwares, by Software name, a rerun of it.
type DriftRerun struct {
	Provisioning []string            `json:"provisioning,omitempty"`
	Softwares    map[string][]string `json:"softwares,omitempty"`
}

// NodeReadiness is one Node's Ready condition as the check read it.
type NodeReadiness struct {
	Name string `json:"name"`
	// Ready is the condition's status: True, False or Unknown ("" when it has none).
	Ready              string       `json:"ready"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}
