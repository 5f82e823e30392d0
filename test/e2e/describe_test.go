package e2e

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/cli"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// checkDescribe runs `bpa describe` on a Provisioning and a Software that the real
// workflow-controller ran: every step and every host's node shows with its phase and
// duration, and no credential of the published kubeconfig or the SSH key shows at all.
func (e *env) checkDescribe(t *testing.T, p *bpav1.Provisioning, s *bpav1.Software) {
	t.Helper()
	describe := func(kind, name string) string {
		t.Helper()
		cmd := cli.NewRootCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"describe", kind, name, "--kubeconfig", e.Rig.Kubeconfig, "-n", e.Namespace})
		require.NoError(t, cmd.ExecuteContext(e.ctx))
		t.Logf("bpa describe %s %s:\n%s", kind, name, out.String())
		return out.String()
	}
	cluster := p.Labels["cluster"]
	prov := describe("provisioning", p.Name)
	for _, step := range translator.ProvisioningSteps {
		assert.Regexp(t, "(?m)^│ [├└]─"+step+" +Succeeded +[0-9]+[smh]", prov, step)
	}
	for _, h := range p.Status.Hosts {
		assert.Regexp(t, "(?m)^│ [├└]─"+h.Name+" +"+regexp.QuoteMeta(strings.Join(h.Roles, ","))+" +"+regexp.QuoteMeta(h.IP)+" ", prov, h.Name)
	}
	assert.Regexp(t, "Secret +"+kubeconfig.PublishedSecretName(cluster)+" +exists +by Workflow "+p.Status.Workflow.Name+"\n", prov)
	assert.Regexp(t, "ConfigMap +"+kubeconfig.AddressConfigMapName(cluster)+" +exists", prov)

	sw := describe("software", s.Name)
	for _, step := range translator.SoftwareSteps {
		assert.Regexp(t, "(?m)^│ [├└]─"+step+" +Succeeded +[0-9]+[smh]", sw, step)
	}
	require.NotEmpty(t, s.Status.HostSoftware)
	for _, h := range s.Status.HostSoftware {
		assert.Regexp(t, "(?m)^│ │ [├└]─"+h.Name+" +"+regexp.QuoteMeta(h.IP)+" +Succeeded +[0-9]+[smh]", sw, "the fan-out node of "+h.Name)
	}

	sec := &corev1.Secret{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: kubeconfig.PublishedSecretName(cluster)}, sec))
	kubeconfig, err := clientcmd.Load(sec.Data["value"])
	require.NoError(t, err)
	for _, n := range e.secretNeedles(t, kubeconfig) {
		assert.NotContains(t, prov+sw, n, "a secret in describe's output")
	}
}
