package renewcerts

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// The masters are status.applied's hosts with the master role, by name (the order the step
// renews them in), without those leaving; a master without an address stops the step.
func TestMasters(t *testing.T) {
	got, err := Masters([]bpav1.HostStatus{
		{Name: "m3", IP: "10.0.0.3", Roles: []string{"master"}},
		{Name: "w1", IP: "10.0.0.9", Roles: []string{"worker"}},
		{Name: "m1", IP: "10.0.0.1", Roles: []string{"master", "worker"}},
		{Name: "m0", IP: "10.0.0.5", Roles: []string{"master"}, Removing: true},
		{Name: "m2", IP: "10.0.0.2", Roles: []string{"master"}, Etcd: true},
	})
	require.NoError(t, err)
	var names []string
	for _, m := range got {
		names = append(names, m.Name)
	}
	assert.Equal(t, []string{"m1", "m2", "m3"}, names)

	_, err = Masters([]bpav1.HostStatus{{Name: "m1", Roles: []string{"master"}}})
	assert.ErrorContains(t, err, "master m1 has no address")
	_, err = Masters([]bpav1.HostStatus{{Name: "w1", IP: "10.0.0.9", Roles: []string{"worker"}}})
	assert.ErrorContains(t, err, "no master")
}

// A failure names the master it stopped at, what was renewed before and what was not
// touched, after the reason.
func TestStoppedMessage(t *testing.T) {
	renewed := []stepio.MasterRenewal{{Name: "m1"}}
	err := failed("%s", stopped("m2", errors.New("boom"), renewed, []*master{{HostStatus: bpav1.HostStatus{Name: "m3"}}}))
	assert.Equal(t, "CertificateRenewalFailed: stopped at master m2: boom; renewed before it: m1; not touched: m3", err.Error())
	assert.Equal(t, "stopped at master m1: boom; none before it; no other master was left", stopped("m1", errors.New("boom"), nil, nil))
}

func TestServerPort(t *testing.T) {
	for server, want := range map[string]string{"https://10.0.0.1:6443": "6443", "https://lb.example:8443/": "8443", "https://[fd00::1]": "443"} {
		got, err := serverPort(server)
		require.NoError(t, err, server)
		assert.Equal(t, want, got, server)
	}
	for _, bad := range []string{"http://10.0.0.1:6443", "10.0.0.1:6443", "://"} {
		_, err := serverPort(bad)
		assert.Error(t, err, bad)
	}
}

// The output is the masters in order, each with both dates, the seconds away and when.
func TestOutput(t *testing.T) {
	dir := t.TempDir()
	o := &options{output: dir + "/renewal.json", workflow: "prov-renew-1"}
	at := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	require.NoError(t, o.write(stepio.Renewal{Masters: []stepio.MasterRenewal{
		{Name: "m1", NotAfterBefore: at.Add(48 * time.Hour), NotAfterAfter: at.Add(49 * time.Hour), AwaySeconds: 3.1, RenewedAt: at},
	}}))
	data, err := os.ReadFile(o.output)
	require.NoError(t, err)
	assert.JSONEq(t, `{"masters":[{"name":"m1","notAfterBefore":"2026-11-30T04:00:00Z","notAfterAfter":"2026-11-30T05:00:00Z","awaySeconds":3.1,"renewedAt":"2026-11-28T04:00:00Z"}],"workflow":"prov-renew-1"}`, string(data))
	var back stepio.Renewal
	require.NoError(t, json.Unmarshal(data, &back))
	assert.True(t, strings.HasSuffix(o.output, stepio.RenewalFile))
}

// A run that cannot start (no CR, a cluster never built) fails with the reason, having
// reached no host.
func TestRunRefusesBeforeAnyHost(t *testing.T) {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "prov"}}
	c := crfake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).Build()
	fs := pflag.NewFlagSet("renew-certificates", pflag.ContinueOnError)
	o := &options{timeout: time.Minute, flags: fs, output: t.TempDir() + "/renewal.json", logf: t.Logf}
	o.ssh.AddFlags(fs)
	for name, want := range map[string]string{
		"prov":  "CertificateRenewalFailed: status.applied lists no master: the cluster was never built; nothing was changed",
		"other": `CertificateRenewalFailed: reading Provisioning bpa/other: provisionings.bpa.akraino.org "other" not found; nothing was changed`,
	} {
		o.cr = stepio.CR{Namespace: "bpa", Name: name}
		err := o.run(context.Background(), c)
		require.Error(t, err, name)
		assert.Equal(t, want, err.Error())
	}
	assert.NoFileExists(t, o.output)
}
