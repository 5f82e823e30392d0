// Package scripts tests the shell scripts under hack/ that a fresh machine runs first.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// machine is a fake machine for hack/deps.sh: a PATH holding only the basic tools the
// script uses plus stubs, and an empty sbin. Its apt-get records each call and "installs"
// the programs of the packages it is asked for, as the real packages would.
type machine struct {
	t     *testing.T
	path  string // the only PATH folder
	sbin  string
	calls string // apt-get's record
	log   string
	fs    string // DEPS_FS: the root busybox and seccomp.h are looked for under
	uid   string
	sudo  bool // a sudo that works without a password
}

// nodePackages are what the test node needs (hack/deps.sh installs them after the others).
const nodePackages = "iptables conntrack iproute2 busybox-static mmdebstrap libseccomp-dev pkg-config"

func newMachine(t *testing.T) *machine {
	dir := t.TempDir()
	m := &machine{t: t, path: filepath.Join(dir, "bin"), sbin: filepath.Join(dir, "sbin"),
		calls: filepath.Join(dir, "apt-calls"), log: filepath.Join(dir, "deps.log"), fs: filepath.Join(dir, "fs"), uid: "0"}
	require.NoError(t, os.MkdirAll(m.path, 0o755))
	require.NoError(t, os.MkdirAll(m.sbin, 0o755))
	for _, tool := range []string{"bash", "env", "mkdir", "dirname", "tail", "sed", "cat", "chmod", "sleep"} {
		real, err := exec.LookPath(tool)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(real, filepath.Join(m.path, tool)))
	}
	return m
}

func (m *machine) stub(name, script string) {
	require.NoError(m.t, os.WriteFile(filepath.Join(m.path, name), []byte("#!/usr/bin/env bash\n"+script+"\n"), 0o755))
}

// run runs hack/deps.sh on the machine and returns its output and exit code.
func (m *machine) run(args ...string) (string, int) {
	root, err := rig.RepoRoot()
	require.NoError(m.t, err)
	m.stub("id", `echo `+m.uid)
	if m.sudo {
		m.stub("sudo", `[[ $1 == -n ]] && shift; [[ $1 == true ]] && exit 0; SUDOED=1 exec "$@"`)
	}
	// apt-get install creates what each package provides: sshd, update-ca-certificates,
	// iptables and conntrack in sbin; the ansible programs, curl, ip, pkg-config and chromium
	// on PATH; busybox and seccomp.h under fs. It refuses to run unless root (or sudo) runs it.
	m.stub("apt-get", `[[ $(id -u) == 0 || -n ${SUDOED:-} ]] || { echo "apt-get: not root" >&2; exit 100; }
echo "$*" >>`+m.calls+`
echo "Reading package lists..."
[[ $1 == install ]] || exit 0
for p in "$@"; do case $p in
openssh-server) printf '#!/bin/sh\n' >`+m.sbin+`/sshd; chmod +x `+m.sbin+`/sshd ;;
ca-certificates) printf '#!/bin/sh\n' >`+m.sbin+`/update-ca-certificates; chmod +x `+m.sbin+`/update-ca-certificates ;;
curl) printf '#!/bin/sh\n' >`+m.path+`/curl; chmod +x `+m.path+`/curl ;;
ansible-core) for b in ansible-playbook ansible-inventory; do printf '#!/bin/sh\n' >`+m.path+`/$b; chmod +x `+m.path+`/$b; done ;;
chromium | pkg-config) printf '#!/bin/sh\n' >`+m.path+`/$p; chmod +x `+m.path+`/$p ;;
iproute2) printf '#!/bin/sh\n' >`+m.path+`/ip; chmod +x `+m.path+`/ip ;;
mmdebstrap) printf '#!/bin/sh\n' >`+m.path+`/mmdebstrap; chmod +x `+m.path+`/mmdebstrap ;;
iptables | conntrack) printf '#!/bin/sh\n' >`+m.sbin+`/$p; chmod +x `+m.sbin+`/$p ;;
busybox-static) mkdir -p `+m.fs+`/bin; printf '#!/bin/sh\n' >`+m.fs+`/bin/busybox; chmod +x `+m.fs+`/bin/busybox ;;
libseccomp-dev) mkdir -p `+m.fs+`/usr/include; : >`+m.fs+`/usr/include/seccomp.h ;;
esac; done`)
	cmd := exec.Command(filepath.Join(root, "hack", "deps.sh"), args...)
	cmd.Env = []string{"PATH=" + m.path, "DEPS_SBIN=" + m.sbin, "DEPS_FS=" + m.fs, "DEPS_LOG=" + m.log, "HOME=" + m.t.TempDir()}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(m.t, err)
	}
	return string(out), code
}

