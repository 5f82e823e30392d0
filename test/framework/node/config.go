package node

import (
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// files are the paths of the node's configuration and state, all under its dir.
type files struct {
	Dir, Bin, CNIBin                   string
	Address, Bridge, PodSubnet, Name   string
	PodRangeStart, PodRangeEnd         string
	CgroupRoot, CA, Sock, PauseImage   string
	KubeletCert, KubeletKey            string
	KubeletKubeconfig, ProxyKubeconfig string
}

func (f files) path(name string) string { return filepath.Join(f.Dir, name) }

// containerdConfig: the CRI plugin with overlayfs, runc by its absolute path and cgroupfs,
// hack/images' sandbox image, registry mirrors in certs.d (registry.go), CNI under the
// node's dir, and streams on loopback.
// restrict_oom_score_adj: this machine lacks CAP_SYS_RESOURCE, so runc cannot lower
// oom_score_adj as kubelet asks (-998 for sandboxes) and every pod would fail.
const containerdConfig = `version = 3
root = "{{.Dir}}/containerd"
state = "{{.Dir}}/run/containerd"

[grpc]
  address = "{{.Sock}}"

[ttrpc]
  address = "{{.Sock}}.ttrpc"

[debug]
  address = "{{.Dir}}/run/containerd/debug.sock"

[metrics]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{{.PauseImage}}"
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "{{.Dir}}/certs.d"

[plugins."io.containerd.cri.v1.runtime"]
  enable_selinux = false
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{{.Bin}}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{{.CNIBin}}"]
    conf_dir = "{{.Dir}}/cni"

[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

// cniConfig: pods on the rig's bridge, addresses from the bottom of its subnet (the top is
// the simulated hosts', see HostAddress), the bridge's address as their gateway. No
// masquerade and no ip_forward: pod to node, node to pod, pod to a simulated host and pod
// to a ClusterIP that kube-proxy turns into the node's address are all local or bridged.
// No portmap: no pod here uses a hostPort, and it would leave CNI-HOSTPORT chains behind.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "bpa-node",
  "plugins": [{
    "type": "bridge",
    "bridge": "{{.Bridge}}",
    "isGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "{{.PodSubnet}}", "rangeStart": "{{.PodRangeStart}}", "rangeEnd": "{{.PodRangeEnd}}", "gateway": "{{.Address}}"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "{{.Dir}}/cni-ipam"
    }
  }]
}
`

// kubeletConfig: EventedPLEG (alpha; containerd 2 streams the CRI's container events): the
// kubelet learns that a container started or exited when containerd says so, not at its
// next once-a-second relist, which a step pod (init, then main and wait) paid two or three
// times (with the rig's shorter Argo requeue, an example's run went from 59 s to 44 s).
// cgroupfs under the node's own cgroup root, x509 client certificates from the rig's CA
// (the apiservers'), everything on disk under the node's dir, no iptables chains of its
// own, and eviction thresholds low enough for a shared test machine.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {{.Address}}
port: 10250
readOnlyPort: 0
healthzPort: 0
tlsCertFile: {{.KubeletCert}}
tlsPrivateKeyFile: {{.KubeletKey}}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: {{.CA}}}
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://{{.Sock}}
cgroupDriver: cgroupfs
cgroupRoot: /{{.CgroupRoot}}
failSwapOn: false
failCgroupV1: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
podLogsDir: {{.Dir}}/pod-logs
volumePluginDir: {{.Dir}}/kubelet-plugins
resolvConf: {{.Dir}}/resolv.conf
clusterDomain: cluster.local
serializeImagePulls: false
featureGates: {EventedPLEG: true}
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%
  imagefs.available: 2%
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
`

// kubeProxyConfig: iptables mode, with no conntrack sysctl and no route_localnet to set
// (localhostNodePorts off): it changes no sysctl of the machine.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {{.ProxyKubeconfig}}
hostnameOverride: {{.Name}}
bindAddress: {{.Address}}
mode: iptables
clusterCIDR: {{.PodSubnet}}
detectLocalMode: ClusterCIDR
nodePortAddresses: ["{{.Address}}/32"]
iptables:
  localhostNodePorts: false
  masqueradeAll: false
  syncPeriod: 30s
  minSyncPeriod: 1s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
oomScoreAdj: 0
`

// mountNSScript prepares the node's private mount namespace, then holds it open.
// kubelet (protectKernelDefaults false) sets vm.overcommit_memory=1, kernel.panic=10 and
// kernel.panic_on_oops=1 when they differ, and these are global: in here, files holding
// exactly those values are bound over them, so it reads them and writes nothing.
const mountNSScript = `set -e
echo 1 >{{.Dir}}/sysctl/overcommit_memory
echo 10 >{{.Dir}}/sysctl/panic
echo 1 >{{.Dir}}/sysctl/panic_on_oops
mount --bind {{.Dir}}/sysctl/overcommit_memory /proc/sys/vm/overcommit_memory
mount --bind {{.Dir}}/sysctl/panic /proc/sys/kernel/panic
mount --bind {{.Dir}}/sysctl/panic_on_oops /proc/sys/kernel/panic_on_oops
mount --bind {{.Dir}}/run/containerd-shims /run/containerd
mount --bind {{.Dir}}/cni-cache /var/lib/cni
touch {{.Dir}}/mountns.ready
exec sleep infinity
`

// writeConfigs renders the configuration files into the node's dir.
func (f files) writeConfigs() error {
	for _, d := range []string{"sysctl", "run/containerd", "run/containerd-shims", "cni", "cni-cache", "cni-ipam", "pod-logs", "kubelet", "kubelet-plugins"} {
		if err := os.MkdirAll(f.path(d), 0o755); err != nil {
			return err
		}
	}
	for name, text := range map[string]string{
		"containerd.toml":     containerdConfig,
		"cni/10-bpa.conflist": cniConfig,
		"kubelet.yaml":        kubeletConfig,
		"kube-proxy.yaml":     kubeProxyConfig,
		"mountns.sh":          mountNSScript,
		// Pods get no DNS: every address a step uses is an IP.
		"resolv.conf": "nameserver 127.0.0.1\n",
	} {
		var b strings.Builder
		if err := template.Must(template.New(name).Parse(text)).Execute(&b, f); err != nil {
			return err
		}
		if err := os.WriteFile(f.path(name), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}
