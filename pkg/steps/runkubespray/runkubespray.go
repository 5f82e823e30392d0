// Package runkubespray is `bpa step run-kubespray`. It runs inside the kubespray image (an
// init container copies the bpa binary in) and starts ansible-playbook on the inventory
// and extra-vars file render-inventory wrote: once per operation of the planned step
// (--operations), in order, in this one container, so that the facts facts.yml caches under
// /tmp serve the scale.yml after it.
//
// Every value is validated first, and the command line is a list of separate arguments
// handed to execve: no shell ever sees it, so no value can become a command. The SSH
// settings that keep host keys checked are passed last as extra vars (the highest
// precedence in Ansible) and in the environment, over kubespray's own ansible.cfg, which
// turns host-key checking off (`host_key_checking=False`, `UserKnownHostsFile=/dev/null`).
package runkubespray

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
)

// Options are the step's flags.
type Options struct {
	Inventory             string
	ExtraVars             string
	SSHKey                string
	KnownHosts            string
	SSHUser               string
	SSHPort               int
	InsecureIgnoreHostKey bool
	Playbook              string
	// KubesprayImage is the kubespray image the step runs in; its tag is the release whose
	// profile (pkg/kubespray) builds the command line.
	KubesprayImage string
	// Limit (comma-separated host or group names) and PlaybookVars (a JSON object of the
	// -e variables the playbook needs) complete the operation; kubespray.Profile.Validate
	// checks them.
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

// DefaultOptions are the flags' defaults: the paths the WorkflowTemplate mounts the inputs
// at. `bpa plan` builds its argv from them too.
func DefaultOptions() Options {
	return Options{
		Inventory: "/tmp/bpa/in/hosts.ini", ExtraVars: "/tmp/bpa/in/extra-vars.yaml",
		SSHKey: "/etc/bpa/ssh/ssh-privatekey", KnownHosts: "/etc/bpa/ssh/known_hosts",
		SSHUser: "root", SSHPort: 22, Playbook: "cluster.yml", AnsiblePlaybook: "ansible-playbook",
		KubesprayImage: "quay.io/kubespray/kubespray:" + kubespray.DefaultVersion,
	}
}

// Command returns `bpa step run-kubespray`.
func Command() *cobra.Command {
	var o Options
	return stepcmd.Command(stepcmd.Step{
		Name:  "run-kubespray",
		Short: "Run kubespray's playbook on the rendered inventory (inside the kubespray image)",
		Flags: func(cmd *cobra.Command) {
			d, f := DefaultOptions(), cmd.Flags()
			f.StringVar(&o.Inventory, "inventory", d.Inventory, "inventory rendered by render-inventory")
			f.StringVar(&o.ExtraVars, "extra-vars", d.ExtraVars, "extra vars rendered by render-inventory (YAML, strings tagged !unsafe)")
			f.StringVar(&o.SSHKey, "ssh-key", d.SSHKey, "SSH private key (mounted from the cluster's SSH Secret)")
			f.StringVar(&o.KnownHosts, "known-hosts", d.KnownHosts, "the hosts' public keys (mounted from the same Secret)")
			f.StringVar(&o.SSHUser, "ssh-user", d.SSHUser, "login user on the hosts (become root with sudo when not root)")
			f.IntVar(&o.SSHPort, "ssh-port", d.SSHPort, "SSH port of the hosts")
			f.BoolVar(&o.InsecureIgnoreHostKey, "insecure-ignore-host-key", false, "do not check host keys (labs only)")
			f.StringVar(&o.Playbook, "playbook", d.Playbook, "playbook, relative to the working directory (the kubespray checkout); one of the release's")
			f.StringVar(&o.KubesprayImage, "kubespray-image", d.KubesprayImage, "the kubespray image this runs in: its tag picks the release's profile")
			f.StringVar(&o.Limit, "limit", "", "--limit for ansible-playbook: comma-separated host or group names")
			f.StringVar(&o.PlaybookVars, "playbook-vars", "", `the -e variables the playbook needs, as a JSON object (e.g. {"node":"w1","skip_confirmation":true})`)
			f.StringVar(&o.Operations, "operations", "", "JSON list of the kubespray operations to run in order, in this container (replaces --playbook, --limit and --playbook-vars)")
			f.BoolVar(&o.AllowUngraceful, "allow-ungraceful", false, "remove a node that cannot be reached over SSH without draining or resetting it; without it such a removal fails with NodeUnreachable")
			f.StringVar(&o.AnsiblePlaybook, "ansible-playbook", d.AnsiblePlaybook, "ansible-playbook program: a name looked up in PATH, or an absolute path")
			f.StringVar(&o.ArtifactsCA, "artifacts-ca", "", "file with the site policy's CA for spec.offline's artifact server (PEM; empty file: none), installed on the hosts before a playbook that downloads")
		},
		Run: func(ctx context.Context) error { return Run(ctx, o) },
	})
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
	playbook = regexp.MustCompile(`^/?[A-Za-z0-9_][A-Za-z0-9._+-]*(/[A-Za-z0-9_][A-Za-z0-9._+-]*)*\.ya?ml$`)
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
func (o Options) Validate() error {
	for _, f := range []struct{ flag, value string }{
		{"inventory", o.Inventory}, {"extra-vars", o.ExtraVars}, {"ssh-key", o.SSHKey}, {"known-hosts", o.KnownHosts},
	} {
		if err := checkPath(f.flag, f.value, absPath); err != nil {
			return err
		}
	}
	if err := checkPath("playbook", o.Playbook, playbook); err != nil {
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
func (o Options) hostKeyArgs() string {
	if o.InsecureIgnoreHostKey {
		return "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
	}
	return "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=" + o.KnownHosts
}

// ForOperation returns the options the WorkflowTemplate gives the step for op, operation i
// (from 0) of its step, from the Workflow's parameters (translator.ProvisioningParameters):
// `bpa plan` builds its argv with them, so what it prints is what the step runs.
func ForOperation(params map[string]string, op kubespray.Operation, i int) (Options, error) {
	o := DefaultOptions()
	o.KubesprayImage, o.SSHUser = params["kubespray-image"], params["ssh-user"]
	if _, err := fmt.Sscan(params["ssh-port"], &o.SSHPort); err != nil {
		return o, fmt.Errorf("ssh-port %q: %w", params["ssh-port"], err)
	}
	o.InsecureIgnoreHostKey = params["insecure-ignore-host-key"] == "true"
	p, err := o.profile()
	if err != nil {
		return o, err
	}
	return o.forOperation(p, op, i, "/tmp")
}

// InventoryWithout is where the step writes the inventory of operation i (from 0) of its
// step when the operation leaves hosts out (Operation.Without): under tmp, the container's
// own /tmp, gone with it.
func InventoryWithout(tmp string, i int) string {
	return filepath.Join(tmp, "bpa", "run", fmt.Sprintf("%02d-hosts.ini", i+1))
}

// forOperation sets o's playbook, limit and variables to op's, and its inventory to the
// filtered one when op leaves hosts out.
func (o Options) forOperation(p *kubespray.Profile, op kubespray.Operation, i int, tmp string) (Options, error) {
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

func (o Options) profile() (*kubespray.Profile, error) {
	p, _, err := kubespray.ProfileForImage(o.KubesprayImage)
	if err != nil {
		return nil, fmt.Errorf("--kubespray-image %q: %w", o.KubesprayImage, err)
	}
	return p, nil
}

// maxOperations bounds --operations: a planned step runs at most a few.
const maxOperations = 16

// operations returns the release's profile and the operations to run: the --operations
// list, or the one operation --playbook, --limit and --playbook-vars describe. Each is
// checked against the release's profile.
func (o Options) operations() (*kubespray.Profile, []kubespray.Operation, error) {
	if o.Operations == "" {
		p, op, err := o.Operation()
		return p, []kubespray.Operation{op}, err
	}
	p, err := o.profile()
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(o.Operations)
	if err != nil {
		return nil, nil, fmt.Errorf("--operations: %w", err)
	}
	// The file crossed an Argo parameter: nothing but the fields of an operation.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ops []kubespray.Operation
	if err := dec.Decode(&ops); err != nil {
		return nil, nil, fmt.Errorf("--operations %s: want a JSON list of kubespray operations: %w", o.Operations, err)
	}
	if len(ops) == 0 || len(ops) > maxOperations {
		return nil, nil, fmt.Errorf("--operations %s: want 1 to %d operations, got %d", o.Operations, maxOperations, len(ops))
	}
	for i, op := range ops {
		if err := p.Validate(op); err != nil {
			return nil, nil, fmt.Errorf("--operations %s: operation %d: %w", o.Operations, i+1, err)
		}
	}
	return p, ops, nil
}

// Operation returns the kubespray release's profile and the operation o asks for.
func (o Options) Operation() (*kubespray.Profile, kubespray.Operation, error) {
	p, err := o.profile()
	if err != nil {
		return nil, kubespray.Operation{}, err
	}
	pb, ok := p.PlaybookOf(o.Playbook)
	if !ok {
		return nil, kubespray.Operation{}, fmt.Errorf("--playbook %q: not one of kubespray %s's playbooks", o.Playbook, p.Minor)
	}
	op := kubespray.Operation{Playbook: pb}
	if o.Limit != "" {
		op.Limit = strings.Split(o.Limit, ",")
	}
	if o.PlaybookVars != "" {
		dec := json.NewDecoder(strings.NewReader(o.PlaybookVars))
		if err := dec.Decode(&op.Vars); err != nil {
			return nil, kubespray.Operation{}, fmt.Errorf("--playbook-vars: want a JSON object: %w", err)
		}
	}
	return p, op, p.Validate(op)
}

// Build returns the ansible-playbook invocation for o, which must have passed Validate.
// program is the resolved path of o.AnsiblePlaybook, environ the environment to extend.
// The release's profile builds the command line (kubespray.Profile.Argv):
//
//	ansible-playbook -i INVENTORY --private-key KEY -u USER -b [--limit L] -e @EXTRA_VARS [-e PLAYBOOK_VARS] -e SSH_VARS PLAYBOOK
//
// SSH_VARS is a JSON object (port, ssh args, host-key checking) after the CR's vars file,
// so that it wins over anything the file or the inventory says.
func Build(o Options, program string, environ []string) (Invocation, error) {
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
	args, err := p.Argv(op, kubespray.Files{
		Program: o.AnsiblePlaybook, Inventory: o.Inventory, PrivateKey: o.SSHKey, User: o.SSHUser,
		VarsFile: o.ExtraVars, Overrides: []string{string(sshVars)},
	})
	if err != nil {
		return Invocation{}, err
	}
	// The inventory is read only as the INI that checkFiles checked, never as YAML or a script.
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

// checkFiles checks what Validate cannot: that the inputs exist and make sense.
func (o Options) checkFiles() error {
	for _, f := range []struct{ what, path string }{
		{"inventory", o.Inventory}, {"extra vars", o.ExtraVars}, {"SSH private key", o.SSHKey},
	} {
		fi, err := os.Stat(f.path)
		if err != nil {
			return fmt.Errorf("%s: %w", f.what, err)
		}
		if !fi.Mode().IsRegular() || fi.Size() == 0 {
			return fmt.Errorf("%s %s: not a non-empty file", f.what, f.path)
		}
	}
	// Both files crossed an Argo parameter: check them as render-inventory did.
	vars, err := os.ReadFile(o.ExtraVars)
	if err != nil {
		return err
	}
	if err := inventory.CheckExtraVars(vars); err != nil {
		return fmt.Errorf("%s: %w", o.ExtraVars, err)
	}
	ini, err := os.ReadFile(o.Inventory)
	if err != nil {
		return err
	}
	if err := inventory.CheckInventory(ini, nil); err != nil {
		return fmt.Errorf("inventory %s: %w", o.Inventory, err)
	}
	if o.InsecureIgnoreHostKey {
		return nil
	}
	kh, err := os.ReadFile(o.KnownHosts)
	if err != nil {
		return fmt.Errorf("known_hosts: %w (add the hosts' public keys to the SSH Secret under known_hosts, or set spec.ssh.insecureIgnoreHostKey)", err)
	}
	for _, line := range strings.Split(string(kh), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return nil
		}
	}
	return fmt.Errorf("known_hosts %s holds no host key: add the hosts' public keys to the SSH Secret under known_hosts, or set spec.ssh.insecureIgnoreHostKey", o.KnownHosts)
}

// Run validates everything, then runs ansible-playbook once per operation, in order, with
// the step's stdout and stderr, and stops at the first that fails. Nothing runs unless every
// operation's command line could be built.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := o.checkFiles(); err != nil {
		return err
	}
	p, ops, err := o.operations()
	if err != nil {
		return err
	}
	for _, op := range ops {
		if _, err := os.Stat(p.Playbooks[op.Playbook]); err != nil {
			return fmt.Errorf("playbook: %w (the step runs in the kubespray checkout of the kubespray image)", err)
		}
	}
	program, err := exec.LookPath(o.AnsiblePlaybook)
	if err != nil {
		return fmt.Errorf("--ansible-playbook: %w", err)
	}
	ini, err := os.ReadFile(o.Inventory)
	if err != nil {
		return err
	}
	ca, err := o.artifactsCA()
	if err != nil {
		return err
	}
	// The removals below only change how a node leaves, never which hosts download.
	downloaders := downloadHosts(ops, ini)
	if err := offlinePreflight(ctx, o.ExtraVars, o.KubesprayImage, ca, func() ([]string, error) { return o.nodeArches(ctx, downloaders) }); err != nil {
		return err
	}
	if ops, err = o.removals(ctx, ops, inventory.Addresses(ini)); err != nil {
		return err
	}
	if len(ca) > 0 {
		if err := o.installCA(ctx, downloaders, ca); err != nil {
			return err
		}
	}
	// Only ansible-playbook gets the private copy: the pre-flight, the CA install and the
	// removal probe above log in with Go's SSH client, which reads the mounted key and checks
	// no file mode.
	key, err := privateKey(o.SSHKey, os.TempDir())
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(key))
	runs := make([]Invocation, len(ops))
	for i, op := range ops {
		oo, err := o.forOperation(p, op, i, os.TempDir())
		if err != nil {
			return err
		}
		if len(op.Without) > 0 {
			if err := writeWithout(oo.Inventory, ini, op.Without); err != nil {
				return fmt.Errorf("operation %d (%s): %w", i+1, op.Playbook, err)
			}
		}
		if runs[i], err = Build(oo, program, os.Environ()); err != nil {
			return fmt.Errorf("operation %d (%s): %w", i+1, op.Playbook, err)
		}
	}
	for i, op := range ops {
		fmt.Printf("operation %d/%d: playbook %s %s, because: %s; running %s\n", i+1, len(ops), p.Playbooks[op.Playbook], scope(op, o), reasonOf(op), strings.Join(runs[i].Args, " "))
		if err := run(ctx, runs[i]); err != nil {
			return fmt.Errorf("operation %d/%d (%s: %s): %w", i+1, len(ops), p.Playbooks[op.Playbook], reasonOf(op), err)
		}
	}
	return nil
}

// PrivateKey is where the step keeps the copy of the SSH key it hands ansible-playbook: under
// tmp, the container's own /tmp, in a directory only its user may enter. `bpa plan` prints
// this path in the argv, as the step runs it.
func PrivateKey(tmp string) string { return filepath.Join(tmp, "bpa", "ssh", "ssh-privatekey") }

// privateKey copies the SSH key to PrivateKey(tmp), readable by this process's user only
// (0600 in a 0700 directory). OpenSSH, which Ansible runs, ignores a key that its group or
// others may read ("UNPROTECTED PRIVATE KEY FILE", then "Permission denied (publickey)"), and
// a kubelet writes a Secret's files with the volume's defaultMode, widened to group-readable
// (|0440) whenever the pod has an fsGroup, which a site's admission (OpenShift's SCCs, a
// policy engine) may inject into any pod. The WorkflowTemplate mounts the key 0400, but the
// step must not depend on what the cluster does to its pod spec.
func privateKey(src, tmp string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("SSH private key: %w", err)
	}
	key := PrivateKey(tmp)
	dir := filepath.Dir(key)
	// A rerun in the same container finds the last copy: start from nothing.
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(key, data, 0o600); err != nil {
		return "", err
	}
	return key, nil
}

// scope says in words which hosts an operation runs on, and how.
func scope(op kubespray.Operation, o Options) string {
	s := "on every host of the inventory (no --limit)"
	if len(op.Limit) > 0 {
		s = "limited to " + strings.Join(op.Limit, ",")
	}
	if len(op.Without) > 0 {
		s += ", the inventory without " + strings.Join(op.Without, ",")
	}
	return fmt.Sprintf("%s, as %s over SSH port %d", s, o.SSHUser, o.SSHPort)
}

func reasonOf(op kubespray.Operation) string {
	if op.Reason == "" {
		return "the step's flags ask for it"
	}
	return op.Reason
}

// writeWithout writes the inventory without the hosts an earlier operation removed.
func writeWithout(path string, ini []byte, without []string) error {
	out, err := inventory.Without(ini, without)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// run runs one ansible-playbook invocation.
func run(ctx context.Context, inv Invocation) error {
	cmd := exec.CommandContext(ctx, inv.Path, inv.Args[1:]...)
	cmd.Args[0] = inv.Args[0]
	cmd.Env = inv.Env
	// Keep the end of the output: the failed task's lines become the step's message.
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, io.MultiWriter(os.Stdout, tail), io.MultiWriter(os.Stderr, tail)
	// On SIGTERM (the pod being stopped) let ansible-playbook stop its forks, then kill it.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("ansible-playbook %s failed (%v): %s", inv.Args[len(inv.Args)-1], exit, tail.failure())
		}
		return fmt.Errorf("running ansible-playbook: %w", err)
	}
	return nil
}

