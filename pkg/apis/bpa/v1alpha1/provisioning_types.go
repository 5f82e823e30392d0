package v1alpha1

import (
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// NodeEntry is one `- <node-name>: {...}` item of masters or workers: a map with exactly one
// key, the node name. A null value (`- master-1:`) means "no requirements"; under workers it
// is how ICN says that a master is also a worker.
//
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:MaxProperties=1
// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 63 && k.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="node name must be an RFC 1123 label (lower-case letters, digits and '-', at most 63 characters)"
type NodeEntry map[string]*NodeRequirements

// NodeRequirements select the host for one node: by MAC, by resources, or both (then the
// host found by MAC must also meet the resources).
// +nullable
type NodeRequirements struct {
	// MACAddress of one of the host's NICs, `:` or `-` separated, any case.
	// +optional
	// +kubebuilder:validation:MaxLength=17
	// +kubebuilder:validation:Pattern=`^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$`
	MACAddress string `json:"mac-address,omitempty"`

	// CPU is the minimum number of CPUs (BareMetalHost status.hardware.cpu.count).
	// +optional
	// +kubebuilder:validation:Minimum=1
	CPU *int32 `json:"cpu,omitempty"`

	// Memory is the minimum RAM, as a quantity such as 8Gi.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// SRIOV requires a host labelled feature.bpa.akraino.org/sriov=true.
	// +optional
	SRIOV bool `json:"sriov,omitempty"`

	// QAT requires a host labelled feature.bpa.akraino.org/qat=true.
	// +optional
	QAT bool `json:"qat,omitempty"`

	// Etcd says whether this master runs an etcd member (masters only). When no master
	// says, etcd runs on the largest odd number of masters, the first in list order
	// (kubespray refuses an even number of etcd hosts). When any master says, etcd runs on
	// exactly the masters not marked `etcd: false`, which must be an odd number.
	// +optional
	Etcd *bool `json:"etcd,omitempty"`
}

// LeaseSourceType says where host IPs come from.
// +kubebuilder:validation:Enum=BareMetalHost;ISC;Dnsmasq
type LeaseSourceType string

const (
	// LeaseSourceBareMetalHost reads the IP metal3 introspection recorded on the host's NIC.
	LeaseSourceBareMetalHost LeaseSourceType = "BareMetalHost"
	// LeaseSourceISC reads an ISC dhcpd.leases file.
	LeaseSourceISC LeaseSourceType = "ISC"
	// LeaseSourceDnsmasq reads a dnsmasq leases file.
	LeaseSourceDnsmasq LeaseSourceType = "Dnsmasq"
)

// LeaseSource tells resolve-leases how to map MACs to IPs.
// +kubebuilder:validation:XValidation:rule="self.type == 'BareMetalHost' ? !has(self.hostPath) : has(self.hostPath)",message="hostPath is required for ISC and Dnsmasq lease files, and not allowed for BareMetalHost"
type LeaseSource struct {
	// +kubebuilder:default=BareMetalHost
	Type LeaseSourceType `json:"type"`

	// HostPath of the leases file on the node where DHCP runs; the resolve-leases pod
	// mounts it read-only.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^(/[^/\x00]+)+$`
	// +kubebuilder:validation:XValidation:rule="!self.split('/').exists(s, s == '..' || s == '.')",message="hostPath must be absolute and must not contain '.' or '..' segments"
	HostPath string `json:"hostPath,omitempty"`

	// NodeSelector places the pod that reads the lease file on the node where DHCP runs
	// (e.g. kubernetes.io/hostname: <node>), so on a multi-node cluster it mounts the right
	// file instead of waiting on a node that has none.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="nodeSelector keys must be label keys such as kubernetes.io/hostname"
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`
}

// LabelValue is a Kubernetes label value.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
type LabelValue string

// KubesprayConfig chooses the kubespray release and extra variables.
type KubesprayConfig struct {
	// Image is the kubespray container image repository.
	// +optional
	// +kubebuilder:default="quay.io/kubespray/kubespray"
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?$`
	Image string `json:"image,omitempty"`

	// Version is the image tag, which is also the kubespray release.
	// +optional
	// Only the releases BPA has a profile for (pkg/kubespray) are accepted.
	// +kubebuilder:default="v2.28.0"
	// +kubebuilder:validation:Enum=v2.27.0;v2.27.1;v2.28.0;v2.28.1
	Version string `json:"version,omitempty"`

	// ExtraVars are Ansible variables for the kubespray run: strings, numbers, booleans, and
	// lists and maps of those (kubespray refuses known booleans such as helm_enabled given as
	// strings). render-inventory writes them to a YAML vars file with every string tagged
	// `!unsafe`, so Ansible never templates a CR's value; Jinja delimiters and `#jinja2:` are
	// refused anyway. At most 100 variables; lists and maps nest at most 6 deep with at most
	// 100 items each; strings hold at most 4096 characters; nested map keys are letters,
	// digits and _ . : / -. (The schema cannot type a value that may be any JSON and CRD CEL
	// rules cannot see untyped values, so config/admission/extravars.yaml checks these.)
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	ExtraVars map[string]apiextensionsv1.JSON `json:"extraVars,omitempty"`
}

// OfflineConfig names the artifact server of an air-gapped site.
type OfflineConfig struct {
	// URL is the server's base, https://host[:port]: files are read from URL/files/<original
	// domain>/<path> and images from host[:port]/<original registry>/<repository>. The nodes
	// must trust its certificate (their system trust store): kubespray has no variable that
	// installs a CA, and BPA never turns verification off. It holds no path, quotes, braces
	// or spaces, so the Jinja BPA writes around it reads nothing from it. It must be one of
	// the site's BPAPolicy spec.artifactServers for this namespace (admission, lint and the
	// controller refuse any other), and the pre-flight follows no redirect off it.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^https://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`
	URL string `json:"url"`
}

// Limits and syntax of kubespray.extraVars, shared by admission (config/admission/extravars.yaml),
// `bpa lint` and the steps that write and read the vars file.
const (
	// ExtraVarNamePattern: a top-level key is an Ansible variable name.
	ExtraVarNamePattern = `^[A-Za-z_][A-Za-z0-9_]*$`
	// ExtraVarKeyPattern: a key of a nested map, such as `node-role.kubernetes.io/ingress` or
	// `registry:5000`. No space, brace, quote, `%` or `#`, so nothing Jinja could read.
	ExtraVarKeyPattern = `^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$`
	// MaxExtraVarKeyLength bounds every key, top-level or nested.
	MaxExtraVarKeyLength = 253
	// MaxNodes caps the nodes of one Provisioning, named and pooled together (the CRD's rule
	// on ProvisioningSpec spells the same number).
	MaxNodes = 1000
	// MaxExtraVarNameLength bounds top-level keys.
	MaxExtraVarNameLength = 128
	// MaxExtraVarStringLength bounds every string value.
	MaxExtraVarStringLength = 4096
	// MaxExtraVarItems bounds every list and nested map.
	MaxExtraVarItems = 100
	// MaxExtraVarDepth bounds how deep lists and maps nest in one value: a list of maps of
	// lists is 3 deep; kubespray's deepest common variable, containerd_registries_mirrors
	// (a list of maps whose mirrors are a list of maps with a capabilities list), is 5.
	MaxExtraVarDepth = 6
)

// InventoryFlavor picks the group layout of the rendered hosts.ini.
// +kubebuilder:validation:Enum=kubespray;kud
type InventoryFlavor string

const (
	InventoryFlavorKubespray InventoryFlavor = "kubespray"
	InventoryFlavorKUD       InventoryFlavor = "kud"
)

// InventoryConfig customises the rendered kubespray inventory.
type InventoryConfig struct {
	// Flavor is `kubespray` (current kubespray groups) or `kud` (ICN's KUD layout).
	// +optional
	// +kubebuilder:default=kubespray
	Flavor InventoryFlavor `json:"flavor,omitempty"`

	// TemplateConfigMapRef names a ConfigMap key holding a text/template (with sprig) that
	// replaces the built-in inventory template. The ConfigMap must carry the label
	// bpa.akraino.org/cluster=<this CR's cluster>. The rendered inventory may hold only the
	// kubespray and KUD groups, the cluster's own hosts, and the host variables ansible_host,
	// ip and access_ip (each the host's own IP) and etcd_member_name: no [group:vars], no
	// Jinja.
	// +optional
	TemplateConfigMapRef *ConfigMapKeyReference `json:"templateConfigMapRef,omitempty"`
}

// ConfigMapKeyReference names a key of a ConfigMap in the CR's namespace.
type ConfigMapKeyReference struct {
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
	// +optional
	// +kubebuilder:default="hosts.ini.tmpl"
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// ProvisioningSpec names the cluster's nodes and how to build it.
//
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || self.workers.all(w, w.all(n, self.masters.all(m, !(n in m) || m[n] == null || w[n] == null || !has(m[n].mac__dash__address) || !has(w[n].mac__dash__address) || m[n].mac__dash__address.lowerAscii().replace('-', ':') == w[n].mac__dash__address.lowerAscii().replace('-', ':'))))",message="a node listed in both masters and workers is one host: its mac-address must be the same in both lists"
// +kubebuilder:validation:XValidation:rule="!has(self.workers) || self.masters.all(a, a.all(an, a[an] == null || !has(a[an].mac__dash__address) || self.workers.all(b, b.all(bn, bn == an || b[bn] == null || !has(b[bn].mac__dash__address) || b[bn].mac__dash__address.lowerAscii().replace('-', ':') != a[an].mac__dash__address.lowerAscii().replace('-', ':')))))",message="mac-address must be unique: a master and a different worker name the same MAC (compared case-insensitively)"
// +kubebuilder:validation:XValidation:rule="!has(self.workerPools) || self.workerPools.all(p, self.masters.all(e, e.all(k, !k.startsWith(p.name + '-'))) && (!has(self.workers) || self.workers.all(e, e.all(k, !k.startsWith(p.name + '-')))))",message="a named master or worker must not start with a worker pool's name and '-': those names belong to the pool's members (<pool>-<n>)",fieldPath=".workerPools"
// The cap on the nodes of one CR (MaxNodes): named masters and workers plus every pool's
// replicas. Without it 20 pools of 5,000 were admitted, planned for tens of seconds of a
// shared reconcile worker on every retry, and made a Workflow the apiserver refuses (413).
// +kubebuilder:validation:XValidation:rule="size(self.masters) + (has(self.workers) ? size(self.workers) : 0) + (has(self.workerPools) ? self.workerPools.map(p, int(p.replicas)).sum() : 0) <= 1000",message="at most 1000 nodes per Provisioning: masters, workers and the replicas of every worker pool together"
// The rule below is generated from pkg/kubespray.Profiles (kubespray.CELRule).
// +kubebuilder:validation:XValidation:rule="!has(self.kubernetes) || !has(self.kubernetes.version) || !self.kubernetes.version.matches('^v?1[.][0-9]{1,3}[.][0-9]{1,3}$') || [{'v2.27.0': {29000: true, 29001: true, 29002: true, 29003: true, 29004: true, 29005: true, 29006: true, 29007: true, 29008: true, 29009: true, 29010: true, 29011: true, 29012: true, 30000: true, 30001: true, 30002: true, 30003: true, 30004: true, 30005: true, 30006: true, 30007: true, 30008: true, 31000: true, 31001: true, 31002: true, 31003: true, 31004: true}, 'v2.27.1': {29000: true, 29001: true, 29002: true, 29003: true, 29004: true, 29005: true, 29006: true, 29007: true, 29008: true, 29009: true, 29010: true, 29011: true, 29012: true, 29013: true, 29014: true, 29015: true, 30000: true, 30001: true, 30002: true, 30003: true, 30004: true, 30005: true, 30006: true, 30007: true, 30008: true, 30009: true, 30010: true, 30011: true, 30012: true, 30013: true, 31000: true, 31001: true, 31002: true, 31003: true, 31004: true, 31005: true, 31006: true, 31007: true, 31008: true, 31009: true}, 'v2.28.0': {30000: true, 30001: true, 30002: true, 30003: true, 30004: true, 30005: true, 30006: true, 30007: true, 30008: true, 30009: true, 30010: true, 30011: true, 30012: true, 30013: true, 31000: true, 31001: true, 31002: true, 31003: true, 31004: true, 31005: true, 31006: true, 31007: true, 31008: true, 31009: true, 32000: true, 32001: true, 32002: true, 32003: true, 32004: true, 32005: true}, 'v2.28.1': {30000: true, 30001: true, 30002: true, 30003: true, 30004: true, 30005: true, 30006: true, 30007: true, 30008: true, 30009: true, 30010: true, 30011: true, 30012: true, 30013: true, 30014: true, 31000: true, 31001: true, 31002: true, 31003: true, 31004: true, 31005: true, 31006: true, 31007: true, 31008: true, 31009: true, 31010: true, 31011: true, 31012: true, 32000: true, 32001: true, 32002: true, 32003: true, 32004: true, 32005: true, 32006: true, 32007: true, 32008: true}}].all(m, [has(self.kubespray) && has(self.kubespray.version) ? self.kubespray.version : 'v2.28.0'].all(r, !(r in m) || [self.kubernetes.version.split('.')].all(p, int(p[1]) * 1000 + int(p[2]) in m[r])))",message="Kubernetes version not among those the chosen kubespray release installs (kubespray v2.27.0: Kubernetes 1.31.0–1.31.4, 1.30.0–1.30.8, 1.29.0–1.29.12; kubespray v2.27.1: Kubernetes 1.31.0–1.31.9, 1.30.0–1.30.13, 1.29.0–1.29.15; kubespray v2.28.0: Kubernetes 1.32.0–1.32.5, 1.31.0–1.31.9, 1.30.0–1.30.13; kubespray v2.28.1: Kubernetes 1.32.0–1.32.8, 1.31.0–1.31.12, 1.30.0–1.30.14)",fieldPath=".kubernetes.version"
type ProvisioningSpec struct {
	// The MAC uniqueness rules of masters and workers map each entry once to its normalised
	// MAC (or, when it has none, its name, which never holds a ':'), bind that list to l
	// through a one-element list, and compare with indexOf. The pairwise form normalised
	// every MAC once per pair and exceeded the apiserver's per-rule cost from about 165
	// MAC-pinned workers; this one stays within it beyond 500 (at 600 the name uniqueness
	// rule reaches it). test/integration TestWorkerLimitIsTrue proves MaxItems' 300.

	// Masters are the control-plane nodes; at least one.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=15
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.all(k, self.exists_one(f, k in f)))",message="node names must be unique within masters"
	// +kubebuilder:validation:XValidation:rule="[self.map(e, e.map(k, e[k] == null || !has(e[k].mac__dash__address) ? k : e[k].mac__dash__address.lowerAscii().replace('-', ':'))[0])].all(l, l.all(m, !m.contains(':') || l.indexOf(m) == l.lastIndexOf(m)))",message="mac-address must be unique: two nodes in this list name the same MAC (compared case-insensitively)"
	// +kubebuilder:validation:XValidation:rule="!self.exists(e, e.exists(k, e[k] != null && has(e[k].etcd))) || size(self.filter(e, e.exists(k, e[k] == null || !has(e[k].etcd) || e[k].etcd))) % 2 == 1",message="etcd: the masters that run etcd (all but those with etcd: false) must be an odd number, at least one: kubespray refuses an even number of etcd hosts"
	Masters []NodeEntry `json:"masters"`

	// Workers are the worker nodes. A name also listed under masters is the same host with
	// both roles. With no workers, the masters also run workloads.
	// +optional
	// +kubebuilder:validation:MaxItems=300
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.all(k, self.exists_one(f, k in f)))",message="node names must be unique within workers"
	// +kubebuilder:validation:XValidation:rule="[self.map(e, e.map(k, e[k] == null || !has(e[k].mac__dash__address) ? k : e[k].mac__dash__address.lowerAscii().replace('-', ':'))[0])].all(l, l.all(m, !m.contains(':') || l.indexOf(m) == l.lastIndexOf(m)))",message="mac-address must be unique: two nodes in this list name the same MAC (compared case-insensitively)"
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.all(k, e[k] == null || !has(e[k].etcd)))",message="etcd applies to masters only: set it under masters"
	Workers []NodeEntry `json:"workers,omitempty"`

	// KUDPlugins are KUD add-ons installed with the cluster (ICN). They are handed to the
	// kubespray run as the `kud_plugins` variable.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	KUDPlugins []DebianPackageName `json:"KUDPlugins,omitempty"`

	// PodSubnet is the pods' CIDR (kubespray's kube_pods_subnet).
	// +optional
	// +kubebuilder:validation:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="PodSubnet must be a CIDR network address such as 10.244.64.0/18"
	PodSubnet string `json:"PodSubnet,omitempty"`

	// MasterSelector narrows the BareMetalHosts masters may be chosen from, like Cluster
	// API Metal3's hostSelector.
	// +optional
	MasterSelector *metav1.LabelSelector `json:"masterSelector,omitempty"`

	// WorkerSelector narrows the BareMetalHosts workers may be chosen from.
	// +optional
	WorkerSelector *metav1.LabelSelector `json:"workerSelector,omitempty"`

	// BareMetalHostNamespace is where the BareMetalHosts live; defaults to the CR's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	BareMetalHostNamespace string `json:"bareMetalHostNamespace,omitempty"`

	// Leases says where host IPs come from; defaults to the BareMetalHosts' NIC IPs.
	// +optional
	Leases *LeaseSource `json:"leases,omitempty"`

	// Kubespray chooses the kubespray image and extra variables.
	// +optional
	Kubespray *KubesprayConfig `json:"kubespray,omitempty"`

	// SSH says how kubespray and the verify step reach the hosts.
	// +optional
	SSH *SSHConfig `json:"ssh,omitempty"`

	// Inventory customises the rendered inventory.
	// +optional
	Inventory *InventoryConfig `json:"inventory,omitempty"`

	// Kubernetes chooses the Kubernetes release kubespray installs.
	// +optional
	Kubernetes *KubernetesConfig `json:"kubernetes,omitempty"`

	// Offline points kubespray at an artifact server (`bpa serve`) for every file and image
	// it downloads: render-inventory writes kubespray's offline variables itself.
	// +optional
	Offline *OfflineConfig `json:"offline,omitempty"`

	// WorkerPools are groups of interchangeable workers, chosen by requirement and
	// selector like a Cluster API MachineDeployment: scaling is editing replicas. Members
	// are named `<pool>-<n>` and keep their names (and hosts) for life; a scale-down
	// removes the members named in the bpa.akraino.org/delete-nodes annotation first, then
	// the newest. Named workers keep working beside pools.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=map
	// +listMapKey=name
	WorkerPools []WorkerPool `json:"workerPools,omitempty"`

	// NodeRemoval says how nodes leave the cluster (kubespray's remove-node.yml); its drain
	// settings also apply to the drains of upgrade-cluster.yml (upgrades, and masters joining).
	// +optional
	NodeRemoval *NodeRemoval `json:"nodeRemoval,omitempty"`

	// DeletionPolicy says what deleting this Provisioning does to the cluster: Retain
	// leaves it running and only releases the hosts; Reset runs kubespray's reset.yml on
	// every host first, and releases them once it succeeded. While it runs, or if it cannot
	// run or failed, deletion waits with the condition Deleting saying why;
	// the annotation bpa.akraino.org/skip-reset: "true" lets it go without resetting.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// Certificates says when the cluster's certificates, which verify reads after every
	// run (status.certificates), count as expiring.
	// +optional
	Certificates *CertificatesConfig `json:"certificates,omitempty"`

	// EtcdBackup says when BPA snapshots the cluster's etcd. Every snapshot is proven
	// before it counts: restored into a scratch etcd inside the step, which must serve a key
	// written just before the snapshot. Snapshots go to the etcd backup server the site
	// policy names (BPAPolicy spec.etcdBackupServer), under this namespace and cluster. By
	// default a verified snapshot is taken before every day-2 run's first operation (and
	// before each later hop of a chained upgrade), and the operation does not start without
	// it.
	// +optional
	EtcdBackup *EtcdBackup `json:"etcdBackup,omitempty"`

	// DriftCheck has BPA compare the live cluster with what it applied (status.applied),
	// every interval, reading only: the node set, each node's kubelet version, roles, the
	// labels and taints BPA applied, and kubeadm's ClusterConfiguration. The result is
	// status.drift and the condition Drifted (docs/drift.md).
	// +optional
	DriftCheck *DriftCheck `json:"driftCheck,omitempty"`

	// Remediation has BPA repair workers whose Node stays NotReady: a restart of kubelet and
	// containerd, then a reboot through metal3, then a spare host, one rung at a time, with
	// guards (docs/remediation.md). Control-plane nodes are never remediated.
	// +optional
	Remediation *Remediation `json:"remediation,omitempty"`
}

