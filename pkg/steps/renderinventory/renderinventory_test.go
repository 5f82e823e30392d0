package renderinventory

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

const ns = "bpa"

var hosts = []bpav1.HostStatus{
	{Name: "master-1", Roles: []string{"master"}, MAC: "00:c5:16:05:61:b2", IP: "127.0.1.14", BareMetalHost: "node-04"},
	{Name: "master-2", Roles: []string{"master"}, MAC: "00:c2:14:06:61:b5", IP: "127.0.1.15", BareMetalHost: "node-05"},
	{Name: "worker", Roles: []string{"worker"}, MAC: "00:c6:14:04:61:b2", IP: "127.0.1.11", BareMetalHost: "node-01"},
}

func provisioning(spec bpav1.ProvisioningSpec) *bpav1.Provisioning {
	return &bpav1.Provisioning{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prov", Generation: 1, Labels: map[string]string{"cluster": "cluster-xyz"}},
		Spec:       spec,
	}
}

// run renders for p (plus objs) and returns the inventory, the vars and the warnings.
func run(t *testing.T, p *bpav1.Provisioning, objs ...client.Object) (string, string, string, error) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in", "hosts.json")
	require.NoError(t, stepio.WriteHosts(in, hosts))
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(objs, p)...).Build()
	o := Options{
		CR:              stepio.CR{Namespace: ns, Name: p.Name, Generation: 1},
		HostsFile:       in,
		OutputInventory: filepath.Join(dir, "out", "hosts.ini"),
		OutputVars:      filepath.Join(dir, "out", "extra-vars.yaml"),
	}
	var warn bytes.Buffer
	if err := Run(context.Background(), c, o, &warn); err != nil {
		return "", "", warn.String(), err
	}
	ini, err := os.ReadFile(o.OutputInventory)
	require.NoError(t, err)
	vars, err := os.ReadFile(o.OutputVars)
	require.NoError(t, err)
	return string(ini), string(vars), warn.String(), nil
}

func TestDefaultInventory(t *testing.T) {
	ini, vars, warn, err := run(t, provisioning(bpav1.ProvisioningSpec{PodSubnet: "10.244.64.0/18", KUDPlugins: []bpav1.DebianPackageName{"emco"}}))
	require.NoError(t, err)
	assert.Contains(t, ini, "[all]\nmaster-1 ansible_host=127.0.1.14 ip=127.0.1.14\nmaster-2 ansible_host=127.0.1.15 ip=127.0.1.15\nworker ansible_host=127.0.1.11 ip=127.0.1.11\n")
	assert.Contains(t, ini, "[kube_control_plane]\nmaster-1\nmaster-2\n\n[etcd]\nmaster-1\n\n[kube_node]\nworker\n")
	assert.Equal(t, "# Written by BPA render-inventory. Every string is !unsafe: Ansible never templates it.\n"+
		"\"kube_pods_subnet\": !unsafe \"10.244.64.0/18\"\n\"kud_plugins\":\n  - !unsafe \"emco\"\n", vars)
	assert.NotContains(t, warn, "warning", "two masters: etcd on the first, which kubespray accepts")
	assert.Equal(t, "rendered the inventory of 3 hosts from the built-in kubespray template; it passed the inventory rules; vars file written (167 bytes)\n", warn,
		"the step's log says what it rendered")
}

func TestKUDFlavor(t *testing.T) {
	ini, _, _, err := run(t, provisioning(bpav1.ProvisioningSpec{Inventory: &bpav1.InventoryConfig{Flavor: bpav1.InventoryFlavorKUD}}))
	require.NoError(t, err)
	assert.Contains(t, ini, "[kube-master]\nmaster-1\nmaster-2\n")
	assert.Contains(t, ini, "[virtlet]\nworker\n")
}

