package deploy_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/akraino-edge-stack/bpa/test/framework/node"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// sshLogin runs in the run-kubespray container: real OpenSSH, as Ansible runs it, with the
// mounted key and known_hosts and strict host-key checking, asking the host for `uname -m`
// (which the simulated host answers with what the test set). It exits 0 either way and says
// how it went, stderr included.
const sshLogin = `if out=$(ssh -i /etc/bpa/ssh/ssh-privatekey -o UserKnownHostsFile=/etc/bpa/ssh/known_hosts \
  -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10 root@%s uname -m 2>&1); then
  echo "ssh: ok: $out"
else
  echo "ssh: failed: $out"
fi`

// sshToHost starts a simulated host on the node's bridge, in a network namespace of its
// own, and runs the shipped run-kubespray template's pod (the kubespray image, the key
// mounted 0400) against it: real OpenSSH logs in over the pod network with the cluster's
// key, host key checked. Then once more with a known_hosts that holds another key for the
// host's address, which OpenSSH must refuse: the check can fail.
func (e *env) sshToHost(t *testing.T) {
	ctx := e.ctx(5 * time.Minute)
	addr, err := e.n.HostAddress()
	require.NoError(t, err)
	cluster := simhost.NewCluster(t)
	start := time.Now()
	h := cluster.StartOn("node1", simhost.Network{Bridge: node.Bridge, Address: addr})
	t.Logf("simulated host %s up at %s in %s", h.Name, h.Addr(), time.Since(start).Round(time.Millisecond))
	h.SetMachine("riscv64")
	key, err := os.ReadFile(cluster.ClientKeyPath())
	require.NoError(t, err)
	knownHosts, err := os.ReadFile(cluster.KnownHostsPath())
	require.NoError(t, err)
	e.secret(t, "host-ssh", key, knownHosts)
	e.secret(t, "host-ssh-other-key", key, []byte(otherHostKey(t, h)+"\n"))

	tmpl := e.shippedTemplate(t, ctx, "bpa-provision", "run-kubespray")
	start = time.Now()
	logs := e.runToEnd(t, ctx, e.podOf(t, tmpl, "ssh-to-host", "host-ssh", fmt.Sprintf(sshLogin, h.IP)))
	t.Logf("pod ssh-to-host ran in %s", time.Since(start).Round(100*time.Millisecond))
	assert.Equal(t, "ssh: ok: riscv64\n", logs, "the pod logged in to the simulated host over the pod network")

	logs = e.runToEnd(t, ctx, e.podOf(t, tmpl, "ssh-other-host-key", "host-ssh-other-key", fmt.Sprintf(sshLogin, h.IP)))
	assert.Contains(t, logs, "ssh: failed: ")
	assert.Contains(t, logs, "Host key verification failed.")
}

// secret creates an SSH Secret as a Provisioning's spec.ssh names it.
func (e *env) secret(t *testing.T, name string, key, knownHosts []byte) {
	_, err := e.c.CoreV1().Secrets(ns).Create(e.ctx(time.Minute), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: key, "known_hosts": knownHosts},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// otherHostKey is a known_hosts line for h's address with a key that is not h's.
func otherHostKey(t *testing.T, h *simhost.Host) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	k, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	return knownhosts.Line([]string{knownhosts.Normalize(h.Addr())}, k)
}
