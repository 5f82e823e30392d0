package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

func offlineSpec(t *testing.T, extra string) *bpav1.ProvisioningSpec {
	s := &bpav1.ProvisioningSpec{Offline: &bpav1.OfflineConfig{URL: "https://artifacts.site:8443"}, Kubernetes: &bpav1.KubernetesConfig{Version: "1.32.5"}}
	if extra != "" {
		s.Kubespray = &bpav1.KubesprayConfig{ExtraVars: ev(t, extra).ExtraVars}
	}
	return s
}

func TestOfflineVars(t *testing.T) {
	data, err := ExtraVars(offlineSpec(t, ""))
	require.NoError(t, err)
	require.NoError(t, CheckExtraVars(data), "run-kubespray accepts BPA's own templates")
	vars, err := ReadVars(data)
	require.NoError(t, err)
	assert.Equal(t, "https://artifacts.site:8443/files", vars["files_repo"])
	assert.Equal(t, "artifacts.site:8443", vars["registry_host"])
	assert.Equal(t, "artifacts.site:8443/registry.k8s.io", vars["kube_image_repo"])
	assert.Equal(t, "artifacts.site:8443/quay.io", vars["quay_image_repo"])
	assert.Equal(t, Template("{{ files_repo }}/dl.k8s.io/release/v{{ kube_version }}/bin/linux/{{ image_arch }}/kubelet"), vars["kubelet_download_url"])
	assert.Contains(t, vars["containerd_registries_mirrors"], map[string]any{"prefix": "docker.io", "mirrors": []any{map[string]any{
		"host": "https://artifacts.site:8443/v2/docker.io", "capabilities": []any{"pull", "resolve"}, "override_path": true, "skip_verify": false}}})
	assert.Contains(t, string(data), `"kubelet_download_url": !!str "{{ files_repo }}/dl.k8s.io/`)

	_, err = ExtraVars(offlineSpec(t, `{"files_repo": "https://elsewhere"}`))
	assert.ErrorContains(t, err, "kubespray.extraVars.files_repo: offline already sets it")
	_, err = ExtraVars(offlineSpec(t, `{"kube_image_repo": "elsewhere"}`))
	assert.ErrorContains(t, err, "kubespray.extraVars.kube_image_repo: offline already sets it")
}

// With the site policy's CA, every containerd mirror names the file run-kubespray installs it
// at, and nothing turns verification off.
func TestOfflineVarsWithCA(t *testing.T) {
	data, err := ExtraVarsWithCA(offlineSpec(t, ""), bpav1.ArtifactsCAPath)
	require.NoError(t, err)
	require.NoError(t, CheckExtraVars(data))
	vars, err := ReadVars(data)
	require.NoError(t, err)
	mirrors := vars["containerd_registries_mirrors"].([]any)
	require.Len(t, mirrors, 5)
	for _, m := range mirrors {
		mirror := m.(map[string]any)["mirrors"].([]any)[0].(map[string]any)
		assert.Equal(t, "/etc/bpa/artifacts-ca.crt", mirror["ca"], m)
		assert.Equal(t, false, mirror["skip_verify"], m)
	}
	without, err := ExtraVars(offlineSpec(t, ""))
	require.NoError(t, err)
	assert.NotContains(t, string(without), "artifacts-ca.crt", "no CA, no ca")
}

// A vars file is refused if it carries any template but BPA's own, by name and value: a
// parameter edited between render-inventory and run-kubespray cannot make Ansible run code.
func TestOnlyBPAsTemplatesPass(t *testing.T) {
	own, err := kubespray.OfflineDownloadURLs("v2.27.0")
	require.NoError(t, err)
	for name, vars := range map[string]map[string]any{
		"payload":    {"kubelet_download_url": Template("{{ lookup('pipe', 'id') }}")},
		"other name": {"files_repo": Template(own["kubelet_download_url"])},
		"swapped":    {"etcd_download_url": Template(own["kubelet_download_url"])},
	} {
		data, err := MarshalVars(vars)
		require.NoError(t, err)
		assert.ErrorContains(t, CheckExtraVars(data), "a template BPA did not write", name)
	}
	data, err := MarshalVars(map[string]any{"kubelet_download_url": Template(own["kubelet_download_url"])})
	require.NoError(t, err)
	assert.NoError(t, CheckExtraVars(data))
	_, err = ReadVars([]byte("\"m\":\n  \"kubelet_download_url\": !!str \"{{ files_repo }}/x\"\n"))
	assert.ErrorContains(t, err, "want a !unsafe string", "a template is a top-level variable only")
}

// On the real ansible-playbook, BPA's template yields the path of the download table, and
// what it reads from the CR (files_repo) stays !unsafe: a payload there is not run.
func TestOfflineTemplatesReachAnsible(t *testing.T) {
	dir := t.TempDir()
	data, err := ExtraVars(offlineSpec(t, ""))
	require.NoError(t, err)
	path := filepath.Join(dir, "vars.yaml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	d, err := kubespray.DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	out := filepath.Join(dir, "out")
	// image_arch and etcd_version are kubespray's facts and defaults; the play stands in for them.
	tasks := fmt.Sprintf("    - copy: {dest: %q, content: \"{{ kubelet_download_url }} {{ etcd_download_url }}\"}\n      vars: {image_arch: amd64, etcd_version: 3.5.16}\n", out)
	playbook(t, dir, path, tasks)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "https://artifacts.site:8443/files/"+d.Files[2]+" https://artifacts.site:8443/files/"+d.Files[6], string(got))

	touched := filepath.Join(dir, "touched")
	vars, err := ReadVars(data)
	require.NoError(t, err)
	vars["files_repo"] = fmt.Sprintf("{{ lookup('pipe', 'touch %s') }}", touched)
	data, err = MarshalVars(vars)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	playbook(t, dir, path, "    - debug: {msg: \"{{ kubelet_download_url }}\"}\n      vars: {image_arch: amd64}\n")
	assert.NoFileExists(t, touched, "files_repo was templated through BPA's template")
}
