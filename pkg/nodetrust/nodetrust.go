// Package nodetrust puts an artifact server's CA on a cluster's nodes, so that kubespray's
// downloads (get_url, which trusts the node's system store) and containerd's pulls (its
// hosts.toml names the file) verify the server without anything turning verification off.
//
// The CA comes only from the site admin's BPAPolicy (spec.artifactServers[].caBundle). It is
// public, so it may travel as a Workflow parameter, but every reader parses it again (Parse)
// and a node only ever receives BPA's own re-encoding of the certificates (Encode), written
// by a fixed script: nothing in the bundle can become a command on a host. Since every
// program on a node trusts what is in its OS trust store, the policy takes only CAs whose
// name constraints keep them to the artifact server (CheckScope, scope.go).
package nodetrust

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// Where a node keeps the CA: BPA's own path (the one containerd's mirrors name), and the
// file in its OS family's trust store that update-ca-certificates (Debian, Ubuntu) or
// update-ca-trust (RHEL family) adds to the system bundle.
const (
	Path       = bpav1.ArtifactsCAPath
	DebianPath = "/usr/local/share/ca-certificates/bpa-artifacts.crt"
	RHELPath   = "/etc/pki/ca-trust/source/anchors/bpa-artifacts.crt"
)

// MaxBundle bounds a bundle, as the CRD's maxLength does.
const MaxBundle = 16 << 10

// Parse reads a bundle of PEM CERTIFICATE blocks and nothing else: any other text, block
// type or PEM header, or a block that is not an X.509 certificate, is an error saying where.
func Parse(data []byte) ([]*x509.Certificate, error) {
	if len(data) > MaxBundle {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", len(data), MaxBundle)
	}
	var certs []*x509.Certificate
	rest := data
	for {
		rest = bytes.TrimLeft(rest, " \t\r\n\f")
		if len(rest) == 0 {
			break
		}
		at := len(data) - len(rest)
		block, next := pem.Decode(rest)
		// pem.Decode skips text before a block and malformed blocks: the block must start
		// right here and be the only one in what it consumed.
		if block == nil || !bytes.HasPrefix(rest, []byte("-----BEGIN ")) || bytes.Count(rest[:len(rest)-len(next)], []byte("-----BEGIN ")) != 1 {
			return nil, fmt.Errorf("byte %d: want a PEM CERTIFICATE block and nothing else", at)
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) > 0 {
			return nil, fmt.Errorf("byte %d: a %s block with %d headers; only CERTIFICATE blocks without headers are allowed", at, block.Type, len(block.Headers))
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs, rest = append(certs, c), next
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs, nil
}

// Encode is BPA's own PEM of certs: base64 lines between the block markers, nothing else.
func Encode(certs []*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// installScript writes $1 (the re-encoded bundle, without its last newline) to the trust
// store of the OS family whose tool is installed, rebuilds the system bundle, and only then
// writes Path: Path holding these bytes means the whole install finished, so a host that
// already has exactly these bytes in both files is left alone (a rerun changes nothing),
// while one cut off before the rebuild (a killed pod, a failing tool) is done again. Its
// text is fixed: the bundle is only ever data, in double quotes.
var installScript = `set -eu
want=$1
if command -v update-ca-certificates >/dev/null 2>&1; then
	store=` + DebianPath + `; set -- update-ca-certificates
elif command -v update-ca-trust >/dev/null 2>&1; then
	store=` + RHELPath + `; set -- update-ca-trust extract
else
	echo "neither update-ca-certificates (Debian, Ubuntu) nor update-ca-trust (RHEL family) is installed" >&2
	exit 3
fi
if [ "$(cat ` + Path + ` 2>/dev/null)" = "$want" ] && [ "$(cat "$store" 2>/dev/null)" = "$want" ]; then
	echo current
	exit 0
fi
mkdir -p ` + path.Dir(Path) + ` "${store%/*}"
put() {
	printf '%s\n' "$want" >"$1.bpa-new"
	chmod 644 "$1.bpa-new"
	mv -f "$1.bpa-new" "$1"
}
put "$store"
"$@" >/dev/null
put ` + Path + `
echo changed
`

// Host is a node to install on: its inventory name and address.
type Host = sshexec.Target

// Install puts certs on every host over SSH (cfg: the step's user, port, key and host-key
// policy; a non-root user goes through sudo), at most sshexec.Parallel at once, logging one
// line per host it changed and a summary to log. Every host is tried; the error names each
// host that could not be reached (NodeUnreachable) or failed.
func Install(ctx context.Context, hosts []Host, cfg sshexec.Config, certs []*x509.Certificate, log io.Writer) error {
	want := strings.TrimSuffix(string(Encode(certs)), "\n")
	results, errs := sshexec.OnEach(ctx, hosts, cfg, func(ctx context.Context, c *sshexec.Client) (string, error) {
		return installCA(ctx, c, want)
	})
	var changed, current int
	unreachable, failed := sshexec.Failures(hosts, errs)
	for i, h := range hosts {
		switch {
		case errs[i] != nil:
		case results[i] == "changed":
			changed++
			fmt.Fprintf(log, "artifact server CA: installed on %s (%s, %s and the OS trust store)\n", h.Name, h.Addr, Path)
		default:
			current++
		}
	}
	fmt.Fprintf(log, "artifact server CA (%d certificates): installed on %d hosts, already current on %d, failed on %d\n",
		len(certs), changed, current, len(unreachable)+len(failed))
	var msgs []string
	if len(unreachable) > 0 {
		msgs = append(msgs, fmt.Sprintf(bpav1.ReasonNodeUnreachable+": cannot reach %d hosts over SSH to install the artifact server's CA before kubespray downloads from it: %s",
			len(unreachable), strings.Join(unreachable, "; ")))
	}
	if len(failed) > 0 {
		msgs = append(msgs, fmt.Sprintf("installing the artifact server's CA failed on %d hosts: %s", len(failed), strings.Join(failed, "; ")))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; ") + "; no playbook was run")
	}
	return nil
}

// installCA runs installScript with want (Encode's output without its last newline) and
// returns its answer, "changed" or "current".
func installCA(ctx context.Context, c *sshexec.Client, want string) (string, error) {
	out, err := c.Output(ctx, []string{"sh", "-c", installScript, "bpa-install-ca", want})
	return strings.TrimSpace(string(out)), err
}
