// Package kubespray is BPA's single record of what each supported kubespray release accepts:
// a Profile per kubespray minor (ansible-core range, supported Kubernetes versions, version
// format, group names, playbook paths, known booleans), the operations BPA runs with it and
// their ansible-playbook argv, and the inventory rules kubespray asserts before it touches a
// host (rules.go). run-kubespray, `bpa plan`, lint, the CRD's CEL rules and the SIMULATED
// kubespray of the test rig all read it, so they cannot disagree about the contract.
//
// Every fact here is taken from kubespray's own sources at the release tag, which the
// comments and the tests' tables name (roles/validate_inventory/tasks/main.yml,
// roles/kubernetes/preinstall/tasks/0040-verify-settings.yml, playbooks/*.yml, ansible.cfg,
// roles/kubespray[-_]defaults).
package kubespray

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Groups are the inventory group names kubespray's plays target.
type Groups struct {
	ControlPlane, Etcd, Node, Cluster string
}

// KubeVersion is a Kubernetes release, major 1.
type KubeVersion struct{ Minor, Patch int }

func (v KubeVersion) String() string { return fmt.Sprintf("1.%d.%d", v.Minor, v.Patch) }

func (v KubeVersion) less(o KubeVersion) bool {
	return v.Minor < o.Minor || v.Minor == o.Minor && v.Patch < o.Patch
}

// Profile is what one kubespray minor release accepts.
type Profile struct {
	// Minor is the release line, e.g. "v2.28".
	Minor string
	// AnsibleCoreMin <= ansible-core < AnsibleCoreMax (playbooks/ansible_version.yml).
	AnsibleCoreMin, AnsibleCoreMax string
	// VPrefix: versions are written "v1.31.4" (v2.27) rather than "1.32.5" (v2.28 normalised
	// them and asserts that no version starts with 'v').
	VPrefix bool
	Groups  Groups
	// Playbooks maps each operation's playbook to its path in the kubespray checkout.
	Playbooks map[Playbook]string
	// ValidateRole is the role that checks the inventory and variables before any host is
	// touched (run first by cluster.yml, scale.yml and upgrade-cluster.yml), or "" where
	// the release checks them in kubernetes/preinstall after gathering facts.
	ValidateRole string
}

// Playbook names an operation's playbook, whatever its path in a release.
type Playbook string

const (
	Facts   Playbook = "facts"
	Cluster Playbook = "cluster"
	Scale   Playbook = "scale"
	Remove  Playbook = "remove-node"
	Upgrade Playbook = "upgrade-cluster"
	Reset   Playbook = "reset"
)

// KnownBooleans are the variables kubespray asserts are real booleans ("Stop if known
// booleans are set as strings").
var KnownBooleans = []string{"download_run_once", "deploy_netchecker", "download_always_pull", "helm_enabled", "openstack_lbaas_enabled"}

// VersionVars are the *_version variables v2.28 asserts carry no leading 'v' ("Stop if some
// versions have a 'v' left at the start"); DerivedVersionVars those of "Stop if some derived
// versions have a 'v' left at the start".
var VersionVars = []string{
	"argocd_version", "aws_ebs_csi_plugin_version", "azure_csi_plugin_version", "calico_version", "calico_apiserver_version",
	"calico_ctl_version", "calico_typha_version", "cert_manager_version", "cilium_cli_version", "cilium_version",
	"cinder_csi_plugin_version", "cni_version", "dnsautoscaler_version", "flannel_cni_version", "flannel_version",
	"gateway_api_version", "gcp_pd_csi_plugin_version", "helm_version", "kube_ovn_version", "kube_router_version",
	"kube_version", "kube_vip_version", "local_path_provisioner_version", "local_volume_provisioner_version",
	"metallb_version", "metrics_server_version", "multus_version", "netcheck_version", "runc_version", "skopeo_version",
	"yq_version",
}

var DerivedVersionVars = []string{"etcd_version", "pod_infra_version"}

var standardGroups = Groups{ControlPlane: "kube_control_plane", Etcd: "etcd", Node: "kube_node", Cluster: "k8s_cluster"}

// CalicoRR is the group of Calico's route reflectors (kubespray's sample inventory and
// remove-node.yml's default hosts); no play of BPA's targets it, but an inventory may hold it.
const CalicoRR = "calico_rr"