// RemediationRung is one step of graded remediation.
// +kubebuilder:validation:Enum=Restart;Reboot;Replace
type RemediationRung string

// The rungs, in the order they are climbed.
const (
	// RungRestart restarts containerd and kubelet over SSH and waits for Ready.
	RungRestart RemediationRung = "Restart"
	// RungReboot asks metal3 to reboot the host (the reboot.metal3.io annotation, through
	// the account the admin grants in BPAPolicy).
	RungReboot RemediationRung = "Reboot"
	// RungReplace removes the node ungracefully and joins it again on a spare host.
	RungReplace RemediationRung = "Replace"
)

// Remediation configures graded remediation of workers. Unset fields take the defaults
// below (DefaultRemediation*); the CRD's rules and `bpa lint` check the bounds.
// +kubebuilder:validation:XValidation:rule="!has(self.rungs) || self.rungs.all(r, self.rungs.exists_one(s, s == r))",message="rungs must not repeat"
type Remediation struct {
	// UnhealthyFor is how long a worker's Node must be NotReady or Unknown (since its Ready
	// condition's lastTransitionTime) before BPA acts; at least 1m, at most 24h; default 5m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="unhealthyFor must be at least 1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="unhealthyFor must be at most 24h"
	UnhealthyFor *metav1.Duration `json:"unhealthyFor,omitempty"`

	// MaxUnhealthy holds every action while more workers than this are unhealthy: a count,
	// or a percentage of the cluster's workers rounded down but at least one (Cluster API's
	// MachineHealthCheck, but for the floor of one); default "40%". Many workers down at
	// once is a network or power fault that replacing hosts would make worse.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="maxUnhealthy must be a count of at least 0 or a percentage from 0% to 100%"
	MaxUnhealthy *intstr.IntOrString `json:"maxUnhealthy,omitempty"`

	// Cooldown is the least time between two actions on the cluster, and the time a rung is
	// given to work before the next is taken; at least 1m, at most 24h; default 10m.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="cooldown must be at least 1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="cooldown must be at most 24h"
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`

	// Rungs are the rungs BPA may take, climbed in the order Restart, Reboot, Replace
	// whatever order they are listed in; default all three.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	Rungs []RemediationRung `json:"rungs,omitempty"`
}

// Defaults and bounds of spec.remediation (the CRD's rules spell the bounds).
const (
	DefaultRemediationUnhealthyFor = 5 * time.Minute
	DefaultRemediationCooldown     = 10 * time.Minute
	DefaultRemediationMaxUnhealthy = "40%"
	MinRemediationDuration         = time.Minute
	MaxRemediationDuration         = 24 * time.Hour
)

// RemediationStatus is what graded remediation did and holds.
type RemediationStatus struct {
	// LastActionAt is when the cluster's last rung was taken (the cooldown counts from it).
	// +optional
	LastActionAt *metav1.Time `json:"lastActionAt,omitempty"`
	// Nodes are the workers with an unhealthy episode, or a replacement within
	// ReplaceWindow.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=300
	Nodes []NodeRemediation `json:"nodes,omitempty"`
}

// NodeRemediation is one worker's remediation record.
type NodeRemediation struct {
	// Node is the node's name in the spec.
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node"`
	// Since is when the current unhealthy episode began: the Ready condition's
	// lastTransitionTime. A Node Ready again ends the episode; the next one starts anew.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Rung is the last rung taken in the episode, and Attempts how many were taken.
	// +optional
	Rung RemediationRung `json:"rung,omitempty"`
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// LastActionAt is when the last rung was taken, and Workflow its Workflow.
	// +optional
	LastActionAt *metav1.Time `json:"lastActionAt,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Workflow string `json:"workflow,omitempty"`
	// ReplacedAt is when the node was last replaced: another Replace within ReplaceWindow
	// is not taken (RemediationExhausted), so a host that keeps dying never loops.
	// +optional
	ReplacedAt *metav1.Time `json:"replacedAt,omitempty"`
	// Exhausted says the node has no rung left; a person must look.
	// +optional
	Exhausted bool `json:"exhausted,omitempty"`
}

// DriftCheck configures the periodic drift check.
type DriftCheck struct {
	// Interval between checks, such as 10m or 1h; at least a minute. A run of the spec in
	// progress delays a check (one cluster, one Workflow at a time).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="interval must be at least 1m"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="interval must be at most 168h (a week)"
	Interval metav1.Duration `json:"interval"`

	// Reconcile is what BPA does with drift a run can put back. Report (the default) only
	// says what differs. Apply also asks for the runs that put back what they can: a rerun of
	// the spec (kubespray's cluster.yml relabels node_labels and reinstalls the kubelet of
	// the applied release) and a rerun of each Software whose packages drifted. Other drift
	// (a node gone or unknown, a taint or role label changed, kubeadm's config) is reported
	// only. One drift is applied once: found again after its runs, it is left to a person.
	// +optional
	// +kubebuilder:default=Report
	Reconcile DriftReconcile `json:"reconcile,omitempty"`
}

// DriftReconcile says whether drift a run can put back is put back.
// +kubebuilder:validation:Enum=Report;Apply
type DriftReconcile string

const (
	DriftReport DriftReconcile = "Report"
	DriftApply  DriftReconcile = "Apply"
)

// DriftRerunPrefix starts the bpa.akraino.org/rerun value BPA sets to put drift back:
// drift-<the check's slot, Unix seconds>.
const DriftRerunPrefix = "drift-"

// MinDriftCheckInterval and MaxDriftCheckInterval bound spec.driftCheck.interval (the CRD's
// rules spell them): at most a week, so a check's keep time (an interval) stays far inside
// Argo's int32 seconds.
const (
	MinDriftCheckInterval = time.Minute
	MaxDriftCheckInterval = 7 * 24 * time.Hour
)

// MaxDriftFields bounds status.drift.fields (the CRD's MaxItems spells the same number);
// the step's output keeps them all.
const MaxDriftFields = 20

// DriftStatus is what the last drift check found.
type DriftStatus struct {
	// CheckedAt is when the last check that finished read the cluster.
	// +optional
	CheckedAt *metav1.Time `json:"checkedAt,omitempty"`
	// Workflow is the last check's Workflow.
	// +optional
	Workflow string `json:"workflow,omitempty"`
	// Fields name each difference, one readable line each ("node worker-1: label
	// example.com/role=edge missing"); at most MaxDriftFields, the last saying how many more.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=512
	Fields []string `json:"fields,omitempty"`
	// ObservedGeneration is the generation the check compared with (status.applied's).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Reconcile is the last putting back of drift BPA asked for (reconcile: Apply), kept
	// until a check finds none of its fields, so the same drift is never applied twice.
	// +optional
	Reconcile *DriftReconcileStatus `json:"reconcile,omitempty"`
}

// DriftReconcileStatus is one putting back of drift: the runs BPA asked for, and why.
type DriftReconcileStatus struct {
	// Request is the bpa.akraino.org/rerun value set on the Provisioning (when its run puts
	// something back) and on each Software of Softwares.
	// +kubebuilder:validation:MaxLength=63
	Request string `json:"request"`
	// RequestedAt is when the runs were asked for.
	RequestedAt metav1.Time `json:"requestedAt"`
	// Provisioning says whether the spec is run again.
	// +optional
	Provisioning bool `json:"provisioning,omitempty"`
	// Softwares are the Softwares run again for their packages.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Softwares []string `json:"softwares,omitempty"`
	// Fields are the differences the runs are to put back (at most MaxDriftFields).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=512
	Fields []string `json:"fields,omitempty"`
	// NotPutBack says a check after the runs found the same fields: BPA leaves them to a
	// person (it never applies one drift twice).
	// +optional
	NotPutBack bool `json:"notPutBack,omitempty"`
}

// EtcdBackup configures the cluster's etcd snapshots.
type EtcdBackup struct {
	// Schedule takes a snapshot on a cron schedule (five fields, minute first, in UTC, or a
	// descriptor such as @daily), besides those before day-2 operations. A run of the
	// cluster in progress delays it (one cluster, one run at a time); a missed time is not
	// made up, the next one is taken.
	// +optional
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|[0-9*,/-]+ [0-9*,/-]+ [0-9*,/?-]+ [0-9A-Za-z*,/-]+ [0-9A-Za-z*,/?-]+)$`
	Schedule string `json:"schedule,omitempty"`

	// Keep is how many snapshots of this cluster the backup server keeps: after each new
	// verified one, the oldest beyond Keep are deleted. status.backups lists the newest
	// of them.
	// +optional
	// +kubebuilder:default=7
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Keep *int32 `json:"keep,omitempty"`

	// BeforeDay2 is Required (the default): a day-2 run takes a verified snapshot before its
	// first operation, and the operation does not start when it fails. Skip lets day-2
	// operations run without one: a failed upgrade or removal may then be unrecoverable.
	// +optional
	// +kubebuilder:default=Required
	BeforeDay2 BackupRequirement `json:"beforeDay2,omitempty"`
}

