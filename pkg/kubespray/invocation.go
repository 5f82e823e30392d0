package kubespray

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// The invocation of run-kubespray: its options, how they are checked, and the
// ansible-playbook argv and environment they become. The step (pkg/steps/runkubespray) binds
// its flags to RunOptions and executes what Build returns; `bpa plan` builds the same argv
// here (RunOptionsFor), so what it prints is what the step runs. Nothing here reads a file
// or runs a program.

// RunOptions are run-kubespray's flags.
type RunOptions struct {
	Inventory             string
	ExtraVars             string
	SSHKey                string
	KnownHosts            string
	SSHUser               string
	SSHPort               int
	InsecureIgnoreHostKey bool
	Playbook              string
	// KubesprayImage is the kubespray image the step runs in; its tag is the release whose
	// profile builds the command line.
	KubesprayImage string
	// Limit (comma-separated host or group names) and PlaybookVars (a JSON object of the
	// -e variables the playbook needs) complete the operation; Profile.Validate checks them.
	Limit        string
	PlaybookVars string
	// Operations is a JSON file with the kubespray operations to run in order (the planned
	// step's, translator.Step.Operations). When set it replaces Playbook, Limit and
	// PlaybookVars.
	Operations string
	// AllowUngraceful lets a remove-node operation remove a node it cannot reach, without
	// draining or resetting it (spec.nodeRemoval.allowUngraceful).
	AllowUngraceful bool
	// AnsiblePlaybook is the program: a name looked up in PATH, or an absolute path.
	AnsiblePlaybook string
	// ArtifactsCA is a file with the site policy's CA for spec.offline's artifact server
	// (PEM), or empty: installed on the hosts of the playbooks that download, and trusted by
	// the offline pre-flight. "" for no file.
	ArtifactsCA string
}

// DefaultRunOptions are the flags' defaults: the paths the WorkflowTemplate mounts the
// inputs at (pkg/steps/stepio's, the steps' one record of them). `bpa plan` builds its argv from them too.
func DefaultRunOptions() RunOptions {
	return RunOptions{
		Inventory: stepio.In(stepio.InventoryFile), ExtraVars: stepio.In(stepio.ExtraVarsFile),
		SSHKey: "/etc/bpa/ssh/ssh-privatekey", KnownHosts: "/etc/bpa/ssh/known_hosts",
		SSHUser: "root", SSHPort: 22, Playbook: "cluster.yml", AnsiblePlaybook: "ansible-playbook",
		KubesprayImage: "quay.io/kubespray/kubespray:" + DefaultVersion,
	}
}

// Invocation is a fully built command: the program, its arguments (Args[0] is the program
// as named), and its environment.
type Invocation struct {
	Path string
	Args []string
	Env  []string
}

