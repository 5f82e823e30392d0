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
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/offlinecheck"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
)

// Command returns `bpa step run-kubespray`.
func Command() *cobra.Command {
	var o kubespray.RunOptions
	return stepcmd.Command(stepcmd.Step{
		Name:  "run-kubespray",
		Short: "Run kubespray's playbook on the rendered inventory (inside the kubespray image)",
		Flags: func(cmd *cobra.Command) {
			d, f := kubespray.DefaultRunOptions(), cmd.Flags()
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

// checkFiles checks what Validate cannot: that the inputs exist and make sense.
func checkFiles(o kubespray.RunOptions) error {
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

// operations returns the release's profile and the operations to run: the --operations
// file's list, or the one operation --playbook, --limit and --playbook-vars describe. Each is
// checked against the release's profile.
func operations(o kubespray.RunOptions) (*kubespray.Profile, []kubespray.Operation, error) {
	if o.Operations == "" {
		p, op, err := o.Operation()
		return p, []kubespray.Operation{op}, err
	}
	p, err := o.Profile()
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(o.Operations)
	if err != nil {
		return nil, nil, fmt.Errorf("--operations: %w", err)
	}
	ops, err := kubespray.DecodeOperations(p, o.Operations, data)
	return p, ops, err
}

// Run validates everything, then runs ansible-playbook once per operation, in order, with
// the step's stdout and stderr, and stops at the first that fails. Nothing runs unless every
// operation's command line could be built.
func Run(ctx context.Context, o kubespray.RunOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if err := checkFiles(o); err != nil {
		return err
	}
	p, ops, err := operations(o)
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
	ca, err := artifactsCA(o)
	if err != nil {
		return err
	}
	// The removals below only change how a node leaves, never which hosts download.
	downloaders := downloadHosts(ops, ini)
	if err := offlinecheck.Preflight(ctx, o.ExtraVars, o.KubesprayImage, ca, func() ([]string, error) { return nodeArches(ctx, o, downloaders) }); err != nil {
		return err
	}
	addrs := inventory.Addresses(ini)
	ops, err = kubespray.WithoutDeadHosts(ops, o.AllowUngraceful, func(nodes []string) ([]string, []string, error) {
		return unreachable(ctx, o, nodes, addrs)
	})
	if err != nil {
		return err
	}
	if len(ca) > 0 {
		if err := installCA(ctx, o, downloaders, ca); err != nil {
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
	runs := make([]kubespray.Invocation, len(ops))
	for i, op := range ops {
		oo, err := o.ForOperation(p, op, i, os.TempDir())
		if err != nil {
			return err
		}
		if len(op.Without) > 0 {
			if err := writeWithout(oo.Inventory, ini, op.Without); err != nil {
				return fmt.Errorf("operation %d (%s): %w", i+1, op.Playbook, err)
			}
		}
		if runs[i], err = kubespray.Build(oo, program, os.Environ()); err != nil {
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

// privateKey copies the SSH key to kubespray.PrivateKey(tmp), readable by this process's user only
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
	key := kubespray.PrivateKey(tmp)
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
	// Said as the file is, read back: what ansible-playbook's ssh will find.
	fi, err := os.Stat(key)
	if err != nil {
		return "", err
	}
	fmt.Printf("SSH private key for ansible-playbook: %s, mode %04o\n", key, fi.Mode().Perm())
	return key, nil
}

// scope says in words which hosts an operation runs on, and how.
func scope(op kubespray.Operation, o kubespray.RunOptions) string {
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
func run(ctx context.Context, inv kubespray.Invocation) error {
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

// sshConfig logs in to a host as Ansible does: same key, known_hosts, user and port.
func sshConfig(o kubespray.RunOptions, timeout time.Duration) sshexec.Config {
	return sshexec.Config{KeyFile: o.SSHKey, KnownHostsFile: o.KnownHosts, User: o.SSHUser, Port: o.SSHPort,
		InsecureIgnoreHostKey: o.InsecureIgnoreHostKey, ConnectTimeout: timeout}
}

// unreachable logs in to each node a removal drains at once, as Ansible would (same key,
// known_hosts, user and port), and returns those it could not reach, with why
// (kubespray.Unreachable).
func unreachable(ctx context.Context, o kubespray.RunOptions, nodes []string, addrs map[string]string) (dead, why []string, err error) {
	cfg := sshConfig(o, probeTimeout)
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