// BackupRequirement says whether day-2 operations need a fresh verified snapshot.
// +kubebuilder:validation:Enum=Required;Skip
type BackupRequirement string

const (
	BackupRequired BackupRequirement = "Required"
	BackupSkip     BackupRequirement = "Skip"
)

// DefaultBackupKeep is spec.etcdBackup.keep's default.
const DefaultBackupKeep = 7

// MaxBackupsInStatus bounds status.backups.
const MaxBackupsInStatus = 10

// BackupStatus is one etcd snapshot on the backup server.
type BackupStatus struct {
	// Name is the snapshot's name on the backup server, under the cluster's path
	// (<backup server>/backups/<namespace>/<cluster>/<name>).
	Name string `json:"name"`
	// Size is the snapshot's size in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex sha256 of the snapshot file.
	SHA256 string `json:"sha256"`
	// Revision is the etcd revision the snapshot holds.
	Revision int64 `json:"revision"`
	// Member is the etcd member (node) it was taken from.
	// +optional
	Member string `json:"member,omitempty"`
	// TakenAt is when the snapshot was taken.
	TakenAt metav1.Time `json:"takenAt"`
	// Verified says the snapshot was restored into a scratch etcd that served the canary
	// key written just before it. BPA records no unverified snapshot here.
	Verified bool `json:"verified"`
	// Workflow is the run that took it.
	// +optional
	Workflow string `json:"workflow,omitempty"`
}

