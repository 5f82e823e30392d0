package kubespray

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// What kubespray downloads for a default cluster: kubespray's defaults are container_manager
// containerd, kube_network_plugin calico (calico_datastore kdd), etcd_deployment_type host,
// dns_mode coredns with enable_dns_autoscaler and enable_nodelocaldns, enable_network_policy,
// and loadbalancer_apiserver_type nginx (roles/kubespray[-_]defaults/defaults/main/main.yml).
// The `downloads` dict of roles/kubespray[-_]defaults/defaults/main/download.yml enables
// exactly these for them. Left out, because the defaults disable them: typha, the calico
// apiserver, netchecker, helm, kube-vip, haproxy, the CSI drivers, ingress, cert-manager,
// metrics-server, the other CNIs and runtimes (cilium, flannel, crio, docker, crun, youki,
// kata, gvisor), skopeo, yq and the gateway API CRDs. A cluster that enables one of them
// needs it uploaded too; the table does not know about it.
//
// A file is an offline path "<original domain>/<path>" (bpa serve's /files layout) written as
// a pattern: kubespray's own *_download_url at the release tag with "{{ <base>_url }}/" read
// as the base URL's domain, and with {{ ansible_system | lower }} as linux. Placeholders are
// {{ var }} of kubespray variables only, so the same pattern both lists the file for a
// Kubernetes version (Downloads) and, behind "{{ files_repo }}/", is the Jinja that
// render-inventory gives kubespray (OfflineDownloadURLs): kubespray then fills in its own
// facts (image_arch per host).

// File is one file kubespray downloads, by the variable that holds its URL.
type File struct {
	// Var is kubespray's *_download_url variable.
	Var string
	// Pattern is the offline path with {{ var }} placeholders.
	Pattern string
}

// release is what one kubespray release downloads.
type release struct {
	files []File
	// images are "<registry>/<repository>:<tag>" patterns: the images of the downloads dict
	// (*_image_repo:*_image_tag) plus those kubeadm lists (roles/download/tasks/
	// prep_kubeadm_images.yml: `kubeadm config images list` less coredns and pause, and less
	// etcd, which runs on the host).
	images []string
	// versions are the component versions of the release: the literal *_version of
	// download.yml, or (v2.28) the first amd64 key of the checksum map it reads
	// (roles/kubespray_defaults/vars/main/checksums.yml).
	versions map[string]string
	// byMinor are the per-Kubernetes-minor versions (pod_infra_supported_versions,
	// etcd_supported_versions, crictl_supported_versions), keyed by the minor.
	byMinor map[int]map[string]string
}

// The v2.28 files. download.yml: kubelet/kubectl/kubeadm_download_url ({{ dl_k8s_io_url }} is
// https://dl.k8s.io), etcd, cni, calicoctl, calico_crds, crictl, runc, nerdctl and
// containerd_download_url ({{ github_url }} is https://github.com).
var files228 = []File{
	{"kubelet_download_url", "dl.k8s.io/release/v{{ kube_version }}/bin/linux/{{ image_arch }}/kubelet"},
	{"kubectl_download_url", "dl.k8s.io/release/v{{ kube_version }}/bin/linux/{{ image_arch }}/kubectl"},
	{"kubeadm_download_url", "dl.k8s.io/release/v{{ kube_version }}/bin/linux/{{ image_arch }}/kubeadm"},
	{"etcd_download_url", "github.com/etcd-io/etcd/releases/download/v{{ etcd_version }}/etcd-v{{ etcd_version }}-linux-{{ image_arch }}.tar.gz"},
	{"cni_download_url", "github.com/containernetworking/plugins/releases/download/v{{ cni_version }}/cni-plugins-linux-{{ image_arch }}-v{{ cni_version }}.tgz"},
	{"calicoctl_download_url", "github.com/projectcalico/calico/releases/download/v{{ calico_ctl_version }}/calicoctl-linux-{{ image_arch }}"},
	{"calico_crds_download_url", "github.com/projectcalico/calico/archive/v{{ calico_version }}.tar.gz"},
	{"crictl_download_url", "github.com/kubernetes-sigs/cri-tools/releases/download/v{{ crictl_version }}/crictl-v{{ crictl_version }}-linux-{{ image_arch }}.tar.gz"},
	{"runc_download_url", "github.com/opencontainers/runc/releases/download/v{{ runc_version }}/runc.{{ image_arch }}"},
	{"nerdctl_download_url", "github.com/containerd/nerdctl/releases/download/v{{ nerdctl_version }}/nerdctl-{{ nerdctl_version }}-linux-{{ image_arch }}.tar.gz"},
	{"containerd_download_url", "github.com/containerd/containerd/releases/download/v{{ containerd_version }}/containerd-{{ containerd_version }}-linux-{{ image_arch }}.tar.gz"},
}