// probeTimeout bounds the login to a node a removal drains: a dead host must not hold the
// step long.
const probeTimeout = 10 * time.Second

// removals checks that the nodes each remove-node operation drains and resets can be
// reached, logging in over SSH as Ansible would (same key, known_hosts, user and port). A
// node that cannot be reached cannot be drained or reset. With --allow-ungraceful it is
// removed first, in an operation of its own with reset_nodes=false and
// allow_ungraceful_removal=true (kubespray's procedure for a dead host), and the reachable
// nodes after it with it left out of the inventory: remove-node.yml gathers every host's
// facts when it resets nodes, which a dead host in the inventory would fail. Without it,
// nothing runs.
func (o Options) removals(ctx context.Context, ops []kubespray.Operation, addrs map[string]string) ([]kubespray.Operation, error) {
	var out []kubespray.Operation
	for _, op := range ops {
		if op.Playbook != kubespray.Remove || op.Vars["allow_ungraceful_removal"] == true {
			out = append(out, op)
			continue
		}
		node, _ := op.Vars["node"].(string) // Validate made it a list of names
		nodes := strings.Split(node, ",")
		dead, why, err := o.unreachable(ctx, nodes, addrs)
		if err != nil {
			return nil, err
		}
		if len(dead) == 0 {
			out = append(out, op)
			continue
		}
		if !o.AllowUngraceful {
			return nil, fmt.Errorf("NodeUnreachable: cannot reach node %s over SSH to drain and reset it before removal (%s); nothing was run. "+
				"Bring the host back, or set spec.nodeRemoval.allowUngraceful: true to remove it without draining or resetting it",
				strings.Join(dead, ", "), strings.Join(why, "; "))
		}
		ungraceful := kubespray.RemoveNodes(dead, true, fmt.Sprintf("%s cannot be reached: remove without draining or resetting (spec.nodeRemoval.allowUngraceful)", strings.Join(dead, ", ")))
		for k, v := range op.Vars {
			if strings.HasPrefix(k, "drain_") {
				ungraceful.Vars[k] = v
			}
		}
		ungraceful.Without = op.Without
		out = append(out, ungraceful)
		if alive := slices.DeleteFunc(nodes, func(n string) bool { return slices.Contains(dead, n) }); len(alive) > 0 {
			graceful := op
			graceful.Vars = maps.Clone(op.Vars)
			graceful.Vars["node"] = strings.Join(alive, ",")
			graceful.Without = append(slices.Clone(op.Without), dead...)
			out = append(out, graceful)
		}
	}
	return out, nil
}