// InventoryGroups lists the groups an inventory for kubespray may name: every supported
// release's Groups and CalicoRR, today's names (LegacyGroups maps the older ones), sorted.
func InventoryGroups() []string {
	out := []string{CalicoRR}
	for _, p := range Profiles {
		out = append(out, p.Groups.ControlPlane, p.Groups.Etcd, p.Groups.Node, p.Groups.Cluster)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Of maps each of these groups to its hosts: control-plane, etcd and worker hosts, and
// every host in Cluster and "all", as kubespray's rules see an inventory (Inventory).
func (g Groups) Of(all, controlPlane, etcd, workers []string) Inventory {
	return Inventory{"all": all, g.ControlPlane: controlPlane, g.Etcd: etcd, g.Node: workers, g.Cluster: all}
}

// The top-level playbooks of both releases; facts.yml has no top-level twin.
var standardPlaybooks = map[Playbook]string{
	Facts: "playbooks/facts.yml", Cluster: "cluster.yml", Scale: "scale.yml",
	Remove: "remove-node.yml", Upgrade: "upgrade-cluster.yml", Reset: "reset.yml",
}

// Profiles are the supported kubespray minors, oldest first.
var Profiles = []*Profile{
	{
		Minor: "v2.27", AnsibleCoreMin: "2.16.4", AnsibleCoreMax: "2.17.0",
		VPrefix: true, Groups: standardGroups, Playbooks: standardPlaybooks,
	},
	{
		Minor: "v2.28", AnsibleCoreMin: "2.16.4", AnsibleCoreMax: "2.17.0",
		Groups: standardGroups, Playbooks: standardPlaybooks, ValidateRole: "roles/validate_inventory",
	},
}

// DefaultVersion is the kubespray release (image tag) a CR gets when it names none.
const DefaultVersion = "v2.28.0"

var (
	releaseTag  = regexp.MustCompile(`^v2\.([0-9]+)\.([0-9]+)$`)
	kubeVersion = regexp.MustCompile(`^v?1\.([0-9]{1,3})\.([0-9]{1,3})$`)
)

// Versions lists every supported kubespray release, e.g. v2.28.0.
func Versions() []string {
	var out []string
	for _, p := range Profiles {
		for patch := range p.patches() {
			out = append(out, p.Tag(patch))
		}
	}
	return out
}

// ProfileFor returns the profile of a kubespray release (an image tag such as v2.28.0) and
// its patch number. Only the releases whose Kubernetes versions are recorded
// (kubeversions_generated.go) are supported.
func ProfileFor(version string) (*Profile, int, error) {
	if version == "" {
		version = DefaultVersion
	}
	if m := releaseTag.FindStringSubmatch(version); m != nil {
		for _, p := range Profiles {
			patch, _ := strconv.Atoi(m[2])
			if p.Minor == "v2."+m[1] && patch < p.patches() {
				return p, patch, nil
			}
		}
	}
	return nil, 0, fmt.Errorf("kubespray %q is not supported: want one of %s", version, strings.Join(Versions(), ", "))
}

// ProfileForImage returns the profile of the release a kubespray image is tagged with
// (registry:port/kubespray/kubespray:v2.28.0@sha256:...; a digest does not change the release).
func ProfileForImage(image string) (*Profile, int, error) {
	ref, _, _ := strings.Cut(image, "@")
	_, tag, _ := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if tag == "" {
		return nil, 0, fmt.Errorf("image %q has no tag naming its kubespray release (want one of %s)", image, strings.Join(Versions(), ", "))
	}
	return ProfileFor(tag)
}

// ParseKubeVersion reads "1.32.5" or "v1.32.5".
func ParseKubeVersion(s string) (KubeVersion, error) {
	m := kubeVersion.FindStringSubmatch(s)
	if m == nil {
		return KubeVersion{}, fmt.Errorf("%q is not a Kubernetes version such as 1.32.5", s)
	}
	minor, _ := strconv.Atoi(m[1])
	patch, _ := strconv.Atoi(m[2])
	return KubeVersion{minor, patch}, nil
}

// KubeVersionVar checks a Kubernetes version against a kubespray release and returns it in
// that release's format, for kube_version.
func KubeVersionVar(kubesprayVersion, kube string) (string, error) {
	p, patch, err := ProfileFor(kubesprayVersion)
	if err != nil {
		return "", err
	}
	v, err := ParseKubeVersion(kube)
	if err != nil {
		return "", err
	}
	if min := p.MinRequired(patch); v.less(min) {
		return "", fmt.Errorf("Kubernetes %s is older than kubespray %s's kube_version_min_required %s (supported: %s)", v, p.Tag(patch), min, p.DescribeKube(patch))
	}
	if !p.Supports(patch, v) {
		return "", fmt.Errorf("Kubernetes %s is not one kubespray %s has kubelet checksums for: it installs %s%s", v, p.Tag(patch), p.DescribeKube(patch), releasesWith(v))
	}
	return p.FormatVersion(v), nil
}

// releasesWith names the supported releases that install v, for an error's advice.
func releasesWith(v KubeVersion) string {
	var out []string
	for _, p := range Profiles {
		for patch := range p.patches() {
			if p.Supports(patch, v) {
				out = append(out, p.Tag(patch))
			}
		}
	}
	if len(out) == 0 {
		return " (no supported release installs it)"
	}
	return " (kubespray " + strings.Join(out, ", ") + " installs it)"
}

func kubesprayOrDefault(v string) string {
	if v == "" {
		return DefaultVersion
	}
	return v
}

// FormatVersion writes v as the release expects it.
func (p *Profile) FormatVersion(v KubeVersion) string {
	if p.VPrefix {
		return "v" + v.String()
	}
	return v.String()
}

// SupportedVersions names every release with the Kubernetes versions it installs, for
// error messages.
func SupportedVersions() string {
	var out []string
	for _, p := range Profiles {
		for patch := range p.patches() {
			out = append(out, fmt.Sprintf("kubespray %s: Kubernetes %s", p.Tag(patch), p.DescribeKube(patch)))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
