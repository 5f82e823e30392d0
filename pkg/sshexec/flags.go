package sshexec

import (
	"time"

	"github.com/spf13/pflag"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Where the step pods mount the cluster's SSH Secret.
const (
	DefaultKeyFile        = "/etc/bpa/ssh/ssh-privatekey"
	DefaultKnownHostsFile = "/etc/bpa/ssh/known_hosts"
)

// Flags are the SSH flags every step that reaches hosts takes.
type Flags struct {
	KeyFile        string
	KnownHostsFile string
	User           string
	Port           int
	Insecure       bool
	ConnectTimeout time.Duration
}

// AddFlags registers the flags.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.KeyFile, "ssh-key", DefaultKeyFile, "private key file (from the SSH Secret)")
	fs.StringVar(&f.KnownHostsFile, "known-hosts", DefaultKnownHostsFile, "known_hosts file the hosts' keys are checked against (from the SSH Secret)")
	fs.StringVar(&f.User, "ssh-user", "", "login user; sudo is used when it is not root (default: the CR's spec.ssh.user, else root)")
	fs.IntVar(&f.Port, "ssh-port", 0, "SSH port (default: the CR's spec.ssh.port, else 22)")
	fs.BoolVar(&f.Insecure, "insecure-ignore-host-key", false, "do not check host keys (labs only; default: the CR's spec.ssh.insecureIgnoreHostKey)")
	fs.DurationVar(&f.ConnectTimeout, "ssh-connect-timeout", DefaultConnectTimeout, "bound on connecting to a host and the SSH handshake")
}

// Config resolves the SSH settings: a flag given on the command line wins (that is what the
// WorkflowTemplate passes), then the CR's spec.ssh (cr may be nil), then the defaults (root,
// port 22, host keys checked).
func (f *Flags) Config(fs *pflag.FlagSet, cr *bpav1.SSHConfig) Config {
	if cr == nil {
		cr = &bpav1.SSHConfig{}
	}
	c := Config{
		KeyFile:               f.KeyFile,
		KnownHostsFile:        f.KnownHostsFile,
		User:                  cr.User,
		Port:                  int(cr.Port),
		InsecureIgnoreHostKey: cr.InsecureIgnoreHostKey,
		ConnectTimeout:        f.ConnectTimeout,
	}
	// An empty value (an unset Workflow parameter) counts as not given.
	if fs.Changed("ssh-user") && f.User != "" {
		c.User = f.User
	}
	if fs.Changed("ssh-port") && f.Port != 0 {
		c.Port = f.Port
	}
	if fs.Changed("insecure-ignore-host-key") {
		c.InsecureIgnoreHostKey = f.Insecure
	}
	if c.User == "" {
		c.User = "root"
	}
	if c.Port == 0 {
		c.Port = 22
	}
	return c
}
