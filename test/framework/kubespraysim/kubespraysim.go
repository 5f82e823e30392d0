// Package kubespraysim is the SIMULATED kubespray of the test rig and `make demo`: a tree of
// real Ansible playbooks in kubespray's layout (kubespray/, whose README says what is
// simulated and why), run by Debian's real ansible-playbook over real OpenSSH to the
// simulated hosts (test/framework/simhost), with exactly the argv run-kubespray builds. Only what
// kubespray's roles do to a machine is simulated: the checks are Ansible asserts that
// re-express kubespray's tasks, and the effects on the application cluster are done by
// tasks that run a small agent (agent/) on the first control-plane host.
//
// This package holds what the rig and the tests need around that tree: where it is, the
// agent's build, the environment the step container gets, and readers of what the plays
// leave on a host (HostLog, ReadProxy).
package kubespraysim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/simcerts"
)

// Environment the rig gives the step container that runs the stand-in kubespray.
const (
	// EnvAppKubeconfig is the admin kubeconfig of the application apiserver; cluster.yml
	// copies it to /etc/kubernetes/admin.conf on the first control-plane host.
	EnvAppKubeconfig = "BPA_SIM_APP_KUBECONFIG"
	// EnvAppEtcdDir is a folder holding the application etcd's CA (ca.pem) and an admin
	// client certificate and key (admin.pem, admin-key.pem); cluster.yml and
	// upgrade-cluster.yml copy them to each etcd host as kubespray's etcd role leaves them
	// (AppEtcdFiles).
	EnvAppEtcdDir = "BPA_SIM_APP_ETCD_DIR"
	// EnvKubeDirs is a JSON object mapping host IP to the directory that host sees as
	// /etc/kubernetes, where the controller-side log of each run is written (HostLog).
	EnvKubeDirs = "BPA_SIM_KUBE_DIRS"
	// EnvFailFile makes runs fail while the named file exists (failure injection): when it
	// is empty, every playbook but facts.yml; when it lists playbooks (whitespace-separated,
	// by path as run, e.g. scale.yml, or by name, e.g. scale), only those; a name@release
	// (upgrade-cluster@v2.28.0) only when the run acts as that release.
	EnvFailFile = "BPA_SIM_FAIL_FILE"
	// EnvUnmatchedFile, while the named file exists, makes remove-node.yml act on a node
	// name no inventory host has: as real kubespray, it runs those plays on no host and
	// exits 0, removing nothing (for proving that BPA's verify, not kubespray, catches it).
	EnvUnmatchedFile = "BPA_SIM_UNMATCHED_FILE"
	// EnvImage is the kubespray image the container runs: its tag is the release the
	// playbooks act as.
	EnvImage = "BPA_SIM_KUBESPRAY_IMAGE"
	// EnvRecordDir, when set, receives each run as NN-<operation>/ with the argv.json,
	// hosts.ini and vars.yaml it was given (the shape `bpa plan --output-dir` writes), and each run's
	// duration in ns appended to EnvRecordDir+".ns".
	EnvRecordDir = "BPA_SIM_RECORD_DIR"
	// EnvAgent is the agent binary the tasks run on the first control-plane host.
	EnvAgent = "BPA_SIM_AGENT"
	// EnvCheckOnly stops every playbook after its checks, with facts set from the
	// inventory instead of gathered: for checking `bpa plan`'s output without hosts.
	EnvCheckOnly = "BPA_SIM_CHECK_ONLY"
	// EnvCertValidity (simcerts.EnvValidity) is how long the leaf certificates the
	// simulated kubeadm writes last, a Go duration; empty means a year. A site sets it
	// through its kubespray containers' environment (sim.Site.SetKubesprayEnv).
	EnvCertValidity = simcerts.EnvValidity
)

// Container is what one run-kubespray container of the rig is given.
type Container struct {
	// Image is the kubespray image (its tag picks the release).
	Image string
	// AppKubeconfig, AppEtcdDir, KubeDirs, FailFile, UnmatchedFile, RecordDir: see the Env
	// constants.
	AppKubeconfig string
	AppEtcdDir    string
	KubeDirs      map[string]string
	FailFile      string
	UnmatchedFile string
	RecordDir     string
	// Agent is the built agent (BuildAgent).
	Agent string
	// Tmp is the container's own /tmp ($TMPDIR): kubespray's facts cache and Ansible's
	// home, gone with the container.
	Tmp string
	// ControlDir, when set, holds Ansible's ssh control sockets (ControlPersist). A real
	// container's are under /root/.ansible/cp; a test's $TMPDIR is too long a path for a
	// unix socket (108 bytes), so the rig gives each container a short one (NewControlDir).
	ControlDir string
}

