package kubespray

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The expected paths are kubespray's default *_download_url and images at the tags, written
// out by hand from download.yml and checksums.yml (not from the table).
func TestDownloadsFor(t *testing.T) {
	d, err := DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubeadm",
		"dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubectl",
		"dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet",
		"github.com/containerd/containerd/releases/download/v2.0.5/containerd-2.0.5-linux-amd64.tar.gz",
		"github.com/containerd/nerdctl/releases/download/v2.0.5/nerdctl-2.0.5-linux-amd64.tar.gz",
		"github.com/containernetworking/plugins/releases/download/v1.4.1/cni-plugins-linux-amd64-v1.4.1.tgz",
		"github.com/etcd-io/etcd/releases/download/v3.5.16/etcd-v3.5.16-linux-amd64.tar.gz",
		"github.com/kubernetes-sigs/cri-tools/releases/download/v1.32.0/crictl-v1.32.0-linux-amd64.tar.gz",
		"github.com/opencontainers/runc/releases/download/v1.2.6/runc.amd64",
		"github.com/projectcalico/calico/archive/v3.29.3.tar.gz",
		"github.com/projectcalico/calico/releases/download/v3.29.3/calicoctl-linux-amd64",
	}, d.Files)
	assert.Equal(t, []string{
		"docker.io/library/nginx:1.27.4-alpine",
		"quay.io/calico/cni:v3.29.3",
		"quay.io/calico/kube-controllers:v3.29.3",
		"quay.io/calico/node:v3.29.3",
		"registry.k8s.io/coredns/coredns:v1.11.3",
		"registry.k8s.io/cpa/cluster-proportional-autoscaler:v1.8.8",
		"registry.k8s.io/dns/k8s-dns-node-cache:1.25.0",
		"registry.k8s.io/kube-apiserver:v1.32.5",
		"registry.k8s.io/kube-controller-manager:v1.32.5",
		"registry.k8s.io/kube-proxy:v1.32.5",
		"registry.k8s.io/kube-scheduler:v1.32.5",
		"registry.k8s.io/pause:3.10",
	}, d.Images)

	// v2.27 versions carry their own v; the per-minor tables and coredns follow Kubernetes.
	d, err = DownloadsFor("v2.27.1", "v1.30.2", "arm64")
	require.NoError(t, err)
	assert.Contains(t, d.Files, "dl.k8s.io/release/v1.30.2/bin/linux/arm64/kubelet")
	assert.Contains(t, d.Files, "github.com/etcd-io/etcd/releases/download/v3.5.21/etcd-v3.5.21-linux-arm64.tar.gz")
	assert.Contains(t, d.Files, "github.com/kubernetes-sigs/cri-tools/releases/download/v1.30.1/crictl-v1.30.1-linux-arm64.tar.gz")
	assert.Contains(t, d.Files, "github.com/containerd/containerd/releases/download/v1.7.27/containerd-1.7.27-linux-arm64.tar.gz")
	assert.Contains(t, d.Images, "registry.k8s.io/pause:3.9")
	assert.Contains(t, d.Images, "registry.k8s.io/coredns/coredns:v1.11.1")
	assert.Contains(t, d.Images, "quay.io/calico/node:v3.29.4")
	assert.Contains(t, d.Images, "registry.k8s.io/kube-apiserver:v1.30.2")

	d, err = DownloadsFor("", "", "amd64")
	require.NoError(t, err)
	assert.Contains(t, d.Files, "dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet", "defaults: v2.28.0 and its newest Kubernetes")

	_, err = DownloadsFor("v2.28.0", "1.29.0", "amd64")
	assert.ErrorContains(t, err, "older than kubespray v2.28.0's kube_version_min_required 1.30.0")
	_, err = DownloadsFor("v2.26.0", "1.29.0", "amd64")
	assert.ErrorContains(t, err, "not supported")
}

// Every supported release and Kubernetes minor has a complete table.
func TestDownloadsCoverEveryRelease(t *testing.T) {
	for _, v := range Versions() {
		p, patch, _ := ProfileFor(v)
		for _, k := range p.KubeVersions(patch) {
			d, err := DownloadsFor(v, k.String(), "amd64")
			require.NoError(t, err, "%s %s", v, k)
			assert.Len(t, d.Files, 11)
			assert.Len(t, d.Images, 12)
		}
		urls, err := OfflineDownloadURLs(v)
		require.NoError(t, err)
		assert.Equal(t, "{{ files_repo }}/dl.k8s.io/release/"+map[bool]string{true: "", false: "v"}[p.VPrefix]+"{{ kube_version }}/bin/linux/{{ image_arch }}/kubelet", urls["kubelet_download_url"], v)
		for n, u := range urls {
			assert.True(t, IsOfflineDownloadURL(n, u))
			assert.False(t, IsOfflineDownloadURL(n, u+"x"))
		}
	}
}

// TestDownloadsForArches: kubespray's image_arch of a machine, and the union of what hosts
// of several arches fetch (calico's CRD archive is the one file they share).
func TestDownloadsForArches(t *testing.T) {
	for machine, arch := range map[string]string{"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le"} {
		assert.Equal(t, arch, ImageArch(machine), machine)
	}
	amd, err := DownloadsFor("v2.28.0", "1.32.5", "amd64")
	require.NoError(t, err)
	arm, err := DownloadsFor("v2.28.0", "1.32.5", "arm64")
	require.NoError(t, err)
	both, err := DownloadsForArches("v2.28.0", "1.32.5", []string{"amd64", "arm64"})
	require.NoError(t, err)
	assert.Len(t, both.Files, len(amd.Files)+len(arm.Files)-1)
	assert.Contains(t, both.Files, "github.com/projectcalico/calico/archive/v3.29.3.tar.gz")
	assert.Subset(t, both.Files, amd.Files)
	assert.Subset(t, both.Files, arm.Files)
	assert.Equal(t, amd.Images, both.Images)
}
