package artifacts

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
)

// StepTokenFile is where the step templates mount a step's ServiceAccount token for the
// artifact servers' audience (DefaultAudience).
const StepTokenFile = "/var/run/secrets/bpa.akraino.org/artifacts/token"

// BackupServerFlags are the flags of a step that talks to the site's etcd backup server:
// where it is, the CA it trusts, and this step's token for it.
type BackupServerFlags struct {
	URL, CAFile, TokenFile string
}

// AddFlags adds --server, --server-ca (default caFile) and --token-file.
func (f *BackupServerFlags) AddFlags(fs *pflag.FlagSet, caFile string) {
	fs.StringVar(&f.URL, "server", "", "the etcd backup server (BPAPolicy spec.etcdBackupServer), https://host[:port]")
	fs.StringVar(&f.CAFile, "server-ca", caFile, "PEM file of the CA the backup server's certificate chains to (its artifactServers entry's caBundle)")
	fs.StringVar(&f.TokenFile, "token-file", StepTokenFile, "this step's token for the backup server's audience")
}

// Client is the backup server's client: its CA only, this step's token (NewTokenClient).
func (f *BackupServerFlags) Client() (*Client, error) {
	if f.URL == "" {
		return nil, errors.New("--server is required: the site policy names no etcd backup server")
	}
	var ca []*x509.Certificate
	var data []byte
	if f.CAFile != "" {
		var err error
		if data, err = os.ReadFile(f.CAFile); err != nil {
			return nil, err
		}
	}
	if len(bytes.TrimSpace(data)) > 0 {
		var err error
		if ca, err = nodetrust.Parse(data); err != nil {
			return nil, fmt.Errorf("--server-ca %s: %w", f.CAFile, err)
		}
	}
	return NewTokenClient(f.URL, ca, f.TokenFile)
}