// NewControlDir makes a short directory for a container's ssh control sockets; remove it
// with StopSSHMasters.
func NewControlDir() (string, error) { return os.MkdirTemp("/tmp", "bpa-cp-") }

// SimEnv is what the stand-in's playbooks read of c (the Env constants), as the rig gives
// it to a run-kubespray container on the node.
func (c Container) SimEnv() ([]string, error) {
	dirs, err := json.Marshal(c.KubeDirs)
	if err != nil {
		return nil, err
	}
	env := []string{
		EnvAppKubeconfig + "=" + c.AppKubeconfig,
		EnvAppEtcdDir + "=" + c.AppEtcdDir,
		EnvKubeDirs + "=" + string(dirs),
		EnvFailFile + "=" + c.FailFile,
		EnvUnmatchedFile + "=" + c.UnmatchedFile,
		EnvImage + "=" + c.Image,
		EnvRecordDir + "=" + c.RecordDir,
	}
	if c.Agent != "" {
		env = append(env, EnvAgent+"="+c.Agent)
	}
	return env, nil
}

// Env is SimEnv plus what a container would give ansible-playbook run as a process of the
// machine's (the tests that run the stand-in without a node): its own /tmp, HOME and ssh
// control directory.
func (c Container) Env() ([]string, error) {
	env, err := c.SimEnv()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(c.Tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	return append(env,
		// kubespray's ansible.cfg caches facts under /tmp; here /tmp is the machine's, so
		// the container's own stands for it.
		"ANSIBLE_CACHE_PLUGIN_CONNECTION="+c.Tmp,
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(c.Tmp, "ansible-local"),
		"HOME="+home,
		"ANSIBLE_SSH_CONTROL_PATH_DIR="+cmp.Or(c.ControlDir, filepath.Join(home, ".ansible", "cp")),
		// The tree is shared by every container: keep Python from writing into it.
		"PYTHONDONTWRITEBYTECODE=1",
	), nil
}

// Tree is the stand-in kubespray checkout: the working directory of run-kubespray in the rig.
func Tree() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "test", "framework", "kubespraysim", "kubespray"), nil
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// BuildAgent builds agent/ once per process into the repository's bin/ (named for the
// checkout, written then renamed, as test binaries of two packages may build it at once).
func BuildAgent() (string, error) {
	agentOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			agentErr = err
			return
		}
		agentPath, agentErr = framework.Build(root, "./test/framework/kubespraysim/agent", "kubespray-sim-agent")
	})
	return agentPath, agentErr
}

// repoRoot is the closest parent of the working directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// HostLogFile is the file, in the directory a simulated host sees as /etc/kubernetes, where
// the stand-in kubespray logs what each run did to that host (see HostLog).
const HostLogFile = "kubespray.log"

// Entry is one run's line in a host's log.
type Entry struct {
	// Playbook is the playbook as run: cluster.yml, scale.yml, remove-node.yml, ...
	Playbook string `json:"playbook"`
	// Limit is the run's --limit, empty for none.
	Limit []string `json:"limit,omitempty"`
	// Did says what the run did to the host, one of (versions as the Node reports them):
	//   - cluster.yml, scale.yml: "joined, kubelet v1.32.5", or "reconfigured, kubelet
	//     v1.32.5" for a host already registered; on the first control-plane host cluster.yml
	//     prefixes "kubeadm init (admin.conf written), ";
	//   - upgrade-cluster.yml: "upgraded, kubelet v1.32.5 -> v1.32.8, drained (grace period
	//     300, timeout 360s, retries 3)";
	//   - remove-node.yml: "cordoned, drained 2 pods (grace period 300, timeout 360s,
	//     retries 3), Node deleted, reset" (", not reset" with reset_nodes=false); with
	//     reset_nodes=false and allow_ungraceful_removal=true (a dead host, never logged in
	//     to) "removed ungracefully, not drained, Node deleted, not reset"; a node no longer
	//     registered (a retried removal) "not registered: nothing to drain or delete, reset";
	//   - reset.yml: "reset, Node deleted", plus ", admin.conf removed" on the first
	//     control-plane host.
	Did string `json:"did"`
}

