package runkubespray

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// offlinePreflight runs before any host is touched. When the vars file is offline (it
// carries BPA's own kubelet_download_url template, which only spec.offline writes), it
// checks that the artifact server holds every file and image of the release's download
// table (amd64) and fails listing what is missing. It reads anonymously (the step has no
// token for the server: bpa serve must allow anonymous reads, as the nodes need too) and
// verifies the server's certificate against the container's trust store.
func offlinePreflight(ctx context.Context, varsFile, image string) error {
	data, err := os.ReadFile(varsFile)
	if err != nil {
		return err
	}
	vars, err := inventory.ReadVars(data)
	if err != nil {
		return err
	}
	if _, ok := vars["kubelet_download_url"].(inventory.Template); !ok {
		return nil
	}
	repo, _ := vars[kubespray.FilesRepoVar].(string)
	server, ok := strings.CutSuffix(repo, "/files")
	if !ok {
		return fmt.Errorf("offline: %s %q is not BPA's (want https://host[:port]/files)", kubespray.FilesRepoVar, repo)
	}
	_, tag, _ := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
	tag, _, _ = strings.Cut(tag, "@")
	kube, _ := vars[inventory.KubeVersionVar].(string)
	d, err := kubespray.DownloadsFor(tag, kube, "amd64")
	if err != nil {
		return fmt.Errorf("offline: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c := &artifacts.Client{URL: server, HTTP: &http.Client{Transport: http.DefaultTransport}}
	missing, err := c.Missing(ctx, d.Files, d.Images)
	if err != nil {
		return fmt.Errorf("offline: checking the artifact server %s: %w", server, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("offline: the artifact server %s lacks %d of the %d artifacts kubespray %s downloads (upload them with bpa artifacts; bpa artifacts check --kubespray %s --kubernetes %s lists them too):\n  %s",
			server, len(missing), len(d.Files)+len(d.Images), tag, tag, kube, strings.Join(missing, "\n  "))
	}
	fmt.Printf("offline: the artifact server %s holds all %d artifacts kubespray %s downloads\n", server, len(d.Files)+len(d.Images), tag)
	return nil
}
