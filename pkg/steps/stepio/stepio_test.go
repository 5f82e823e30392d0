package stepio

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

func TestHostsRoundTrip(t *testing.T) {
	hosts := []bpav1.HostStatus{{Name: "m", Roles: []string{"master"}, MAC: "00:c6:14:04:61:b2", IP: "10.0.0.2", BareMetalHost: "node-01", Etcd: true}}
	out := filepath.Join(t.TempDir(), "out", HostsFile)
	require.NoError(t, WriteHosts(out, hosts), "the directory is created")
	back, err := ReadHosts(out)
	require.NoError(t, err)
	assert.Equal(t, hosts, back)
}

// ReadHosts is strict: the file crosses a process boundary, and a misspelt field would
// silently drop a host's address.
func TestReadHostsErrors(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ content, want string }{
		"unknown field": {`[{"name": "m", "adress": "x"}]`, `json: unknown field "adress"`}, //nolint:misspell // the misspelt field is the input under test
		"empty":         {`[]`, "the list is empty"},
		"not JSON":      {`name: m`, "reading hosts from"},
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o644))
		_, err := ReadHosts(p)
		assert.ErrorContains(t, err, tc.want, name)
	}
	_, err := ReadHosts(filepath.Join(dir, "missing"))
	assert.ErrorContains(t, err, "reading hosts: open")
}

func TestCRFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "from-env")
	var cr CR
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	cr.AddFlags(fs)
	require.NoError(t, fs.Parse([]string{"--provisioning=p", "--generation=4"}))
	assert.Equal(t, CR{Namespace: "from-env", Name: "p", Generation: 4}, cr)

	var byName CR
	fs = pflag.NewFlagSet("y", pflag.ContinueOnError)
	byName.AddNameFlags(fs)
	assert.Nil(t, fs.Lookup("generation"), "verify and publish-kubeconfig act on the CR as it is")
	require.NoError(t, fs.Parse([]string{"--namespace=n", "--provisioning=p"}))
	assert.Equal(t, CR{Namespace: "n", Name: "p"}, byName)
}

func TestCRGet(t *testing.T) {
	p := &bpav1.Provisioning{ObjectMeta: metav1.ObjectMeta{Namespace: "bpa", Name: "p", Generation: 3}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).Build()
	for name, tc := range map[string]struct {
		cr   CR
		want string
	}{
		"changed":  {CR{Namespace: "bpa", Name: "p", Generation: 2}, "Provisioning p changed since this run started (generation 2, now 3); the controller starts a new run"},
		"no name":  {CR{Namespace: "bpa"}, "--provisioning is required"},
		"no ns":    {CR{Name: "p"}, "--namespace is required (or set POD_NAMESPACE)"},
		"other ns": {CR{Namespace: "x", Name: "p"}, `reading Provisioning x/p: provisionings.bpa.akraino.org "p" not found`},
	} {
		_, err := tc.cr.Get(context.Background(), c)
		assert.EqualError(t, err, tc.want, name)
	}
	for _, gen := range []int64{0, 3} {
		got, err := CR{Namespace: "bpa", Name: "p", Generation: gen}.Get(context.Background(), c)
		require.NoError(t, err, "generation %d", gen)
		assert.Equal(t, "p", got.Name)
	}
}

func TestPaths(t *testing.T) {
	assert.Equal(t, "/bpa/in/hosts.json", In(HostsFile))
	assert.Equal(t, "/tmp/bpa/out/hosts.ini", Out(InventoryFile))
}
