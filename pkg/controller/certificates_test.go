package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/observe"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// TestCertificatesExpiringFlipsWithTime walks a clock past the warning point and the
// notAfter of the earliest certificate: the condition is False, then True (expiring), then
// True (expired); each look says when the next change is due, and the Warning is emitted
// once per change, not on every reconcile.
func TestCertificatesExpiringFlipsWithTime(t *testing.T) {
	checked := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter := checked.Add(40 * 24 * time.Hour)
	p := &bpav1.Provisioning{}
	p.Spec.Certificates = &bpav1.CertificatesConfig{ExpiryWarningDays: 30}
	observeCertificates(p, observe.Observation{Certificates: &stepio.Certificates{
		CheckedAt: metav1.NewTime(checked),
		Certificates: []bpav1.CertificateStatus{
			{Node: "m1", Component: "ca", NotAfter: metav1.NewTime(checked.Add(3650 * 24 * time.Hour))},
			{Node: "w7", Component: "kubelet-client", NotAfter: metav1.NewTime(notAfter)},
		},
		Problems: []string{"w9 (10.0.0.9): unreachable"},
	}})
	require.Len(t, p.Status.Certificates, 2)
	rec := record.NewFakeRecorder(10)

	look := func(now time.Time) (*metav1.Condition, time.Duration) {
		before := append([]metav1.Condition(nil), p.Status.Conditions...)
		next := certificatesExpiring(p, now)
		reportCertificates(rec, p, before)
		return meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionCertificatesExpiring), next
	}

	c, next := look(checked)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, bpav1.ReasonCertificatesValid, c.Reason)
	assert.Equal(t, maxCertificatesRecheck, next, "the flip is 10 days away: looked at daily")
	c, next = look(notAfter.Add(-30*24*time.Hour - time.Hour))
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, time.Hour+time.Second, next, "looked at again just after the flip")
	assert.Empty(t, rec.Events)

	flip := notAfter.Add(-30*24*time.Hour + time.Second)
	c, next = look(flip)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, bpav1.ReasonCertificateExpiring, c.Reason)
	assert.Contains(t, c.Message, "kubelet-client on w7")
	assert.Contains(t, c.Message, notAfter.Format(time.RFC3339))
	assert.Contains(t, c.Message, "1 not read")
	assert.Equal(t, maxCertificatesRecheck, next)
	require.Len(t, rec.Events, 1)
	assert.Contains(t, <-rec.Events, "Warning CertificateExpiring")

	msg := c.Message
	c, _ = look(flip.Add(time.Hour)) // a later reconcile: nothing new
	assert.Equal(t, msg, c.Message, "the message does not change with time")
	assert.Empty(t, rec.Events)

	c, next = look(notAfter)
	assert.Equal(t, bpav1.ReasonCertificateExpired, c.Reason)
	assert.Zero(t, next)
	require.Len(t, rec.Events, 1)
	assert.Contains(t, <-rec.Events, "Warning CertificateExpired")
}

// TestCertificatesWarningDays: the spec's days move the flip; no certificates, no condition.
func TestCertificatesWarningDays(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &bpav1.Provisioning{}
	p.Status.Certificates = []bpav1.CertificateStatus{{Node: "m1", Component: "apiserver", NotAfter: metav1.NewTime(now.Add(10 * 24 * time.Hour))}}
	certificatesExpiring(p, now)
	assert.True(t, meta.IsStatusConditionTrue(p.Status.Conditions, bpav1.ConditionCertificatesExpiring), "default 30 days")
	p.Spec.Certificates = &bpav1.CertificatesConfig{ExpiryWarningDays: 7}
	certificatesExpiring(p, now)
	assert.True(t, meta.IsStatusConditionFalse(p.Status.Conditions, bpav1.ConditionCertificatesExpiring), "7 days")
	p.Status.Certificates = nil
	certificatesExpiring(p, now)
	assert.Nil(t, meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionCertificatesExpiring))
}