// sshConfig logs in to a host as Ansible does: same key, known_hosts, user and port.
func (o Options) sshConfig(timeout time.Duration) sshexec.Config {
	return sshexec.Config{KeyFile: o.SSHKey, KnownHostsFile: o.KnownHosts, User: o.SSHUser, Port: o.SSHPort,
		InsecureIgnoreHostKey: o.InsecureIgnoreHostKey, ConnectTimeout: timeout}
}

// unreachable logs in to each node at once and returns those it could not reach, with why.
func (o Options) unreachable(ctx context.Context, nodes []string, addrs map[string]string) (dead, why []string, err error) {
	cfg := o.sshConfig(probeTimeout)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		addr, ok := addrs[n]
		if !ok {
			return nil, nil, fmt.Errorf("operation remove-node: node %s is not in the inventory", n)
		}
		wg.Go(func() {
			c, err := sshexec.Dial(ctx, addr, cfg)
			if err == nil {
				c.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
		case !sshexec.IsNetworkFailure(err):
			// A host that answers but fails the host-key check or refuses the key is not
			// dead: removing it without a drain or reset would leave its kubelet running.
			return nil, nil, fmt.Errorf("node %s (%s) answers but cannot be logged in to: %w; BPA removes a node without draining it only when it cannot be reached at all: fix the host key or credentials",
				nodes[i], addrs[nodes[i]], err)
		default:
			fmt.Printf("node %s (%s) cannot be reached: %v\n", nodes[i], addrs[nodes[i]], err)
			dead, why = append(dead, nodes[i]), append(why, fmt.Sprintf("%s: %v", nodes[i], err))
		}
	}
	return dead, why, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// maxFailureMessage keeps the summary well inside a termination message (4 KiB).
const maxFailureMessage = 1500

// failure picks the lines that say what failed (Ansible's fatal/UNREACHABLE lines), or the
// last lines of output when there are none.
func (t *tailBuffer) failure() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var picked, last []string
	for _, l := range strings.Split(string(t.buf), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		last = append(last, l)
		if strings.Contains(l, "fatal:") || strings.Contains(l, "UNREACHABLE") || strings.HasPrefix(l, "failed:") {
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 && len(last) > 0 {
		picked = last[max(0, len(last)-3):]
	}
	msg := strings.Join(picked, "; ")
	if len(msg) > maxFailureMessage {
		msg = "..." + msg[len(msg)-maxFailureMessage:]
	}
	if msg == "" {
		return "it printed nothing"
	}
	return msg
}