// The v2.27 files: the same variables, but most versions carry their 'v' themselves
// (etcd_version "v3.5.16", kube_version "v1.31.4"); nerdctl and containerd do not.
var files227 = []File{
	{"kubelet_download_url", "dl.k8s.io/release/{{ kube_version }}/bin/linux/{{ image_arch }}/kubelet"},
	{"kubectl_download_url", "dl.k8s.io/release/{{ kube_version }}/bin/linux/{{ image_arch }}/kubectl"},
	{"kubeadm_download_url", "dl.k8s.io/release/{{ kube_version }}/bin/linux/{{ image_arch }}/kubeadm"},
	{"etcd_download_url", "github.com/etcd-io/etcd/releases/download/{{ etcd_version }}/etcd-{{ etcd_version }}-linux-{{ image_arch }}.tar.gz"},
	{"cni_download_url", "github.com/containernetworking/plugins/releases/download/{{ cni_version }}/cni-plugins-linux-{{ image_arch }}-{{ cni_version }}.tgz"},
	{"calicoctl_download_url", "github.com/projectcalico/calico/releases/download/{{ calico_ctl_version }}/calicoctl-linux-{{ image_arch }}"},
	{"calico_crds_download_url", "github.com/projectcalico/calico/archive/{{ calico_version }}.tar.gz"},
	{"crictl_download_url", "github.com/kubernetes-sigs/cri-tools/releases/download/{{ crictl_version }}/crictl-{{ crictl_version }}-linux-{{ image_arch }}.tar.gz"},
	{"runc_download_url", "github.com/opencontainers/runc/releases/download/{{ runc_version }}/runc.{{ image_arch }}"},
	{"nerdctl_download_url", "github.com/containerd/nerdctl/releases/download/v{{ nerdctl_version }}/nerdctl-{{ nerdctl_version }}-linux-{{ image_arch }}.tar.gz"},
	{"containerd_download_url", "github.com/containerd/containerd/releases/download/v{{ containerd_version }}/containerd-{{ containerd_version }}-linux-{{ image_arch }}.tar.gz"},
}

// Images, from download.yml's *_image_repo and *_image_tag (kube_image_repo registry.k8s.io,
// docker_image_repo docker.io, quay_image_repo quay.io): kubeadm's four with tag
// v{{ kube_version }} (kubeadm-images.yaml.j2 sets kubernetesVersion; v2.27's kube_version has
// the v already), pod_infra (pause), coredns, nodelocaldns, dnsautoscaler, nginx (the
// localhost apiserver proxy) and calico_node, calico_cni, calico_policy. v is the 'v' v2.28's
// tags add to the versions; v2.27's versions carry it themselves.
func images(v string) []string {
	return []string{
		"registry.k8s.io/kube-apiserver:" + v + "{{ kube_version }}",
		"registry.k8s.io/kube-controller-manager:" + v + "{{ kube_version }}",
		"registry.k8s.io/kube-scheduler:" + v + "{{ kube_version }}",
		"registry.k8s.io/kube-proxy:" + v + "{{ kube_version }}",
		"registry.k8s.io/pause:{{ pod_infra_version }}",
		"registry.k8s.io/coredns/coredns:{{ coredns_image_tag }}",
		"registry.k8s.io/dns/k8s-dns-node-cache:{{ nodelocaldns_version }}",
		"registry.k8s.io/cpa/cluster-proportional-autoscaler:" + v + "{{ dnsautoscaler_version }}",
		"docker.io/library/nginx:{{ nginx_image_tag }}",
		"quay.io/calico/node:" + v + "{{ calico_version }}",
		"quay.io/calico/cni:" + v + "{{ calico_version }}",
		"quay.io/calico/kube-controllers:" + v + "{{ calico_version }}",
	}
}

