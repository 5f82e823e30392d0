package kubespraysim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	bpainventory "github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// download does what kubespray's download role does at an offline site: every file the
// release fetches for a default cluster (kubespray.DownloadsFor, amd64) is fetched from
// files_repo over HTTPS, verified by the system trust store (SSL_CERT_FILE in tests), as
// the nodes' get_url would. It acts only when the vars carry BPA's offline templates
// (spec.offline), and fails naming every file the server does not have. Images are pulled by
// containerd through containerd_registries_mirrors, which the simulation does not model.
func (p *Play) download(ctx context.Context, out io.Writer) error {
	if _, ok := p.vars["kubelet_download_url"].(bpainventory.Template); !ok || p.op.Playbook == kubespray.Reset || p.op.Playbook == kubespray.Remove || p.op.Playbook == kubespray.Facts {
		return nil
	}
	repo, _ := p.vars[kubespray.FilesRepoVar].(string)
	kube, _ := p.vars[bpainventory.KubeVersionVar].(string)
	release := fmt.Sprintf("%s.%d", p.profile.Minor, p.patch)
	d, err := kubespray.DownloadsFor(release, kube, "amd64")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var missing []string
	var bytes int64
	for _, f := range d.Files {
		n, err := fetch(ctx, repo+"/"+f)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", f, err))
			continue
		}
		bytes += n
	}
	if len(missing) > 0 {
		return fmt.Errorf("TASK [download : Download_file | Download item] fatal: %d of %d files could not be downloaded from %s:\n  %s",
			len(missing), len(d.Files), repo, strings.Join(missing, "\n  "))
	}
	fmt.Fprintf(out, "offline: downloaded %d files (%d bytes) from %s\n", len(d.Files), bytes, repo)
	return nil
}

func fetch(ctx context.Context, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return io.Copy(io.Discard, resp.Body)
}
