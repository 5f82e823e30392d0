package stepio

import "time"

// Renewal is renew-certificates' output (RenewalFile): the control-plane masters whose
// certificates it renewed, in order, each checked before the next was touched.
type Renewal struct {
	Masters  []MasterRenewal `json:"masters"`
	Workflow string          `json:"workflow,omitempty"`
}

// MasterRenewal is one master's renewal: the NotAfter of the certificate its API server
// served (on the master's own 127.0.0.1) before and after, and how long the API server did
// not answer while its control plane restarted (to the step's probing interval).
type MasterRenewal struct {
	Name           string    `json:"name"`
	NotAfterBefore time.Time `json:"notAfterBefore"`
	NotAfterAfter  time.Time `json:"notAfterAfter"`
	AwaySeconds    float64   `json:"awaySeconds"`
	RenewedAt      time.Time `json:"renewedAt"`
}