func (m *machine) aptCalls() []string {
	data, err := os.ReadFile(m.calls)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(m.t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestDepsInstallsWhatIsMissingAsRoot: on a machine without sshd, ansible, curl or
// update-ca-certificates, root gets them
// from apt-get, with one line of output and apt's chatter in the log; a second run finds
// everything and installs nothing.
func TestDepsInstallsWhatIsMissingAsRoot(t *testing.T) {
	m := newMachine(t)
	out, code := m.run()
	assert.Equal(t, 0, code, out)
	assert.Regexp(t, `^deps: installing openssh-server ansible-core ca-certificates curl `+nodePackages+` with apt-get \(log: `+m.log+`\)\.\.\. done in \d+s\n$`, out)
	assert.Equal(t, []string{"update", "install -y --no-install-recommends openssh-server ansible-core ca-certificates curl " + nodePackages}, m.aptCalls())
	log, err := os.ReadFile(m.log)
	require.NoError(t, err)
	assert.Contains(t, string(log), "Reading package lists...")

	out, code = m.run()
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "deps: openssh-server, ansible-core, ca-certificates, curl, "+strings.ReplaceAll(nodePackages, " ", ", ")+" present\n", out)
	assert.Len(t, m.aptCalls(), 2, "nothing more installed")
}

// TestDepsOnlyWhatIsMissing: with ansible and curl present, only openssh-server,
// ca-certificates and the node's packages are installed.
func TestDepsOnlyWhatIsMissing(t *testing.T) {
	m := newMachine(t)
	m.stub("ansible-playbook", "")
	m.stub("ansible-inventory", "")
	m.stub("curl", "")
	out, code := m.run()
	assert.Equal(t, 0, code, out)
	assert.Equal(t, []string{"update", "install -y --no-install-recommends openssh-server ca-certificates " + nodePackages}, m.aptCalls())
}

// TestDepsUsesSudo: a user with a working sudo installs through it.
func TestDepsUsesSudo(t *testing.T) {
	m := newMachine(t)
	m.uid, m.sudo = "1000", true
	out, code := m.run()
	assert.Equal(t, 0, code, out)
	assert.Equal(t, []string{"update", "install -y --no-install-recommends openssh-server ansible-core ca-certificates curl " + nodePackages}, m.aptCalls())
}

// TestDepsWithoutRootOrSudo: nothing is run; one message gives the exact command.
func TestDepsWithoutRootOrSudo(t *testing.T) {
	m := newMachine(t)
	m.uid = "1000"
	out, code := m.run()
	assert.Equal(t, 1, code)
	assert.Equal(t, "deps: missing Debian packages openssh-server ansible-core ca-certificates curl "+nodePackages+". As root, run:\n"+
		"      apt-get update && apt-get install -y --no-install-recommends openssh-server ansible-core ca-certificates curl "+nodePackages+"\n"+
		"      then run make again.\n", out)
	assert.Empty(t, m.aptCalls())
}

// TestDepsUI: --ui also wants chromium, and a Node.js of at least 20, which it cannot
// install: an old or missing node fails with what to do.
func TestDepsUI(t *testing.T) {
	m := newMachine(t)
	m.stub("node", "echo v18.19.0")
	out, code := m.run("--ui", "--check")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "deps: Node.js 18.19.0 is too old: the Argo UI build needs Node.js >= 20")
	assert.Contains(t, out, "deps: missing openssh-server ansible-core ca-certificates curl "+nodePackages+" chromium (install: apt-get update && apt-get install -y --no-install-recommends openssh-server ansible-core ca-certificates curl "+nodePackages+" chromium)")
	assert.Empty(t, m.aptCalls(), "--check installs nothing")

	require.NoError(t, os.Remove(filepath.Join(m.path, "node")))
	out, code = m.run("--ui")
	assert.Equal(t, 1, code, "no node: still a failure once the packages are in")
	assert.Contains(t, out, "deps: Node.js is not installed: the Argo UI build needs Node.js >= 20")
	assert.Equal(t, []string{"update", "install -y --no-install-recommends openssh-server ansible-core ca-certificates curl " + nodePackages + " chromium"}, m.aptCalls())

	m.stub("node", "echo v20.20.2")
	out, code = m.run("--ui")
	assert.Equal(t, 0, code, out)
	assert.Equal(t, "deps: openssh-server, ansible-core, ca-certificates, curl, "+strings.ReplaceAll(nodePackages, " ", ", ")+", chromium present\n", out)
}

// TestDepsNode: --node checks Node.js alone (what the UI build needs), installing nothing.
func TestDepsNode(t *testing.T) {
	m := newMachine(t)
	m.stub("node", "echo v18.19.0")
	out, code := m.run("--node")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "deps: Node.js 18.19.0 is too old")
	m.stub("node", "echo v22.1.0")
	out, code = m.run("--node")
	assert.Equal(t, 0, code, out)
	assert.Empty(t, out)
	assert.Empty(t, m.aptCalls())
}