// HostLog reads the log of the simulated host whose /etc/kubernetes is dir: a line per run
// that changed the host, oldest first. The plays write it from the controller, outside the
// host, so a dead host's log records its removal too. playbooks/facts.yml only reads, so it
// logs nothing; a run that failed logs nothing for the hosts it had not changed yet, and an
// injected failure comes before any change. No log yet is an empty one.
func HostLog(dir string) ([]Entry, error) {
	data, err := os.ReadFile(filepath.Join(dir, HostLogFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, HostLogFile), err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ProxyFile is the file, in the directory a simulated host sees as /etc/kubernetes, that
// stands for the apiserver proxy kubespray runs on a node outside the control plane
// (roles/sim/tasks/proxy.yml of the tree).
const ProxyFile = "manifests/apiserver-proxy.json"

// Proxy is a host's apiserver proxy: its kind (nginx or haproxy) and upstreams, each
// "<host> <address>:6443".
type Proxy struct {
	Type      string   `json:"type"`
	Upstreams []string `json:"upstreams"`
}

// ReadProxy reads the proxy of the simulated host whose /etc/kubernetes is dir; none yet is
// the zero Proxy.
func ReadProxy(dir string) (Proxy, error) {
	var p Proxy
	data, err := os.ReadFile(filepath.Join(dir, ProxyFile))
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &p)
	}
	return p, err
}

// EtcdCertDir is where kubespray keeps etcd's certificates on an etcd host (etcd_cert_dir).
const EtcdCertDir = "/etc/ssl/etcd/ssl"

// EtcdFiles are the files of an etcd host's EtcdCertDir, as kubespray names them, that an
// etcd client of host's (its inventory_hostname) needs: the CA, the admin client
// certificate, its key (roles/etcdctl_etcdutl/templates/etcdctl.sh.j2).
func EtcdFiles(host string) (ca, cert, key string) {
	return EtcdCertDir + "/ca.pem", EtcdCertDir + "/admin-" + host + ".pem", EtcdCertDir + "/admin-" + host + "-key.pem"
}

// AppEtcdFiles are the names, in EnvAppEtcdDir, of the files the etcd role reads: the
// certificates it copies, the member it writes into EtcdEnvFile (AppEtcdMember, JSON), and
// the etcdctl and etcdutl it installs in EtcdBinDir.
var AppEtcdFiles = struct{ CA, Cert, Key, Member, Etcdctl, Etcdutl string }{
	"ca.pem", "admin.pem", "admin-key.pem", "member.json", "etcdctl", "etcdutl"}

// AppEtcdMember is the member the application etcd runs as, which the etcd role writes into
// each etcd host's EtcdEnvFile: one etcd stands for every etcd host of a site, so a restore
// made with these (etcdutl snapshot restore --name, --initial-advertise-peer-urls,
// --initial-cluster-token) makes a data dir it can run.
type AppEtcdMember struct {
	Name         string `json:"name"`
	PeerURL      string `json:"peer_url"`
	ClusterToken string `json:"cluster_token"`
}

// Where kubespray's etcd role puts etcd's environment file (roles/etcd/tasks/refresh_config.yml),
// its data (etcd_data_dir) and etcdctl and etcdutl (bin_dir, roles/etcdctl_etcdutl) on an etcd
// host.
const (
	EtcdEnvFile = "/etc/etcd.env"
	EtcdDataDir = "/var/lib/etcd"
	EtcdBinDir  = "/usr/local/bin"
)

// CheckOnlyPassed is what a check-only run prints when every check passed (EnvCheckOnly).
const CheckOnlyPassed = "SIMULATED check-only: every check passed"

// Check runs ansible-playbook with args (argv without the program) on the tree in
// check-only mode, as release image's kubespray, with tmp as the container's /tmp (its facts
// cache: the operations of one step share it). It returns nil when every check passed, else
// an error holding the run's output.
func Check(args []string, image, tmp string) error {
	tree, err := Tree()
	if err != nil {
		return err
	}
	env, err := Container{Image: image, Tmp: tmp}.Env()
	if err != nil {
		return err
	}
	cmd := exec.Command("ansible-playbook", args...)
	cmd.Dir = tree
	cmd.Env = append(append(os.Environ(), env...), EnvCheckOnly+"=true", "ANSIBLE_NOCOLOR=1")
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), CheckOnlyPassed) {
		return nil
	}
	// playbooks/facts.yml checks nothing and changes nothing: it has no check-only end (the
	// playbooks that import it must go on to theirs), so running to the end is passing.
	if err == nil && len(args) > 0 && args[len(args)-1] == "playbooks/facts.yml" {
		return nil
	}
	if err == nil {
		err = errors.New("ended without reaching the end of the checks")
	}
	return fmt.Errorf("ansible-playbook %s: %w\n%s", strings.Join(args, " "), err, out)
}

// StopSSHMasters ends the ssh control masters (ControlPersist=30m) that a container's runs
// left in dir, its ControlDir, and removes dir. A container's processes end with it, but the
// masters left their session, so the end of its process group does not reach them.
func StopSSHMasters(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	marker := []byte(dir + "/")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(cmdline, marker) || !bytes.HasPrefix(cmdline, []byte("ssh")) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	_ = os.RemoveAll(dir)
}
