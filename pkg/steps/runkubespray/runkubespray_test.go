package runkubespray

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func defaults() Options { return DefaultOptions() }

// The release's profile builds the command line: the playbook must be one of its own, and
// each gets the -e variables it needs and no others.
func TestBuildOperation(t *testing.T) {
	o := defaults()
	o.KubesprayImage, o.Playbook, o.PlaybookVars = "registry.local:5000/kubespray/kubespray:v2.27.1@sha256:abc", "remove-node.yml", `{"node":"w1,w2","skip_confirmation":true}`
	inv, err := Build(o, "/usr/bin/ansible-playbook", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"-e", "@/tmp/bpa/in/extra-vars.yaml", "-e", `{"node":"w1,w2","skip_confirmation":true}`}, inv.Args[8:12])
	assert.Equal(t, "remove-node.yml", inv.Args[len(inv.Args)-1])

	o = defaults()
	o.Playbook, o.Limit = "scale.yml", "w3,w4"
	inv, err = Build(o, "/usr/bin/ansible-playbook", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"--limit", "w3,w4"}, inv.Args[8:10])

	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"unknown release":      {func(o *Options) { o.KubesprayImage = "quay.io/kubespray/kubespray:v2.26.0" }, `--kubespray-image "quay.io/kubespray/kubespray:v2.26.0": kubespray "v2.26.0" is not supported`},
		"not a playbook of it": {func(o *Options) { o.Playbook = "contrib/os-services/os-services.yml" }, "not one of kubespray v2.28's playbooks"},
		"remove without node":  {func(o *Options) { o.Playbook = "remove-node.yml" }, "-e node is required"},
		"reset unconfirmed":    {func(o *Options) { o.Playbook = "reset.yml" }, "-e reset_confirmation is required"},
		"vars not an object":   {func(o *Options) { o.PlaybookVars = `["x"]` }, "--playbook-vars: want a JSON object"},
		"vars of the file":     {func(o *Options) { o.PlaybookVars = `{"ansible_ssh_common_args":"-o ProxyCommand=x"}` }, "not a variable of this playbook"},
		"limit pattern":        {func(o *Options) { o.Playbook, o.Limit = "scale.yml", "all:!m1" }, `limit "all:!m1"`},
	} {
		t.Run(name, func(t *testing.T) {
			o := defaults()
			tc.mutate(&o)
			_, err := Build(o, "/usr/bin/ansible-playbook", nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBuildChecksHostKeys(t *testing.T) {
	inv, err := Build(defaults(), "/usr/bin/ansible-playbook", []string{"PATH=/usr/bin", "ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_SSH_ARGS=-o UserKnownHostsFile=/dev/null", "ANSIBLE_INVENTORY_ENABLED=yaml"})
	require.NoError(t, err)
	assert.Equal(t, "/usr/bin/ansible-playbook", inv.Path)
	assert.Equal(t, []string{
		"ansible-playbook",
		"-i", "/tmp/bpa/in/hosts.ini",
		"--private-key", "/etc/bpa/ssh/ssh-privatekey",
		"-u", "root",
		"-b",
		"-e", "@/tmp/bpa/in/extra-vars.yaml",
		"-e", `{"ansible_host_key_checking":true,"ansible_port":22,` +
			`"ansible_ssh_args":"-o ControlMaster=auto -o ControlPersist=30m -o ConnectionAttempts=100 -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/etc/bpa/ssh/known_hosts",` +
			`"ansible_ssh_common_args":"-o StrictHostKeyChecking=yes -o UserKnownHostsFile=/etc/bpa/ssh/known_hosts",` +
			`"ansible_ssh_host_key_checking":true}`,
		"cluster.yml",
	}, inv.Args)
	assert.Equal(t, []string{
		"PATH=/usr/bin",
		"ANSIBLE_HOST_KEY_CHECKING=true",
		"ANSIBLE_SSH_ARGS=-o ControlMaster=auto -o ControlPersist=30m -o ConnectionAttempts=100 -o StrictHostKeyChecking=yes -o UserKnownHostsFile=/etc/bpa/ssh/known_hosts",
		"ANSIBLE_INVENTORY_ENABLED=ini",
	}, inv.Env, "the inherited settings are replaced, not duplicated")
}

func TestBuildInsecure(t *testing.T) {
	o := defaults()
	o.InsecureIgnoreHostKey, o.SSHUser, o.SSHPort = true, "ubuntu", 2222
	inv, err := Build(o, "/usr/local/bin/ansible-playbook", nil)
	require.NoError(t, err)
	var vars map[string]any
	require.NoError(t, json.Unmarshal([]byte(inv.Args[11]), &vars))
	assert.Equal(t, map[string]any{
		"ansible_port":                  2222.0,
		"ansible_ssh_args":              "-o ControlMaster=auto -o ControlPersist=30m -o ConnectionAttempts=100 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
		"ansible_ssh_common_args":       "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
		"ansible_host_key_checking":     false,
		"ansible_ssh_host_key_checking": false,
	}, vars)
	assert.Equal(t, []string{"-u", "ubuntu"}, inv.Args[5:7])
	assert.Contains(t, inv.Env, "ANSIBLE_HOST_KEY_CHECKING=false")
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Options)
		want   string
	}{
		"relative inventory":   {func(o *Options) { o.Inventory = "hosts.ini" }, `--inventory "hosts.ini": want a clean path`},
		"space in path":        {func(o *Options) { o.ExtraVars = "/tmp/a b.json" }, `--extra-vars "/tmp/a b.json"`},
		"dotdot":               {func(o *Options) { o.SSHKey = "/etc/bpa/../../root/.ssh/id_rsa" }, "--ssh-key"},
		"not clean":            {func(o *Options) { o.KnownHosts = "/etc//known_hosts" }, "--known-hosts"},
		"shell in known_hosts": {func(o *Options) { o.KnownHosts = "/etc/kh;touch${IFS}/x" }, "--known-hosts"},
		"option playbook":      {func(o *Options) { o.Playbook = "--syntax-check.yml" }, "--playbook"},
		"playbook dotdot":      {func(o *Options) { o.Playbook = "../cluster.yml" }, "--playbook"},
		"playbook not yaml":    {func(o *Options) { o.Playbook = "cluster.sh" }, "--playbook"},
		"program with args":    {func(o *Options) { o.AnsiblePlaybook = "ansible-playbook -vvv" }, "--ansible-playbook"},
		"program relative":     {func(o *Options) { o.AnsiblePlaybook = "bin/ansible-playbook" }, "--ansible-playbook"},
		"program option":       {func(o *Options) { o.AnsiblePlaybook = "-c" }, "--ansible-playbook"},
		"user injection":       {func(o *Options) { o.SSHUser = "root -o ProxyCommand=x" }, `--ssh-user "root -o ProxyCommand=x"`},
		"user upper":           {func(o *Options) { o.SSHUser = "Root" }, "--ssh-user"},
		"port zero":            {func(o *Options) { o.SSHPort = 0 }, "--ssh-port 0: want 1 to 65535"},
		"port too big":         {func(o *Options) { o.SSHPort = 65536 }, "--ssh-port"},
	} {
		t.Run(name, func(t *testing.T) {
			o := defaults()
			tc.mutate(&o)
			err := o.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = Build(o, "/usr/bin/ansible-playbook", nil)
			assert.Error(t, err, "Build validates too")
		})
	}
	o := defaults()
	o.AnsiblePlaybook, o.Playbook = "/opt/venv/bin/ansible-playbook", "/kubespray/scale.yaml"
	assert.NoError(t, o.Validate())
}

// fixture lays out what the step pod has: a working directory with cluster.yml, the input
// files, and a fake ansible-playbook that records its arguments and environment.
func fixture(t *testing.T, exitCode string) (Options, string) {
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
	o := defaults()
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
	assert.Equal(t, []string{"-i", o.Inventory, "--private-key", PrivateKey(os.TempDir()), "-u", "root", "-b", "-e", "@" + o.ExtraVars, "-e"}, lines[:10])
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
		mutate func(t *testing.T, o *Options)
		want   string
	}{
		"playbook fails": {"2", nil, "ansible-playbook cluster.yml failed (exit status 2)"},
		"no known hosts": {"0", func(t *testing.T, o *Options) { require.NoError(t, os.Remove(o.KnownHosts)) },
			"known_hosts: open"},
		"empty known hosts": {"0", func(t *testing.T, o *Options) {
			require.NoError(t, os.Chmod(o.KnownHosts, 0o600))
			require.NoError(t, os.WriteFile(o.KnownHosts, []byte("# nothing\n\n"), 0o600))
		}, "holds no host key: add the hosts' public keys to the SSH Secret"},
		"bad extra vars": {"0", func(t *testing.T, o *Options) {
			require.NoError(t, os.WriteFile(o.ExtraVars, []byte(`"ansible_ssh_common_args": !unsafe "-o StrictHostKeyChecking=no"`), 0o644))
		}, "ansible_ssh_common_args: Forbidden: BPA sets Ansible's connection variables itself"},
		// The vars file crossed an Argo parameter: a string Ansible would template is refused.
		"untagged extra vars": {"0", func(t *testing.T, o *Options) {
			require.NoError(t, os.WriteFile(o.ExtraVars, []byte(`{"kube_version": "{{ lookup('pipe', 'id') }}"}`), 0o644))
		}, "extra-vars.yaml: extra vars: line 1: a value without an explicit tag (strings must be tagged !unsafe)"},
		"empty inventory": {"0", func(t *testing.T, o *Options) { require.NoError(t, os.WriteFile(o.Inventory, nil, 0o644)) }, "not a non-empty file"},
		"hostile inventory": {"0", func(t *testing.T, o *Options) {
			require.NoError(t, os.WriteFile(o.Inventory, []byte("[all]\nm ansible_host=127.0.1.1 ansible_connection=local\n"), 0o644))
		}, "/in/hosts.ini: line 2: host m: only the variables ansible_host, ip, access_ip and etcd_member_name may be set"},
		"no playbook": {"0", func(t *testing.T, o *Options) { o.Playbook = "scale.yml" }, "playbook: stat scale.yml"},
		"no program":  {"0", func(t *testing.T, o *Options) { o.AnsiblePlaybook = "ansible-playbook-missing" }, "--ansible-playbook: exec"},
		"no key":      {"0", func(t *testing.T, o *Options) { o.SSHKey = "/nonexistent/key" }, "SSH private key: stat /nonexistent/key"},
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
	require.NoError(t, cmd.ParseFlags([]string{"--inventory=/tmp/bpa/in/hosts.ini", "--extra-vars=/tmp/bpa/in/extra-vars.yaml",
		"--ssh-key=/etc/bpa/ssh/ssh-privatekey", "--known-hosts=/etc/bpa/ssh/known_hosts", "--ssh-user=root", "--ssh-port=22",
		"--insecure-ignore-host-key=false", "--operations=/tmp/bpa/in/operations.json", "--allow-ungraceful=true"}))
	assert.Equal(t, "ansible-playbook", cmd.Flag("ansible-playbook").Value.String())
	assert.Equal(t, "true", cmd.Flag("allow-ungraceful").Value.String())
}
