package lookup

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

func TestLookupWritesTheControllersParameters(t *testing.T) {
	p := &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", Generation: 4, Labels: map[string]string{"cluster": "c1"}},
		Spec: bpav1.ProvisioningSpec{
			Masters: []bpav1.NodeEntry{{"m1": nil}},
			Leases:  &bpav1.LeaseSource{Type: bpav1.LeaseSourceISC, HostPath: "/var/lib/dhcp/dhcpd.leases"},
			SSH:     &bpav1.SSHConfig{SecretName: "keys", User: "ubuntu", Port: 2222},
		},
	}
	c := fake.NewClientBuilder().WithScheme(stepcmd.Scheme()).WithObjects(p).Build()
	dir := t.TempDir()
	require.NoError(t, options{namespace: "ns", provisioning: "p1", outputDir: dir}.run(context.Background(), c))

	want, err := translator.ProvisioningParameters(p)
	require.NoError(t, err)
	require.Len(t, want, len(translator.ProvisioningParameterNames()))
	for _, name := range translator.ProvisioningParameterNames() {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Equal(t, want[name], string(got), name)
	}
	assert.Equal(t, "c1", want["cluster"])
	assert.Equal(t, "4", want["generation"])
	assert.Equal(t, "ISC", want["lease-source"])
	assert.Equal(t, "keys", want["ssh-secret"])
}

func TestLookupFailsClearly(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(stepcmd.Scheme()).Build()
	err := options{namespace: "ns", provisioning: "missing", outputDir: t.TempDir()}.run(context.Background(), c)
	require.ErrorContains(t, err, "reading Provisioning ns/missing")
	err = options{namespace: "ns", outputDir: t.TempDir()}.run(context.Background(), c)
	require.ErrorContains(t, err, "exactly one of")
}
