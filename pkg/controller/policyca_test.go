package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// The controller plans a run with the CA the site policy gives its artifact server, and
// refuses one (Stalled PolicyViolation, naming the policy's field) when that CA could vouch
// for any name on the nodes (issue 26 item 7): a policy admitted before the CRD's rule, or
// one the rule cannot judge (names that do not cover the server).
func TestAPolicyCAWiderThanItsServerRefusesTheRun(t *testing.T) {
	p := newProvisioning()
	p.Spec.Offline = &bpav1.OfflineConfig{URL: "https://artifacts:8443"}
	for ca, want := range map[string]string{
		string(nodetrusttest.NewCA(t, []string{"artifacts"}).PEM):     "",
		string(nodetrusttest.Unconstrained(t).PEM):                    "BPAPolicy default spec.artifactServers[0].caBundle: certificate 1 (CN=BPA test unconstrained CA): no X.509 name constraints",
		string(nodetrusttest.NewCA(t, []string{"other.example"}).PEM): "do not permit the artifact server's host artifacts",
	} {
		pol := &bpav1.BPAPolicy{ObjectMeta: metav1.ObjectMeta{Name: bpav1.PolicyName},
			Spec: bpav1.BPAPolicySpec{ArtifactServers: []bpav1.ArtifactServer{{URL: "https://artifacts:8443", CABundle: ca}}}}
		c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pol).Build()
		got, err := siteOptions(context.Background(), c, p, translator.Options{})
		if want == "" {
			require.NoError(t, err)
			assert.Equal(t, ca, got.ArtifactsCA)
			continue
		}
		var refused *translator.Refusal
		require.ErrorAs(t, err, &refused)
		assert.Equal(t, bpav1.ReasonPolicyViolation, refused.Reason)
		assert.Contains(t, refused.Message, want)
	}
}