// coredns_version: v2.28 "{{ '1.11.3' if (kube_version is version('1.30.5', '>=')) else
// '1.11.1' }}", coredns_image_tag "v" + it; v2.27 the same with the v in coredns_version.
func coredns(k KubeVersion) string {
	if !k.less(KubeVersion{30, 5}) {
		return "v1.11.3"
	}
	return "v1.11.1"
}

// v2.27: download.yml's *_supported_versions, keyed v1.31 etc.
func byMinor227(etcd string) map[int]map[string]string {
	return map[int]map[string]string{
		31: {"pod_infra_version": "3.10", "etcd_version": etcd, "crictl_version": "v1.31.1"},
		30: {"pod_infra_version": "3.9", "etcd_version": etcd, "crictl_version": "v1.30.1"},
		29: {"pod_infra_version": "3.9", "etcd_version": etcd, "crictl_version": "v1.29.0"},
	}
}

// v2.28: etcd_supported_versions is 3.5.16 at v2.28.0 and, at v2.28.1, the first etcd_binary_
// checksums key below 3.6 (3.5.22).
func byMinor228(etcd string) map[int]map[string]string {
	return map[int]map[string]string{
		32: {"pod_infra_version": "3.10", "etcd_version": etcd, "crictl_version": "1.32.0"},
		31: {"pod_infra_version": "3.10", "etcd_version": etcd, "crictl_version": "1.31.1"},
		30: {"pod_infra_version": "3.9", "etcd_version": etcd, "crictl_version": "1.30.1"},
	}
}

// releases maps every supported release (Versions) to its downloads.
var releases = map[string]*release{
	"v2.27.0": {files: files227, images: images(""), byMinor: byMinor227("v3.5.16"),
		versions: map[string]string{"calico_version": "v3.29.1", "cni_version": "v1.4.0", "runc_version": "v1.2.3", "containerd_version": "1.7.24",
			"nerdctl_version": "1.7.7", "nodelocaldns_version": "1.22.28", "dnsautoscaler_version": "v1.8.8", "nginx_image_tag": "1.25.2-alpine"}},
	"v2.27.1": {files: files227, images: images(""), byMinor: byMinor227("v3.5.21"),
		versions: map[string]string{"calico_version": "v3.29.4", "cni_version": "v1.4.1", "runc_version": "v1.2.6", "containerd_version": "1.7.27",
			"nerdctl_version": "1.7.7", "nodelocaldns_version": "1.22.28", "dnsautoscaler_version": "v1.8.8", "nginx_image_tag": "1.25.2-alpine"}},
	"v2.28.0": {files: files228, images: images("v"), byMinor: byMinor228("3.5.16"),
		versions: map[string]string{"calico_version": "3.29.3", "cni_version": "1.4.1", "runc_version": "1.2.6", "containerd_version": "2.0.5",
			"nerdctl_version": "2.0.5", "nodelocaldns_version": "1.25.0", "dnsautoscaler_version": "1.8.8", "nginx_image_tag": "1.27.4-alpine"}},
	"v2.28.1": {files: files228, images: images("v"), byMinor: byMinor228("3.5.22"),
		versions: map[string]string{"calico_version": "3.29.5", "cni_version": "1.4.1", "runc_version": "1.2.6", "containerd_version": "2.0.6",
			"nerdctl_version": "2.0.5", "nodelocaldns_version": "1.25.0", "dnsautoscaler_version": "1.8.8", "nginx_image_tag": "1.27.4-alpine"}},
}

// Downloads are what a kubespray release fetches for one Kubernetes version and arch.
type Downloads struct {
	// Files are offline paths, "<original domain>/<path>".
	Files []string
	// Images are "<original registry>/<repository>:<tag>".
	Images []string
}

var placeholder = regexp.MustCompile(`\{\{ ([a-z_]+) \}\}`)

