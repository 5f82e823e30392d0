package sshexec

import (
	"testing"

	"github.com/spf13/pflag"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

func TestFlagsConfigPrecedence(t *testing.T) {
	cr := &bpav1.SSHConfig{User: "ubuntu", Port: 2222, InsecureIgnoreHostKey: true}
	for _, tc := range []struct {
		name     string
		args     []string
		cr       *bpav1.SSHConfig
		user     string
		port     int
		insecure bool
	}{
		{"defaults", nil, nil, "root", 22, false},
		{"CR when no flag", nil, cr, "ubuntu", 2222, true},
		{"flags win", []string{"--ssh-user=admin", "--ssh-port=2200", "--insecure-ignore-host-key=false"}, cr, "admin", 2200, false},
		{"empty flag values count as unset", []string{"--ssh-user=", "--ssh-port=0"}, cr, "ubuntu", 2222, true},
		{"flags without CR", []string{"--ssh-user=root", "--ssh-port=22", "--insecure-ignore-host-key=true"}, nil, "root", 22, true},
	} {
		var f Flags
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		f.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		c := f.Config(fs, tc.cr)
		if c.User != tc.user || c.Port != tc.port || c.InsecureIgnoreHostKey != tc.insecure {
			t.Errorf("%s: got %s:%d insecure=%v", tc.name, c.User, c.Port, c.InsecureIgnoreHostKey)
		}
		if c.KeyFile != DefaultKeyFile || c.KnownHostsFile != DefaultKnownHostsFile {
			t.Errorf("%s: key files %s %s", tc.name, c.KeyFile, c.KnownHostsFile)
		}
	}
}
