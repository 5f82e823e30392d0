package inventory

import (
	"fmt"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// Template is a string that BPA itself writes for Ansible to template: the vars file tags it
// !!str rather than !unsafe. Only the *_download_url templates of pkg/kubespray
// (kubespray.IsOfflineDownloadURL) are accepted, by name and exact value, so no CR or
// parameter can smuggle one in; what they read (files_repo and kubespray's version facts)
// is !unsafe or kubespray's own.
type Template string

// The original registries kubespray pulls from (download.yml's kube_image_repo, gcr_image_repo,
// docker_image_repo, quay_image_repo, github_image_repo), with the variable naming each.
var imageRepoVars = []struct{ name, registry string }{
	{"kube_image_repo", "registry.k8s.io"}, {"gcr_image_repo", "gcr.io"}, {"docker_image_repo", "docker.io"},
	{"quay_image_repo", "quay.io"}, {"github_image_repo", "ghcr.io"},
}

// OfflineVars are kubespray's offline variables (docs/operations/offline-environment.md) for
// an artifact server (bpa serve) at url, https://host[:port], in release kubesprayVersion:
//   - files_repo, url/files, and every *_download_url of the release's download table as
//     "{{ files_repo }}/<original domain>/<path>", the server's layout;
//   - registry_host, host[:port], and each *_image_repo as host[:port]/<original registry>,
//     where bpa serve keeps the images;
//   - containerd_registries_mirrors sending each original registry to the server
//     (override_path, as the registry holds it under /v2/<original registry>/), so the
//     cluster's own workloads pull from it too. TLS is verified against the nodes' trust
//     store, and with caPath (where run-kubespray installs the site policy's CA for the
//     server, nodetrust.Path) against that file too: each mirror's ca, which kubespray
//     v2.28's hosts.toml renders (v2.27's ignores it; the CA is in the system store too).
func OfflineVars(url, kubesprayVersion, caPath string) (map[string]any, error) {
	host, ok := strings.CutPrefix(url, "https://")
	if !ok || host == "" || strings.ContainsAny(host, "/{}%#'\" \\") {
		return nil, fmt.Errorf("offline.url %q: want https://host[:port]", url)
	}
	urls, err := kubespray.OfflineDownloadURLs(kubesprayVersion)
	if err != nil {
		return nil, err
	}
	vars := map[string]any{kubespray.FilesRepoVar: url + "/files", "registry_host": host}
	for k, v := range urls {
		vars[k] = Template(v)
	}
	var mirrors []any
	for _, r := range imageRepoVars {
		vars[r.name] = host + "/" + r.registry
		mirror := map[string]any{
			"host": url + "/v2/" + r.registry, "capabilities": []any{"pull", "resolve"},
			"override_path": true, "skip_verify": false,
		}
		if caPath != "" {
			mirror["ca"] = caPath
		}
		mirrors = append(mirrors, map[string]any{"prefix": r.registry, "mirrors": []any{mirror}})
	}
	vars["containerd_registries_mirrors"] = mirrors
	return vars, nil
}

// addOffline adds spec.offline's variables to vars; one also in extraVars is an error.
func addOffline(spec *bpav1.ProvisioningSpec, caPath string, vars map[string]any) error {
	if spec.Offline == nil {
		return nil
	}
	release := ""
	if spec.Kubespray != nil {
		release = spec.Kubespray.Version
	}
	off, err := OfflineVars(spec.Offline.URL, release, caPath)
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(off) {
		if _, dup := vars[k]; dup {
			return fmt.Errorf("kubespray.extraVars.%s: offline already sets it; set only one", k)
		}
		vars[k] = off[k]
	}
	return nil
}