var (
	// Paths of the step's inputs: absolute, clean, and of characters no consumer (not even
	// Ansible's shlex split of ssh arguments) treats specially.
	absPath = regexp.MustCompile(`^(/[A-Za-z0-9._+-]+)+$`)
	// A playbook relative to the kubespray checkout, or absolute; never an option.
	playbookPath = regexp.MustCompile(`^/?[A-Za-z0-9_][A-Za-z0-9._+-]*(/[A-Za-z0-9_][A-Za-z0-9._+-]*)*\.ya?ml$`)
	// A program name to look up in PATH.
	programName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._+-]*$`)
	// The CRD's pattern for spec.ssh.user.
	sshUser = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
)

func checkPath(flag, p string, pattern *regexp.Regexp) error {
	if !pattern.MatchString(p) || filepath.Clean(p) != p {
		return fmt.Errorf("--%s %q: want a clean path of letters, digits and . _ + - only", flag, p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return fmt.Errorf("--%s %q: must not contain . or .. segments", flag, p)
		}
	}
	return nil
}

// Validate checks the syntax of every option. It reads no file.
func (o RunOptions) Validate() error {
	for _, f := range []struct{ flag, value string }{
		{"inventory", o.Inventory}, {"extra-vars", o.ExtraVars}, {"ssh-key", o.SSHKey}, {"known-hosts", o.KnownHosts},
	} {
		if err := checkPath(f.flag, f.value, absPath); err != nil {
			return err
		}
	}
	if err := checkPath("playbook", o.Playbook, playbookPath); err != nil {
		return err
	}
	for _, f := range []struct{ flag, value string }{{"operations", o.Operations}, {"artifacts-ca", o.ArtifactsCA}} {
		if f.value != "" {
			if err := checkPath(f.flag, f.value, absPath); err != nil {
				return err
			}
		}
	}
	if strings.Contains(o.AnsiblePlaybook, "/") {
		if err := checkPath("ansible-playbook", o.AnsiblePlaybook, absPath); err != nil {
			return err
		}
	} else if !programName.MatchString(o.AnsiblePlaybook) {
		return fmt.Errorf("--ansible-playbook %q: want a program name or an absolute path", o.AnsiblePlaybook)
	}
	if !sshUser.MatchString(o.SSHUser) {
		return fmt.Errorf("--ssh-user %q: want a login name ([a-z_][a-z0-9_-]{0,31})", o.SSHUser)
	}
	if o.SSHPort < 1 || o.SSHPort > 65535 {
		return fmt.Errorf("--ssh-port %d: want 1 to 65535", o.SSHPort)
	}
	return nil
}

// sshMultiplexing are kubespray's own ssh_args (its ansible.cfg), kept for speed.
const sshMultiplexing = "-o ControlMaster=auto -o ControlPersist=30m -o ConnectionAttempts=100"

// hostKeyArgs are the ssh options that check (or, when asked, ignore) host keys. They are
// built from fixed strings and the validated known_hosts path only.
func (o RunOptions) hostKeyArgs() string {
	if o.InsecureIgnoreHostKey {
		return "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
	}
	return "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + o.KnownHosts
}

// RunOptionsFor returns the options the WorkflowTemplate gives the step for op, operation i
// (from 0) of its step, from the Workflow's parameters (translator.ProvisioningParameters):
// `bpa plan` builds its argv with them, so what it prints is what the step runs.
func RunOptionsFor(params map[string]string, op Operation, i int) (RunOptions, error) {
	o := DefaultRunOptions()
	o.KubesprayImage, o.SSHUser = params["kubespray-image"], params["ssh-user"]
	if _, err := fmt.Sscan(params["ssh-port"], &o.SSHPort); err != nil {
		return o, fmt.Errorf("ssh-port %q: %w", params["ssh-port"], err)
	}
	o.InsecureIgnoreHostKey = params["insecure-ignore-host-key"] == "true"
	p, err := o.Profile()
	if err != nil {
		return o, err
	}
	return o.ForOperation(p, op, i, "/tmp")
}

// InventoryWithout is where the step writes the inventory of operation i (from 0) of its
// step when the operation leaves hosts out (Operation.Without): under tmp, the container's
// own /tmp, gone with it.
func InventoryWithout(tmp string, i int) string {
	return filepath.Join(tmp, "bpa", "run", fmt.Sprintf("%02d-hosts.ini", i+1))
}

// PrivateKey is where the step keeps the copy of the SSH key it hands ansible-playbook: under
// tmp, the container's own /tmp, in a directory only its user may enter. `bpa plan` prints
// this path in the argv, as the step runs it.
func PrivateKey(tmp string) string { return filepath.Join(tmp, "bpa", "ssh", "ssh-privatekey") }

// ForOperation sets o's playbook, limit and variables to op's (operation i, from 0, of its
// step), its key to the private copy under tmp, and its inventory to the filtered one when
// op leaves hosts out.
func (o RunOptions) ForOperation(p *Profile, op Operation, i int, tmp string) (RunOptions, error) {
	o.Playbook, o.Limit, o.PlaybookVars = p.Playbooks[op.Playbook], strings.Join(op.Limit, ","), ""
	o.SSHKey = PrivateKey(tmp)
	if len(op.Vars) > 0 {
		b, err := json.Marshal(op.Vars)
		if err != nil {
			return o, err
		}
		o.PlaybookVars = string(b)
	}
	if len(op.Without) > 0 {
		o.Inventory = InventoryWithout(tmp, i)
	}
	return o, nil
}

// Profile is the profile of the release o's image is tagged with.
func (o RunOptions) Profile() (*Profile, error) {
	p, _, err := ProfileForImage(o.KubesprayImage)
	if err != nil {
		return nil, fmt.Errorf("--kubespray-image %q: %w", o.KubesprayImage, err)
	}
	return p, nil
}

// maxOperations bounds --operations: a planned step runs at most a few.
const maxOperations = 16

// DecodeOperations reads the --operations file's content (file names it in errors) and
// checks each operation against p. The file crossed an Argo parameter: it may hold nothing
// but the fields of an operation.
func DecodeOperations(p *Profile, file string, data []byte) ([]Operation, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ops []Operation
	if err := dec.Decode(&ops); err != nil {
		return nil, fmt.Errorf("--operations %s: want a JSON list of kubespray operations: %w", file, err)
	}
	if len(ops) == 0 || len(ops) > maxOperations {
		return nil, fmt.Errorf("--operations %s: want 1 to %d operations, got %d", file, maxOperations, len(ops))
	}
	for i, op := range ops {
		if err := p.Validate(op); err != nil {
			return nil, fmt.Errorf("--operations %s: operation %d: %w", file, i+1, err)
		}
	}
	return ops, nil
}

// Operation returns the kubespray release's profile and the operation o's --playbook,
// --limit and --playbook-vars ask for.
func (o RunOptions) Operation() (*Profile, Operation, error) {
	p, err := o.Profile()
	if err != nil {
		return nil, Operation{}, err
	}
	pb, ok := p.PlaybookOf(o.Playbook)
	if !ok {
		return nil, Operation{}, fmt.Errorf("--playbook %q: not one of kubespray %s's playbooks", o.Playbook, p.Minor)
	}
	op := Operation{Playbook: pb}
	if o.Limit != "" {
		op.Limit = strings.Split(o.Limit, ",")
	}
	if o.PlaybookVars != "" {
		dec := json.NewDecoder(strings.NewReader(o.PlaybookVars))
		if err := dec.Decode(&op.Vars); err != nil {
			return nil, Operation{}, fmt.Errorf("--playbook-vars: want a JSON object: %w", err)
		}
	}
	return p, op, p.Validate(op)
}

// Build returns the ansible-playbook invocation for o, which must pass Validate. program is
// the resolved path of o.AnsiblePlaybook, environ the environment to extend. The release's
// profile builds the command line (Profile.Argv):
//
//	ansible-playbook -i INVENTORY --private-key KEY -u USER -b [--limit L] -e @EXTRA_VARS [-e PLAYBOOK_VARS] -e SSH_VARS PLAYBOOK
//
// SSH_VARS is a JSON object (port, ssh args, host-key checking) after the CR's vars file,
// so that it wins over anything the file or the inventory says.
func Build(o RunOptions, program string, environ []string) (Invocation, error) {
	if err := o.Validate(); err != nil {
		return Invocation{}, err
	}
	p, op, err := o.Operation()
	if err != nil {
		return Invocation{}, err
	}
	checking := !o.InsecureIgnoreHostKey
	sshArgs := sshMultiplexing + " " + o.hostKeyArgs()
	sshVars, err := json.Marshal(map[string]any{
		"ansible_port":                  o.SSHPort,
		"ansible_ssh_args":              sshArgs,
		"ansible_ssh_common_args":       o.hostKeyArgs(),
		"ansible_host_key_checking":     checking,
		"ansible_ssh_host_key_checking": checking,
	})
	if err != nil {
		return Invocation{}, err
	}
	args, err := p.Argv(op, Files{
		Program: o.AnsiblePlaybook, Inventory: o.Inventory, PrivateKey: o.SSHKey, User: o.SSHUser,
		VarsFile: o.ExtraVars, Overrides: []string{string(sshVars)},
	})
	if err != nil {
		return Invocation{}, err
	}
	// The inventory is read only as the INI the step checked, never as YAML or a script.
	ours := []string{fmt.Sprintf("ANSIBLE_HOST_KEY_CHECKING=%t", checking), "ANSIBLE_SSH_ARGS=" + sshArgs, "ANSIBLE_INVENTORY_ENABLED=ini"}
	env := make([]string, 0, len(environ)+len(ours))
	for _, kv := range environ {
		// Ours replace any inherited value; the image's ansible.cfg is overridden by them.
		if name, _, _ := strings.Cut(kv, "="); !slices.ContainsFunc(ours, func(o string) bool { return strings.HasPrefix(o, name+"=") }) {
			env = append(env, kv)
		}
	}
	env = append(env, ours...)
	return Invocation{Path: program, Args: args, Env: env}, nil
}
