package nodetrust

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
)

// MaxAptKey bounds an apt key, as the CRD's maxLength does.
const MaxAptKey = 64 << 10

// serverURL is spec.offline.url's syntax (the CRD pattern): no path, quote, space or newline,
// so the deb822 source BPA writes around it reads as one field.
var serverURL = regexp.MustCompile(`^https://[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`)

// ParseAptKey reads an armored OpenPGP public key block (BPAPolicy spec.artifactServers[].
// aptKey) and returns BPA's own armored re-encoding of its public keys: a private key, any
// other block type, or text around the block is an error.
func ParseAptKey(data []byte) ([]byte, error) {
	if len(data) > MaxAptKey {
		return nil, fmt.Errorf("%d bytes, more than the %d allowed", len(data), MaxAptKey)
	}
	trimmed := bytes.TrimSpace(data)
	if !bytes.HasPrefix(trimmed, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----")) || !bytes.HasSuffix(trimmed, []byte("-----END PGP PUBLIC KEY BLOCK-----")) ||
		bytes.Count(trimmed, []byte("-----BEGIN ")) != 1 {
		return nil, errors.New("want one armored PGP PUBLIC KEY BLOCK and nothing else")
	}
	keys, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(trimmed))
	if err != nil {
		return nil, fmt.Errorf("not an OpenPGP public key: %w", err)
	}
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, err
	}
	for _, e := range keys {
		if e.PrivateKey != nil {
			return nil, errors.New("a private key: give the public key only (gpg --export --armor)")
		}
		if err := e.Serialize(w); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return append(b.Bytes(), '\n'), nil
}

// AptSource is the deb822 source of server's flat repository, checked with AptKeyPath.
func AptSource(server string) (string, error) {
	if !serverURL.MatchString(server) {
		return "", fmt.Errorf("artifact server %q: not https://host[:port]", server)
	}
	return "Types: deb\nURIs: " + server + "/apt/\nSuites: ./\nSigned-By: " + bpav1.AptKeyPath + "\n", nil
}

// aptOrigin is the Origin field of the Release file the artifact server signs
// (pkg/artifacts/apt.go), which apt preferences pin by (`release o=`): unlike the URI's host
// it does not change with the address a node reaches the server at.
const aptOrigin = "BPA"

// packageName is Debian policy's package name syntax (5.6.1): nothing apt preferences
// could read as another field or record.
var packageName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// AptPreferences pins the artifact server's repository so that it supplies only names, the
// packages of the Software being installed, at the default priority (500: the version
// decides, as for any source), and nothing else at all (-1): an uploader's .deb can then
// neither replace an OS package of another name, even with a higher version, nor come in
// as a dependency. A dependency that only the server has must be named in the Software.
// Each install rewrites the file, so only the running Software's names are open.
func AptPreferences(names []string) (string, error) {
	var b strings.Builder
	b.WriteString("# Written by BPA install-software: the artifact server's repository supplies only these packages.\n")
	if len(names) > 0 {
		for _, n := range names {
			if !packageName.MatchString(n) {
				return "", fmt.Errorf("package name %q: not a Debian package name", n)
			}
		}
		fmt.Fprintf(&b, "Package: %s\nPin: release o=%s\nPin-Priority: 500\n\n", strings.Join(names, " "), aptOrigin)
	}
	fmt.Fprintf(&b, "Package: *\nPin: release o=%s\nPin-Priority: -1\n", aptOrigin)
	return b.String(), nil
}

// aptScript writes $1 (the key), $3 (the preferences) and then $2 (the source), each without
// its last newline. The source is written last, so a host holding all exactly is left alone,
// and one cut off between them is done again. Its text is fixed: its arguments are only ever
// data.
var aptScript = `set -eu
if [ "$(cat ` + bpav1.AptKeyPath + ` 2>/dev/null)" = "$1" ] && [ "$(cat ` + bpav1.AptPreferencesPath + ` 2>/dev/null)" = "$3" ] &&
	[ "$(cat ` + bpav1.AptSourcePath + ` 2>/dev/null)" = "$2" ]; then
	echo current
	exit 0
fi
put() {
	mkdir -p "${1%/*}"
	printf '%s\n' "$2" >"$1.bpa-new"
	chmod 644 "$1.bpa-new"
	mv -f "$1.bpa-new" "$1"
}
put ` + bpav1.AptKeyPath + ` "$1"
put ` + bpav1.AptPreferencesPath + ` "$3"
put ` + bpav1.AptSourcePath + ` "$2"
echo changed
`

// InstallAptSource puts the repository's key, its pinning to names (AptPreferences) and its
// source on the host c is connected to, and says whether it changed anything. key is
// ParseAptKey's output.
func InstallAptSource(ctx context.Context, c *sshexec.Client, key []byte, server string, names []string) (bool, error) {
	src, err := AptSource(server)
	if err != nil {
		return false, err
	}
	prefs, err := AptPreferences(names)
	if err != nil {
		return false, err
	}
	out, err := c.Output(ctx, []string{"sh", "-c", aptScript, "bpa-apt-source",
		strings.TrimSuffix(string(key), "\n"), strings.TrimSuffix(src, "\n"), strings.TrimSuffix(prefs, "\n")})
	return strings.TrimSpace(string(out)) == "changed", err
}

// InstallCAOn is Install for one host c is connected to; it says whether it changed anything.
func InstallCAOn(ctx context.Context, c *sshexec.Client, certs []*x509.Certificate) (bool, error) {
	res, err := installCA(ctx, c, strings.TrimSuffix(string(Encode(certs)), "\n"))
	return res == "changed", err
}
