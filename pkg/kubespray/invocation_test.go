package kubespray

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// The release's profile builds the command line: the playbook must be one of its own, and
// each gets the -e variables it needs and no others.
func TestBuildOperation(t *testing.T) {
	o := DefaultRunOptions()
	o.KubesprayImage, o.Playbook, o.PlaybookVars = "registry.local:5000/kubespray/kubespray:v2.27.1@sha256:abc", "remove-node.yml", `{"node":"w1,w2","skip_confirmation":true}`
	inv, err := Build(o, "/usr/bin/ansible-playbook", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"-e", "@/bpa/in/extra-vars.yaml", "-e", `{"node":"w1,w2","skip_confirmation":true}`}, inv.Args[8:12])
	assert.Equal(t, "remove-node.yml", inv.Args[len(inv.Args)-1])

	o = DefaultRunOptions()
	o.Playbook, o.Limit = "scale.yml", "w3,w4"
	inv, err = Build(o, "/usr/bin/ansible-playbook", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"--limit", "w3,w4"}, inv.Args[8:10])

	for name, tc := range map[string]struct {
		mutate func(*RunOptions)
		want   string
	}{
		"unknown release":      {func(o *RunOptions) { o.KubesprayImage = "quay.io/kubespray/kubespray:v2.26.0" }, `--kubespray-image "quay.io/kubespray/kubespray:v2.26.0": kubespray "v2.26.0" is not supported`},
		"not a playbook of it": {func(o *RunOptions) { o.Playbook = "contrib/os-services/os-services.yml" }, "not one of kubespray v2.28's playbooks"},
		"remove without node":  {func(o *RunOptions) { o.Playbook = "remove-node.yml" }, "-e node is required"},
		"reset unconfirmed":    {func(o *RunOptions) { o.Playbook = "reset.yml" }, "-e reset_confirmation is required"},
		"vars not an object":   {func(o *RunOptions) { o.PlaybookVars = `["x"]` }, "--playbook-vars: want a JSON object"},
		"vars of the file":     {func(o *RunOptions) { o.PlaybookVars = `{"ansible_ssh_common_args":"-o ProxyCommand=x"}` }, "not a variable of this playbook"},
		"limit pattern":        {func(o *RunOptions) { o.Playbook, o.Limit = "scale.yml", "all:!m1" }, `limit "all:!m1"`},
	} {
		t.Run(name, func(t *testing.T) {
			o := DefaultRunOptions()
			tc.mutate(&o)
			_, err := Build(o, "/usr/bin/ansible-playbook", nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBuildChecksHostKeys(t *testing.T) {
	inv, err := Build(DefaultRunOptions(), "/usr/bin/ansible-playbook", []string{"PATH=/usr/bin", "ANSIBLE_HOST_KEY_CHECKING=False", "ANSIBLE_SSH_ARGS=-o UserKnownHostsFile=/dev/null", "ANSIBLE_INVENTORY_ENABLED=yaml"})
	require.NoError(t, err)
	assert.Equal(t, "/usr/bin/ansible-playbook", inv.Path)
	assert.Equal(t, []string{
		"ansible-playbook",
		"-i", stepio.In(stepio.InventoryFile),
		"--private-key", "/etc/bpa/ssh/ssh-privatekey",
		"-u", "root",
		"-b",
		"-e", "@/bpa/in/extra-vars.yaml",
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
	o := DefaultRunOptions()
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
		mutate func(*RunOptions)
		want   string
	}{
		"relative inventory":   {func(o *RunOptions) { o.Inventory = "hosts.ini" }, `--inventory "hosts.ini": want a clean path`},
		"space in path":        {func(o *RunOptions) { o.ExtraVars = "/tmp/a b.json" }, `--extra-vars "/tmp/a b.json"`},
		"dotdot":               {func(o *RunOptions) { o.SSHKey = "/etc/bpa/../../root/.ssh/id_rsa" }, "--ssh-key"},
		"not clean":            {func(o *RunOptions) { o.KnownHosts = "/etc//known_hosts" }, "--known-hosts"},
		"shell in known_hosts": {func(o *RunOptions) { o.KnownHosts = "/etc/kh;touch${IFS}/x" }, "--known-hosts"},
		"option playbook":      {func(o *RunOptions) { o.Playbook = "--syntax-check.yml" }, "--playbook"},
		"playbook dotdot":      {func(o *RunOptions) { o.Playbook = "../cluster.yml" }, "--playbook"},
		"playbook not yaml":    {func(o *RunOptions) { o.Playbook = "cluster.sh" }, "--playbook"},
		"program with args":    {func(o *RunOptions) { o.AnsiblePlaybook = "ansible-playbook -vvv" }, "--ansible-playbook"},
		"program relative":     {func(o *RunOptions) { o.AnsiblePlaybook = "bin/ansible-playbook" }, "--ansible-playbook"},
		"program option":       {func(o *RunOptions) { o.AnsiblePlaybook = "-c" }, "--ansible-playbook"},
		"user injection":       {func(o *RunOptions) { o.SSHUser = "root -o ProxyCommand=x" }, `--ssh-user "root -o ProxyCommand=x"`},
		"user upper":           {func(o *RunOptions) { o.SSHUser = "Root" }, "--ssh-user"},
		"port zero":            {func(o *RunOptions) { o.SSHPort = 0 }, "--ssh-port 0: want 1 to 65535"},
		"port too big":         {func(o *RunOptions) { o.SSHPort = 65536 }, "--ssh-port"},
	} {
		t.Run(name, func(t *testing.T) {
			o := DefaultRunOptions()
			tc.mutate(&o)
			err := o.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			_, err = Build(o, "/usr/bin/ansible-playbook", nil)
			assert.Error(t, err, "Build validates too")
		})
	}
	o := DefaultRunOptions()
	o.AnsiblePlaybook, o.Playbook = "/opt/venv/bin/ansible-playbook", "/kubespray/scale.yaml"
	assert.NoError(t, o.Validate())
}
