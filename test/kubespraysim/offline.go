package kubespraysim

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// offlineFetch does on one host, over its SSH connection, what kubespray's download role and
// containerd do there at an offline site, with the host's own curl:
//   - every file the release fetches for a default cluster on the host's arch
//     (kubespray.DownloadsFor; image_arch from `uname -m`) is fetched from files_repo, verified by the host's system trust store only, as get_url
//     (validate_certs, no CA option) does on a node;
//   - every image's manifest is fetched through the containerd mirror of its registry
//     (containerd_registries_mirrors, override_path), verified against the mirror's ca file
//     on the host, which must exist, as containerd with the hosts.toml kubespray writes does
//     (the system store when the mirror names none; v2.27's hosts.toml ignores ca, and BPA
//     puts the CA in the system store too).
//
// It acts only when the vars carry BPA's offline templates (spec.offline), on playbooks that
// download, and fails in kubespray's words naming the host and every file or image it could
// not fetch. It returns the bytes of files fetched.
func (p *Play) offlineFetch(ctx context.Context, host string, c *sshexec.Client) (int64, error) {
	if _, ok := p.vars["kubelet_download_url"].(bpainventory.Template); !ok || p.op.Playbook == kubespray.Reset || p.op.Playbook == kubespray.Remove || p.op.Playbook == kubespray.Facts {
		return 0, nil
	}
	repo, _ := p.vars[kubespray.FilesRepoVar].(string)
	kube, _ := p.vars[bpainventory.KubeVersionVar].(string)
	// image_arch is the host's own: its machine, as Ansible's facts read it.
	machine, err := c.Output(ctx, []string{"uname", "-m"})
	if err != nil {
		return 0, fmt.Errorf("gathering facts: uname -m: %w", err)
	}
	d, err := kubespray.DownloadsFor(fmt.Sprintf("%s.%d", p.profile.Minor, p.patch), kube, kubespray.ImageArch(strings.TrimSpace(string(machine))))
	if err != nil {
		return 0, err
	}
	// One session per host: a line "url<TAB>curl's error" per failure, then the byte count.
	// Images first: a mirror's missing ca shows among the failures the message keeps.
	args := []string{"sh", "-c", fetchScript, "sim-fetch"}
	for _, i := range d.Images {
		m, err := p.manifestURL(i)
		if err != nil {
			return 0, err
		}
		args = append(args, m.ca, m.url)
	}
	for _, f := range d.Files {
		args = append(args, "-", repo+"/"+f)
	}
	out, err := c.Output(ctx, args)
	if err != nil {
		return 0, fmt.Errorf("fetching the offline artifacts: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var n int64
	_, _ = fmt.Sscan(lines[len(lines)-1], &n)
	if failed := lines[:len(lines)-1]; len(failed) > 0 {
		shown := failed[:min(3, len(failed))] // kubespray stops at the first; the step's message keeps 1.5 KiB
		return 0, fmt.Errorf("TASK [download : Download_file | Download item]: %d of %d files and images could not be fetched from %s on %s:\n  %s",
			len(failed), len(d.Files)+len(d.Images), repo, host, strings.Join(shown, "\n  "))
	}
	return n, nil
}

// fetchScript takes pairs of (ca file or -, url): each url is fetched with curl, trusting the
// ca file when one is given (which must exist) and the system store otherwise; manifests
// are asked for in the media types containerd accepts. It prints a line per failure, then
// the bytes fetched.
const fetchScript = `total=0
while [ $# -ge 2 ]; do
	ca=$1 url=$2; shift 2
	case $url in */manifests/*) accept='application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json' ;; *) accept='*/*' ;; esac
	if [ "$ca" != - ] && [ ! -f "$ca" ]; then echo "$url: the mirror's ca $ca does not exist on the host"; continue; fi
	if [ "$ca" = - ]; then n=$(curl -fsS -H "Accept: $accept" -o /dev/null -w '%{size_download}' "$url" 2>&1)
	else n=$(curl -fsS --cacert "$ca" -H "Accept: $accept" -o /dev/null -w '%{size_download}' "$url" 2>&1); fi || {
		echo "$url: $(printf '%s\n' "$n" | grep '^curl:')"
		continue
	}
	total=$((total + n))
done
echo "$total"
`

type manifest struct{ ca, url string }

// manifestURL is where containerd asks for image's manifest: through the mirror
// containerd_registries_mirrors gives its registry (override_path: the mirror's host is
// the API root), with the mirror's ca, or "-" for the system store.
func (p *Play) manifestURL(image string) (manifest, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return manifest{}, fmt.Errorf("image %s: %w", image, err)
	}
	registry := ref.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	mirrors, _ := p.vars["containerd_registries_mirrors"].([]any)
	for _, m := range mirrors {
		entry, _ := m.(map[string]any)
		list, _ := entry["mirrors"].([]any)
		if entry["prefix"] != registry || len(list) == 0 {
			continue
		}
		mirror, _ := list[0].(map[string]any)
		host, _ := mirror["host"].(string)
		ca, ok := mirror["ca"].(string)
		if !ok {
			ca = "-"
		}
		return manifest{ca: ca, url: host + "/" + ref.Context().RepositoryStr() + "/manifests/" + ref.Identifier()}, nil
	}
	return manifest{}, fmt.Errorf("image %s: containerd_registries_mirrors has no mirror for %s", image, registry)
}
