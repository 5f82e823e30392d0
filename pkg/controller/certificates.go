package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
)

// maxCertificatesRecheck bounds how long the controller waits to look at the certificates
// again: a flip weeks away is still looked at daily, so a clock that jumped or a spec edit
// missed cannot leave the condition stale for long.
const maxCertificatesRecheck = 24 * time.Hour

// maxUnread is the CRD's MaxItems of status.certificatesUnread.
const maxUnread = 21

// observeCertificates mirrors what a verify that succeeded read of the certificates; a run
// without one (failed, or nothing to verify) leaves the last reading as it was. The output
// is bounded again here: a Workflow's status is writable by more than the step.
func observeCertificates(p *bpav1.Provisioning, o observe.Observation) {
	c := o.Certificates
	if c == nil {
		return
	}
	p.Status.Certificates = c.Certificates[:min(len(c.Certificates), bpav1.MaxCertificates)]
	p.Status.CertificatesUnread = c.Problems[:min(len(c.Problems), maxUnread)]
	checked := c.CheckedAt
	p.Status.CertificatesCheckedAt = &checked
}

// certificatesExpiring sets ConditionCertificatesExpiring from status.certificates as of
// now, and returns how long until it would change (0: it will not by time alone). Its
// message holds dates, never "in N days", so the status does not change with every look.
func certificatesExpiring(p *bpav1.Provisioning, now time.Time) time.Duration {
	certs := p.Status.Certificates
	if len(certs) == 0 {
		meta.RemoveStatusCondition(&p.Status.Conditions, bpav1.ConditionCertificatesExpiring)
		return 0
	}
	first := certs[0]
	for _, c := range certs[1:] {
		if c.NotAfter.Before(&first.NotAfter) {
			first = c
		}
	}
	warn := p.Spec.ExpiryWarning()
	flip := first.NotAfter.Add(-warn)
	what := fmt.Sprintf("%s on %s (notAfter %s)", first.Component, first.Node, first.NotAfter.UTC().Format(time.RFC3339))
	days := int(warn / (24 * time.Hour))
	status, reason, msg, next := metav1.ConditionFalse, bpav1.ReasonCertificatesValid,
		fmt.Sprintf("no certificate expires within %d days; the earliest: %s", days, what), flip.Sub(now)
	switch {
	case !now.Before(first.NotAfter.Time):
		status, reason, msg, next = metav1.ConditionTrue, bpav1.ReasonCertificateExpired, "expired: "+what, 0
	case !now.Before(flip):
		status, reason, msg, next = metav1.ConditionTrue, bpav1.ReasonCertificateExpiring,
			fmt.Sprintf("within %d days: %s", days, what), first.NotAfter.Sub(now)
	}
	if n := len(p.Status.CertificatesUnread); n > 0 {
		msg += fmt.Sprintf("; %d not read (status.certificatesUnread), the first: %s", n, p.Status.CertificatesUnread[0])
	}
	setCondition(&p.Status.Conditions, p.Generation, bpav1.ConditionCertificatesExpiring, status, reason, msg)
	if next <= 0 {
		return 0
	}
	return min(next+time.Second, maxCertificatesRecheck) // a second late: the flip has happened
}

// reportCertificates emits a Warning when CertificatesExpiring turns True (or from
// expiring to expired), once: the status write before it records that it did.
func reportCertificates(rec record.EventRecorder, p *bpav1.Provisioning, before []metav1.Condition) {
	now := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionCertificatesExpiring)
	if now == nil || now.Status != metav1.ConditionTrue {
		return
	}
	if was := meta.FindStatusCondition(before, bpav1.ConditionCertificatesExpiring); was != nil && was.Status == now.Status && was.Reason == now.Reason {
		return
	}
	rec.Event(p, corev1.EventTypeWarning, now.Reason, "Certificates expiring "+now.Message)
}