// RequestStatus is an operation a person asked for with an annotation, outside the runs of
// the spec: an etcd restore, a certificate renewal.
type RequestStatus struct {
	// Request is the annotation's value it answers.
	Request string `json:"request"`
	// Workflow runs it.
	// +optional
	Workflow string `json:"workflow,omitempty"`
	// Phase is Running, Succeeded or Failed.
	Phase RequestPhase `json:"phase"`
	// Message says what happened, or what failed and what to do.
	// +optional
	Message string `json:"message,omitempty"`
	// StartedAt and FinishedAt bound its Workflow.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// RequestPhase is where a requested operation is.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type RequestPhase string

const (
	RequestRunning   RequestPhase = "Running"
	RequestSucceeded RequestPhase = "Succeeded"
	RequestFailed    RequestPhase = "Failed"
)

// RestoreStatus is one etcd restore (docs/protecting.md#restore).
type RestoreStatus struct {
	RequestStatus `json:",inline"`
	// Snapshot is the name of the snapshot restored, on the backup server under the
	// cluster's path.
	Snapshot string `json:"snapshot"`
}

// CertificatesConfig tunes the CertificatesExpiring condition.
type CertificatesConfig struct {
	// ExpiryWarningDays: the condition CertificatesExpiring turns True this many days
	// before the earliest notAfter of status.certificates. kubeadm's leaf certificates last
	// a year and its CAs ten, so the default, 30, leaves a month to renew.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=365
	ExpiryWarningDays int32 `json:"expiryWarningDays,omitempty"`
}

// DefaultExpiryWarningDays is ExpiryWarningDays when the spec leaves it out.
const DefaultExpiryWarningDays = 30

// ExpiryWarning is how long before a certificate's notAfter it counts as expiring.
func (s *ProvisioningSpec) ExpiryWarning() time.Duration {
	days := int32(DefaultExpiryWarningDays)
	if s.Certificates != nil && s.Certificates.ExpiryWarningDays > 0 {
		days = s.Certificates.ExpiryWarningDays
	}
	return time.Duration(days) * 24 * time.Hour
}

// DeletionPolicy is Retain or Reset.
// +kubebuilder:validation:Enum=Retain;Reset
type DeletionPolicy string

const (
	DeletionRetain DeletionPolicy = "Retain"
	DeletionReset  DeletionPolicy = "Reset"
)

// WorkerPool is a set of workers chosen by requirement, scaled by replicas.
type WorkerPool struct {
	// Name prefixes the members' node names (`<name>-<n>`).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Replicas is the number of members.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5000
	Replicas int32 `json:"replicas"`

	// HostSelector narrows the BareMetalHosts members may be chosen from (and replaces
	// workerSelector for them).
	// +optional
	HostSelector *metav1.LabelSelector `json:"hostSelector,omitempty"`

	// CPU is the minimum number of CPUs of a member's host.
	// +optional
	// +kubebuilder:validation:Minimum=1
	CPU *int32 `json:"cpu,omitempty"`

	// Memory is the minimum RAM of a member's host.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`

	// SRIOV requires hosts labelled feature.bpa.akraino.org/sriov=true.
	// +optional
	SRIOV bool `json:"sriov,omitempty"`

	// QAT requires hosts labelled feature.bpa.akraino.org/qat=true.
	// +optional
	QAT bool `json:"qat,omitempty"`
}

// NodeRemoval carries kubespray's drain settings (roles/remove-node/pre-remove, with its
// defaults) and whether a dead host may be removed without draining it. The drain settings
// also reach upgrade-cluster.yml, whose roles/upgrade/pre-upgrade reads the same variables
// with the same defaults: kept here rather than in a new spec.drain, so no CR changes
// meaning and nothing needs migrating.
type NodeRemoval struct {
	// DrainGracePeriodSeconds is drain_grace_period: how long each pod gets to stop.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	DrainGracePeriodSeconds *int32 `json:"drainGracePeriodSeconds,omitempty"`

	// DrainTimeoutSeconds is drain_timeout: how long one drain may take.
	// +optional
	// +kubebuilder:default=360
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	DrainTimeoutSeconds *int32 `json:"drainTimeoutSeconds,omitempty"`

	// DrainRetries is drain_retries.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	DrainRetries *int32 `json:"drainRetries,omitempty"`

	// AllowUngraceful lets a host that cannot be reached be removed without draining or
	// resetting it (kubespray's allow_ungraceful_removal=true, reset_nodes=false). Without
	// it, removing such a host stalls with reason NodeUnreachable.
	// +optional
	AllowUngraceful bool `json:"allowUngraceful,omitempty"`
}

// KubernetesConfig chooses the Kubernetes release.
type KubernetesConfig struct {
	// Version of Kubernetes, such as 1.32.5 (a leading v is accepted), within the range of
	// the chosen kubespray release (pkg/kubespray's profiles); BPA writes it as kube_version
	// in that release's format. Empty means kubespray's default.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^v?1\.[0-9]{1,3}\.[0-9]{1,3}$`
	Version string `json:"version,omitempty"`
}

// DebianPackageName follows Debian policy: lower-case alphanumerics and + . -, starting with
// an alphanumeric, so it can never be read as a command-line option, and not ending in '-' or
// '+', which apt-get reads as "remove" or "install" (DebianPackageNamePattern).
// +kubebuilder:validation:MinLength=2
// +kubebuilder:validation:MaxLength=128
// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9+.-]*[a-z0-9.]$`
type DebianPackageName string

// ProvisioningStatus mirrors the provisioning Workflow.
type ProvisioningStatus struct {
	RunStatus `json:",inline"`

	// KubeconfigSecretName names the Secret (key `value`) holding the new cluster's
	// admin kubeconfig, once published.
	// +optional
	KubeconfigSecretName string `json:"kubeconfigSecretName,omitempty"`

	// Applied is what the cluster is known to be: what the operations that succeeded
	// applied. The next change is planned against it. A node is in it only once the
	// operation that added it succeeded, and leaves it once the one that removed it did.
	// +optional
	Applied *AppliedState `json:"applied,omitempty"`

	// Plan is the current run's operations, in order, with their phases.
	// +optional
	// +listType=atomic
	Plan []OperationStatus `json:"plan,omitempty"`

	// LastHandledReplacement is the state of status.applied.replacements (ReplacementRevision)
	// the last run was started for: a new one starts the next run of a replacement.
	// +optional
	LastHandledReplacement string `json:"lastHandledReplacement,omitempty"`

	// ReleasedAfter is the uid of the Workflow after whose success the claims of hosts that
	// left the cluster were released, so that happens once per run.
	// +optional
	ReleasedAfter string `json:"releasedAfter,omitempty"`

	// Operations are the last ten operations that ran, newest last.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Operations []OperationRecord `json:"operations,omitempty"`

	// Backups are the newest verified etcd snapshots, newest last (at most ten; the backup
	// server keeps spec.etcdBackup.keep of them).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Backups []BackupStatus `json:"backups,omitempty"`

	// LastScheduledBackup is the time of spec.etcdBackup.schedule whose backup was last
	// started, so that each time is taken once.
	// +optional
	LastScheduledBackup *metav1.Time `json:"lastScheduledBackup,omitempty"`

	// Restore is the last etcd restore the bpa.akraino.org/restore annotation asked for.
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`

	// CertificateRenewal is the last certificate renewal the
	// bpa.akraino.org/renew-certificates annotation asked for.
	// +optional
	CertificateRenewal *RequestStatus `json:"certificateRenewal,omitempty"`

	// Certificates are the expiry dates of the cluster's certificates as the last
	// successful verify read them over SSH (docs/protecting.md#certificates): one entry per
	// control-plane node and component; for the other nodes, one per component, the
	// earliest of them all, naming the node that has it; and the chain the API server
	// serves. Sorted by notAfter, earliest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=320
	Certificates []CertificateStatus `json:"certificates,omitempty"`

	// CertificatesCheckedAt is when verify read status.certificates.
	// +optional
	CertificatesCheckedAt *metav1.Time `json:"certificatesCheckedAt,omitempty"`

	// CertificatesUnread name the hosts (or the served chain) whose certificates that
	// verify could not read, and why; their certificates are missing from the list.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=21
	CertificatesUnread []string `json:"certificatesUnread,omitempty"`

	// Drift is what the last drift check (spec.driftCheck) found.
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`

	// Remediation is what graded remediation (spec.remediation) did and holds.
	// +optional
	Remediation *RemediationStatus `json:"remediation,omitempty"`
}

// MaxCertificates bounds status.certificates (the CRD's MaxItems spells the same number): at
// most one entry per component for each of the 15 masters, one per component for all the
// workers together, and the served chain.
const MaxCertificates = 320

// CertificateStatus is the earliest-expiring certificate of one component on one node.
type CertificateStatus struct {
	// Node is the inventory name of the node the file is on (for the served chain: the
	// master whose API server was asked).
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// Component names the certificate as kubeadm and kubespray do: ca, apiserver,
	// apiserver-kubelet-client, front-proxy-ca, front-proxy-client, etcd-ca, etcd-member,
	// etcd-admin, etcd-node, admin.conf, kubelet-client, ..., and apiserver-served for the
	// chain the API server presents.
	// +kubebuilder:validation:MaxLength=64
	Component string `json:"component"`
	// NotAfter is when the certificate expires.
	NotAfter metav1.Time `json:"notAfter"`
	// Subject is the certificate's subject common name.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Subject string `json:"subject,omitempty"`
}

// AppliedState is the cluster as the operations that succeeded left it.
type AppliedState struct {
	// Hosts are the cluster's nodes.
	// +optional
	// +listType=atomic
	Hosts []HostStatus `json:"hosts,omitempty"`
	// KubesprayVersion is the kubespray release that last ran.
	// +optional
	KubesprayVersion string `json:"kubesprayVersion,omitempty"`
	// KubernetesVersion is the Kubernetes release the nodes run (1.32.5, no v).
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Settings is a digest of the settings applied to every node (kubespray variables,
	// inventory, subnets, plugins); a change runs cluster.yml on all of them.
	// +optional
	Settings string `json:"settings,omitempty"`
	// Immutable are the values, by kubespray variable, of the settings a live cluster
	// cannot change (pkg/kubespray's ImmutableSettings: pod and service subnets, network
	// plugin, etcd deployment type, DNS domain...), as the cluster was built with them. A
	// change of one is refused with reason ImmutableSetting; one missing here is not compared.
	// +optional
	Immutable map[string]string `json:"immutable,omitempty"`
	// Generation is the generation whose run last changed it.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Replacements are the workers graded remediation's Replace rung is moving to a spare
	// host (docs/remediation.md): a run removes each from its dead host without drain
	// (while Hosts still lists it there), then the next run adds it back under its name on a
	// spare; the entry goes once Hosts lists the node on another host. Only the controller
	// writes it (status), and a worker only.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=300
	Replacements []Replacement `json:"replacements,omitempty"`
}

// Replacement is one worker being moved off a dead host by graded remediation.
type Replacement struct {
	// Node is the worker's name; it keeps it on the spare host.
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node"`
	// BareMetalHost is the dead host. Once the node is removed from it, its claim is
	// released with HostUnhealthyAnnotation, so no cluster takes it again until an admin
	// has looked at it.
	// +kubebuilder:validation:MaxLength=253
	BareMetalHost string `json:"bareMetalHost"`
	// DecidedAt is when the Replace rung was taken; it names the runs of the replacement.
	DecidedAt metav1.Time `json:"decidedAt"`
}

// OperationStatus is one planned operation of the current run: one DAG task.
type OperationStatus struct {
	// Name is the DAG task's name (create-cluster, scale-workers, remove-nodes, ...).
	Name string `json:"name"`
	// Playbooks are the kubespray playbooks it runs, in order.
	// +optional
	Playbooks []string `json:"playbooks,omitempty"`
	// Nodes are the nodes it adds, removes or changes; empty for all.
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// Reason says why it runs.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Phase mirrors the DAG task's phase.
	// +optional
	Phase string `json:"phase,omitempty"`
}

// OperationRecord is one operation that ran.
type OperationRecord struct {
	Generation int64  `json:"generation"`
	Name       string `json:"name"`
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// +optional
	Workflow string `json:"workflow,omitempty"`
	// Result is the task's final phase: Succeeded, Failed or Error.
	// +optional
	Result string `json:"result,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// Provisioning turns a set of bare-metal hosts into a Kubernetes cluster.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name: at most 63 characters, because it labels the Workflows of its runs"
// +kubebuilder:resource:shortName=bpa;prov,categories=bpa
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.cluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Workflow",type=string,JSONPath=`.status.workflow.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Provisioning struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProvisioningSpec   `json:"spec"`
	Status ProvisioningStatus `json:"status,omitempty"`
}

// ProvisioningList is a list of Provisioning.
//
// +kubebuilder:object:root=true
type ProvisioningList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Provisioning `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Provisioning{}, &ProvisioningList{})
}
