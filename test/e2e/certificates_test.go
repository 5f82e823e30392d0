package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/verify"
	"github.com/akraino-edge-stack/bpa/test/framework/kubespraysim"
)

// shortCertificates makes the site's simulated kubeadm mint leaves that last validity (a
// real one's last a year), until t ends.
func (e *env) shortCertificates(t *testing.T, validity time.Duration) {
	e.SetKubesprayEnv(kubespraysim.EnvCertValidity + "=" + validity.String())
	t.Cleanup(func() { e.SetKubesprayEnv() })
}

// assertCertificates checks what verify read of the cluster's certificates, as kubeadm and
// the kubelet left them on its one master and one worker with leaves of validity: each
// component once, with plausible dates; the served chain; and CertificatesExpiring, True
// when validity is within the spec's warning, with its Warning event.
func (e *env) assertCertificates(t *testing.T, p *bpav1.Provisioning, validity time.Duration) {
	t.Helper()
	master, worker := firstMaster(p).Name, ""
	for _, h := range p.Status.Hosts {
		if !slices.Contains(h.Roles, "master") {
			worker = h.Name
		}
	}
	require.NotNil(t, p.Status.CertificatesCheckedAt)
	checked := p.Status.CertificatesCheckedAt.Time
	assert.WithinDuration(t, time.Now(), checked, runTimeout)
	assert.Empty(t, p.Status.CertificatesUnread)
	got := map[string]time.Time{}
	for _, c := range p.Status.Certificates {
		got[c.Node+"/"+c.Component] = c.NotAfter.Time
	}
	t.Logf("status.certificates: %v", got)
	leaf := func(k string) {
		require.Contains(t, got, k)
		// minted during run-kubespray, minutes before verify read them
		assert.WithinDuration(t, checked.Add(validity), got[k], runTimeout, k)
	}
	for _, c := range []string{"apiserver", "apiserver-kubelet-client", "front-proxy-client", "kubelet-client"} {
		leaf(master + "/" + c)
	}
	leaf(worker + "/kubelet-client")
	for _, c := range []string{"ca", "front-proxy-ca"} {
		require.Contains(t, got, master+"/"+c)
		assert.WithinDuration(t, checked.Add(10*365*24*time.Hour), got[master+"/"+c], runTimeout, c) // kubeadm's CAs: ten years
	}
	served := got[master+"/"+verify.ServedComponent]
	assert.True(t, served.After(checked), "the API server serves a chain valid at the check: %v", served)
	// verify says what it read, from how many hosts, in how long.
	logs := e.argoLogs(t, p.Status.Workflow.Name)
	assertLogLines(t, logs, "verify", `certificates: \d+ entries from 2 hosts in \S+; earliest `)
	t.Log(regexp.MustCompile(`certificates: \d+ entries.*`).FindString(logs))

	expiring := validity < p.Spec.ExpiryWarning()
	c := meta.FindStatusCondition(p.Status.Conditions, bpav1.ConditionCertificatesExpiring)
	require.NotNil(t, c)
	if !expiring {
		assert.Equal(t, bpav1.ReasonCertificatesValid, c.Reason, c.Message)
		return
	}
	assert.Equal(t, bpav1.ReasonCertificateExpiring, c.Reason, c.Message)
	assert.Contains(t, c.Message, p.Status.Certificates[0].Component+" on "+p.Status.Certificates[0].Node)
	list := &corev1.EventList{}
	require.NoError(t, e.Client.List(e.ctx, list, client.InNamespace(e.Namespace)))
	var events []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == p.Name && ev.Reason == bpav1.ReasonCertificateExpiring {
			assert.Equal(t, corev1.EventTypeWarning, ev.Type)
			events = append(events, ev.Message)
		}
	}
	assert.Len(t, events, 1, "one Warning: %s", strings.Join(events, "; "))
}