// DownloadsFor lists what kubespray (a release tag; "" is DefaultVersion) downloads for a
// default cluster of Kubernetes kube ("" is the release's newest) on arch (e.g. amd64).
func DownloadsFor(kubesprayVersion, kube, arch string) (*Downloads, error) {
	p, patch, err := ProfileFor(kubesprayVersion)
	if err != nil {
		return nil, err
	}
	if kube == "" {
		kube = p.DefaultKube(patch).String()
	}
	kv, err := KubeVersionVar(kubesprayOrDefault(kubesprayVersion), kube)
	if err != nil {
		return nil, err
	}
	k, _ := ParseKubeVersion(kv)
	r := releases[kubesprayOrDefault(kubesprayVersion)]
	vars := map[string]string{"kube_version": kv, "image_arch": arch}
	for n, v := range r.versions {
		vars[n] = v
	}
	for n, v := range r.byMinor[k.Minor] {
		vars[n] = v
	}
	vars["calico_ctl_version"] = vars["calico_version"]
	// v2.28's coredns_image_tag adds the v to coredns_version; v2.27's has it already.
	vars["coredns_image_tag"] = coredns(k)
	d := &Downloads{}
	for _, f := range r.files {
		s, err := expand(f.Pattern, vars)
		if err != nil {
			return nil, err
		}
		d.Files = append(d.Files, s)
	}
	for _, i := range r.images {
		s, err := expand(i, vars)
		if err != nil {
			return nil, err
		}
		d.Images = append(d.Images, s)
	}
	sort.Strings(d.Files)
	sort.Strings(d.Images)
	return d, nil
}

func expand(pattern string, vars map[string]string) (string, error) {
	var missing []string
	out := placeholder.ReplaceAllStringFunc(pattern, func(m string) string {
		v, ok := vars[placeholder.FindStringSubmatch(m)[1]]
		if !ok {
			missing = append(missing, m)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("download table: %s has no value for %s", pattern, strings.Join(missing, ", "))
	}
	return out, nil
}

// FilesRepoVar is the variable the *_download_url templates read.
const FilesRepoVar = "files_repo"

// OfflineDownloadURLs are the *_download_url variables render-inventory gives a release
// (kubespray's docs/operations/offline-environment.md lists these): Jinja that BPA writes,
// the only templates a vars file may carry.
func OfflineDownloadURLs(kubesprayVersion string) (map[string]string, error) {
	if _, _, err := ProfileFor(kubesprayVersion); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range releases[kubesprayOrDefault(kubesprayVersion)].files {
		out[f.Var] = "{{ " + FilesRepoVar + " }}/" + f.Pattern
	}
	return out, nil
}

// IsOfflineDownloadURL says whether value is the template OfflineDownloadURLs gives variable
// name in some supported release.
func IsOfflineDownloadURL(name, value string) bool {
	for v := range releases {
		if m, _ := OfflineDownloadURLs(v); m[name] == value && value != "" {
			return true
		}
	}
	return false
}

// ImageArch is kubespray's image_arch (host_architecture) of a host whose machine is
// machine (`uname -m`, Ansible's ansible_architecture): roles/kubespray_defaults (v2.27:
// kubespray-defaults) defaults/main/main.yml maps it through _host_architecture_groups, the
// same in every supported release, and keeps any other machine as it is.
func ImageArch(machine string) string {
	if a, ok := map[string]string{"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}[machine]; ok {
		return a
	}
	return machine
}

// DownloadsForArches is what the release fetches on hosts of each of arches: every arch's
// files, and the images (multi-arch, the same names for all).
func DownloadsForArches(kubesprayVersion, kube string, arches []string) (*Downloads, error) {
	all := &Downloads{}
	for _, arch := range arches {
		d, err := DownloadsFor(kubesprayVersion, kube, arch)
		if err != nil {
			return nil, err
		}
		all.Files, all.Images = append(all.Files, d.Files...), append(all.Images, d.Images...)
	}
	slices.Sort(all.Files)
	slices.Sort(all.Images)
	all.Files, all.Images = slices.Compact(all.Files), slices.Compact(all.Images)
	return all, nil
}

// missingFormat is how the offline pre-flight (pkg/offlinecheck) counts what the artifact
// server lacks in its error, which becomes the failed step's message in the CR's status;
// MissingArtifacts reads the count back from there (the bpa_artifacts_missing metric).
const missingFormat = "lacks %d of the %d artifacts"

var missingPattern = regexp.MustCompile(`lacks (\d+) of the \d+ artifacts`)

// MissingArtifactsPhrase says that missing of total artifacts are not on the server.
func MissingArtifactsPhrase(missing, total int) string {
	return fmt.Sprintf(missingFormat, missing, total)
}

// MissingArtifacts is the count a message of MissingArtifactsPhrase names, and whether it
// names one.
func MissingArtifacts(message string) (int, bool) {
	m := missingPattern.FindStringSubmatch(message)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}