func TestTemplateConfigMap(t *testing.T) {
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"bpa.akraino.org/cluster": "cluster-xyz"}}, Data: data}
	}
	withRef := func(name, key string) *bpav1.Provisioning {
		return provisioning(bpav1.ProvisioningSpec{Inventory: &bpav1.InventoryConfig{
			TemplateConfigMapRef: &bpav1.ConfigMapKeyReference{Name: name, Key: key}}})
	}
	tmpl := "[all]\n{{ range .Hosts }}{{ .Name }} ansible_host={{ .IP }}\n{{ end }}"

	ini, _, _, err := run(t, withRef("inv", ""), cm("inv", map[string]string{"hosts.ini.tmpl": tmpl}))
	require.NoError(t, err)
	assert.Equal(t, "[all]\nmaster-1 ansible_host=127.0.1.14\nmaster-2 ansible_host=127.0.1.15\nworker ansible_host=127.0.1.11\n", ini)

	ini, _, _, err = run(t, withRef("inv", "custom"), cm("inv", map[string]string{"custom": "# {{ len .Masters }} masters"}))
	require.NoError(t, err)
	assert.Equal(t, "# 2 masters", ini)

	_, _, _, err = run(t, withRef("inv", "custom"), cm("inv", map[string]string{"hosts.ini.tmpl": tmpl}))
	assert.EqualError(t, err, `inventory template ConfigMap bpa/inv has no key "custom"`)

	_, _, _, err = run(t, withRef("missing", ""))
	assert.ErrorContains(t, err, "reading inventory template ConfigMap bpa/missing:")

	_, _, _, err = run(t, withRef("inv", ""), cm("inv", map[string]string{"hosts.ini.tmpl": "{{ .Bogus }}"}))
	assert.ErrorContains(t, err, "Provisioning prov: inventory: ConfigMap inv key hosts.ini.tmpl: template:")

	// A ConfigMap without the cluster's label, or with another cluster's, is not used.
	for _, labels := range []map[string]string{nil, {"bpa.akraino.org/cluster": "other"}, {"cluster": "cluster-xyz"}} {
		unlabelled := cm("inv", map[string]string{"hosts.ini.tmpl": tmpl})
		unlabelled.Labels = labels
		_, _, _, err = run(t, withRef("inv", ""), unlabelled)
		assert.EqualError(t, err, "inventory template ConfigMap bpa/inv: it must carry the label bpa.akraino.org/cluster=cluster-xyz (its owner's consent to serve this cluster)")
	}

	// What the template writes is checked (pkg/inventory tests every attack).
	_, _, _, err = run(t, withRef("inv", ""), cm("inv", map[string]string{"hosts.ini.tmpl": tmpl + "[all:vars]\nansible_connection=local\n"}))
	assert.EqualError(t, err, "Provisioning prov: inventory: ConfigMap inv key hosts.ini.tmpl: rendered inventory: line 5: only [group] and [group:children] sections are allowed (no [group:vars]: BPA sets the variables)")
}

func TestErrors(t *testing.T) {
	_, _, _, err := run(t, provisioning(bpav1.ProvisioningSpec{PodSubnet: "10.0.0.0/8",
		Kubespray: &bpav1.KubesprayConfig{ExtraVars: map[string]apiextensionsv1.JSON{"kube_pods_subnet": {Raw: []byte(`"10.1.0.0/16"`)}}}}))
	assert.EqualError(t, err, "Provisioning prov: kubespray.extraVars.kube_pods_subnet: PodSubnet already sets it; set only one")

	p := provisioning(bpav1.ProvisioningSpec{})
	p.Generation = 2
	_, _, _, err = run(t, p)
	assert.EqualError(t, err, "Provisioning prov changed since this run started (generation 1, now 2); the controller starts a new run")
}

func TestCommandFlags(t *testing.T) {
	cmd := Command()
	require.NoError(t, cmd.ParseFlags([]string{"--namespace=n", "--provisioning=p"}))
	for flag, want := range map[string]string{"hosts-file": stepio.In(stepio.HostsFile), "output-inventory": stepio.Out(stepio.InventoryFile), "output-vars": stepio.Out(stepio.ExtraVarsFile), "generation": "0"} {
		assert.Equal(t, want, cmd.Flag(flag).Value.String(), flag)
	}
}
