package runkubespray

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// fixture lays out what the step pod has: a working directory with cluster.yml, the input
// files, and a fake ansible-playbook that records its arguments and environment.
func fixture(t *testing.T, exitCode string) (kubespray.RunOptions, string) {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	// The container's own /tmp, where the step keeps its private copy of the key.
	t.Setenv("TMPDIR", t.TempDir())
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		return p
	}
	write("cluster.yml", "- hosts: all\n", 0o644)
	record := filepath.Join(dir, "record")
	write("bin/ansible-playbook", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > "+record+
		"\nenv | grep '^ANSIBLE_' | sort >> "+record+"\nexit "+exitCode+"\n", 0o755)
	t.Setenv("PATH", filepath.Join(dir, "bin")+":/usr/bin:/bin")
	o := kubespray.DefaultRunOptions()
	o.Inventory = write("in/hosts.ini", "[all]\nm ansible_host=127.0.1.1\n", 0o644)
	o.ExtraVars = write("in/extra-vars.yaml", `"kube_pods_subnet": !unsafe "10.244.0.0/16"`, 0o644)
	o.SSHKey = write("ssh/ssh-privatekey", "-----BEGIN OPENSSH PRIVATE KEY-----\n", 0o400)
	o.KnownHosts = write("ssh/known_hosts", "127.0.1.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE\n", 0o400)
	return o, record
}

func TestRunExecsWithoutAShell(t *testing.T) {
	o, record := fixture(t, "0")
	require.NoError(t, Run(context.Background(), o))
	got, err := os.ReadFile(record)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	require.Len(t, lines, 15)
	assert.Equal(t, []string{"-i", o.Inventory, "--private-key", kubespray.PrivateKey(os.TempDir()), "-u", "root", "-b", "-e", "@" + o.ExtraVars, "-e"}, lines[:10])
	assert.Contains(t, lines[10], `"ansible_ssh_common_args":"-o StrictHostKeyChecking=yes -o UserKnownHostsFile=`+o.KnownHosts+`"`)
	assert.Equal(t, "cluster.yml", lines[11])
	assert.Equal(t, "ANSIBLE_HOST_KEY_CHECKING=true", lines[12], "the environment carries it too")
	assert.Equal(t, "ANSIBLE_INVENTORY_ENABLED=ini", lines[13])
	assert.True(t, strings.HasPrefix(lines[14], "ANSIBLE_SSH_ARGS=-o ControlMaster=auto"), lines[14])
	assert.True(t, strings.HasSuffix(lines[14], "-o StrictHostKeyChecking=yes -o UserKnownHostsFile="+o.KnownHosts), lines[14])
}

func TestRunFailures(t *testing.T) {
	for name, tc := range map[string]struct {
		exit   string
		mutate func(t *testing.T, o *kubespray.RunOptions)
		want   string
	}{
		"playbook fails": {"2", nil, "ansible-playbook cluster.yml failed (exit status 2)"},
		"no known hosts": {"0", func(t *testing.T, o *kubespray.RunOptions) { require.NoError(t, os.Remove(o.KnownHosts)) },
			"known_hosts: open"},
		"empty known hosts": {"0", func(t *testing.T, o *kubespray.RunOptions) {
			require.NoError(t, os.Chmod(o.KnownHosts, 0o600))
			require.NoError(t, os.WriteFile(o.KnownHosts, []byte("# nothing\n\n"), 0o600))
		}, "holds no host key: add the hosts' public keys to the SSH Secret"},
		"bad extra vars": {"0", func(t *testing.T, o *kubespray.RunOptions) {
			require.NoError(t, os.WriteFile(o.ExtraVars, []byte(`"ansible_ssh_common_args": !unsafe "-o StrictHostKeyChecking=no"`), 0o644))
		}, "ansible_ssh_common_args: Forbidden: BPA sets Ansible's connection variables itself"},
		// The vars file crossed an Argo parameter: a string Ansible would template is refused.
		"untagged extra vars": {"0", func(t *testing.T, o *kubespray.RunOptions) {
			require.NoError(t, os.WriteFile(o.ExtraVars, []byte(`{"kube_version": "{{ lookup('pipe', 'id') }}"}`), 0o644))
		}, "extra-vars.yaml: extra vars: line 1: a value without an explicit tag (strings must be tagged !unsafe)"},
		"empty inventory": {"0", func(t *testing.T, o *kubespray.RunOptions) { require.NoError(t, os.WriteFile(o.Inventory, nil, 0o644)) }, "not a non-empty file"},
		"hostile inventory": {"0", func(t *testing.T, o *kubespray.RunOptions) {
			require.NoError(t, os.WriteFile(o.Inventory, []byte("[all]\nm ansible_host=127.0.1.1 ansible_connection=local\n"), 0o644))
		}, "/in/hosts.ini: line 2: host m: only the variables ansible_host, ip, access_ip and etcd_member_name may be set"},
		"no playbook": {"0", func(t *testing.T, o *kubespray.RunOptions) { o.Playbook = "scale.yml" }, "playbook: stat scale.yml"},
		"no program":  {"0", func(t *testing.T, o *kubespray.RunOptions) { o.AnsiblePlaybook = "ansible-playbook-missing" }, "--ansible-playbook: exec"},
		"no key":      {"0", func(t *testing.T, o *kubespray.RunOptions) { o.SSHKey = "/nonexistent/key" }, "SSH private key: stat /nonexistent/key"},
	} {
		t.Run(name, func(t *testing.T) {
			o, _ := fixture(t, tc.exit)
			if tc.mutate != nil {
				tc.mutate(t, &o)
			}
			err := Run(context.Background(), o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	// Without host-key checking, known_hosts is not needed.
	o, _ := fixture(t, "0")
	require.NoError(t, os.Remove(o.KnownHosts))
	o.InsecureIgnoreHostKey = true
	assert.NoError(t, Run(context.Background(), o))
}

func TestCommandFlagsMatchTheWorkflowTemplate(t *testing.T) {
	cmd := Command()
	// The arguments bpa-provision's run-kubespray template passes.
	require.NoError(t, cmd.ParseFlags([]string{"--inventory=/bpa/in/hosts.ini", "--extra-vars=/bpa/in/extra-vars.yaml",
		"--ssh-key=/etc/bpa/ssh/ssh-privatekey", "--known-hosts=/etc/bpa/ssh/known_hosts", "--ssh-user=root", "--ssh-port=22",
		"--insecure-ignore-host-key=false", "--operations=/bpa/in/operations.json", "--allow-ungraceful=true"}))
	assert.Equal(t, "ansible-playbook", cmd.Flag("ansible-playbook").Value.String())
	assert.Equal(t, "true", cmd.Flag("allow-ungraceful").Value.String())
}
