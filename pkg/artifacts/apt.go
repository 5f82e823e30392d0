package artifacts

import (
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/clearsign"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// aptRepo is the flat apt repository at /apt/: every published .deb, in an index signed
// with the server's key.
type aptRepo struct {
	signer *openpgp.Entity
	// gen counts changes to the set of .deb files; a snapshot is rebuilt when it moved.
	gen  atomic.Uint64
	mu   sync.Mutex
	snap *aptSnapshot
}

// aptSnapshot is the repository's index files, built together so that Release and its
// signatures describe exactly the Packages served next to them.
type aptSnapshot struct {
	gen   uint64
	at    time.Time
	files map[string][]byte
}

// indexOwned are the fields of Packages that BPA writes from its own metadata; an
// uploader's control file has no say in them.
var indexOwned = []string{"filename", "size", "md5sum", "sha1", "sha256", "sha512"}

// loadAptKey reads an unencrypted armored OpenPGP private key: one key, able to sign.
func loadAptKey(file string) (*openpgp.Entity, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	keys, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("%s: holds %d keys, want one", file, len(keys))
	}
	k, ok := keys[0].SigningKey(time.Now())
	switch {
	case !ok || k.PrivateKey == nil || k.PrivateKey.Dummy():
		return nil, fmt.Errorf("%s: no private key able to sign (export it with gpg --export-secret-keys --armor)", file)
	case k.PrivateKey.Encrypted:
		return nil, fmt.Errorf("%s: the private key is protected by a passphrase; export a key that is not", file)
	}
	return keys[0], nil
}

// serveApt answers GET and HEAD of /apt/: the index files of the current snapshot, and
// the .deb files they list.
func (s *Server) serveApt(w http.ResponseWriter, r *http.Request, rest string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if _, ok := s.opts.Auth.allow(w, r, "get"); !ok {
		return
	}
	if s.apt == nil {
		http.Error(w, "the apt repository is off: bpa serve runs without --apt-signing-key, and never serves an unsigned one", http.StatusNotFound)
		return
	}
	// apt asks a flat repository (Suites: ./) for URI/./FILE.
	rest = strings.TrimPrefix(rest, "./")
	if strings.HasSuffix(rest, ".deb") {
		s.serveStored(w, r, rest)
		return
	}
	snap, err := s.aptSnapshot()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b, ok := snap.files[rest]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if rest == "Packages.gz" {
		w.Header().Set("Content-Type", "application/gzip")
	}
	http.ServeContent(w, r, "", snap.at, bytes.NewReader(b))
}

// aptChanged is called when a .deb is published or deleted.
func (s *Server) aptChanged(p string) {
	if s.apt != nil && strings.HasSuffix(p, ".deb") {
		s.apt.gen.Add(1)
		s.indexChanged()
	}
}

// aptSnapshot returns the index files for the current set of .deb files, built once per
// change of that set. The generation is read before building, so a .deb published while
// a snapshot is built makes the next request build again.
func (s *Server) aptSnapshot() (*aptSnapshot, error) {
	a := s.apt
	a.mu.Lock()
	defer a.mu.Unlock()
	gen := a.gen.Load()
	if a.snap != nil && a.snap.gen == gen {
		return a.snap, nil
	}
	packages, err := s.aptPackages()
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(packages)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	at := time.Now().UTC().Truncate(time.Second)
	release := &bytes.Buffer{}
	fmt.Fprintf(release, "Origin: BPA\nLabel: BPA artifacts\nDate: %s\nSHA256:\n", at.Format(time.RFC1123))
	for _, f := range []struct {
		name string
		b    []byte
	}{{"Packages", packages}, {"Packages.gz", gz.Bytes()}} {
		sum := sha256.Sum256(f.b)
		fmt.Fprintf(release, " %s %d %s\n", hex.EncodeToString(sum[:]), len(f.b), f.name)
	}
	cfg := &packet.Config{DefaultHash: crypto.SHA256} // apt refuses SHA-1 signatures
	k, ok := a.signer.SigningKey(at)
	if !ok {
		return nil, errors.New("the apt signing key has expired or was revoked; give bpa serve a new one")
	}
	var inRelease, detached bytes.Buffer
	pw, err := clearsign.Encode(&inRelease, k.PrivateKey, cfg)
	if err == nil {
		_, _ = pw.Write(release.Bytes())
		err = pw.Close()
	}
	if err == nil {
		err = openpgp.ArmoredDetachSign(&detached, a.signer, bytes.NewReader(release.Bytes()), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("sign the apt Release: %w", err)
	}
	a.snap = &aptSnapshot{gen: gen, at: at, files: map[string][]byte{
		"Packages": packages, "Packages.gz": gz.Bytes(), "Release": release.Bytes(),
		"InRelease": inRelease.Bytes(), "Release.gpg": detached.Bytes(),
	}}
	return a.snap, nil
}

// aptPackages is the Packages index: a paragraph per published .deb, sorted by path, of
// its control fields and then the Filename, Size and SHA256 BPA knows.
func (s *Server) aptPackages() ([]byte, error) {
	root := filepath.Join(s.opts.Dir, "meta")
	var debs []*FileMeta
	err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".deb.json") {
			return err
		}
		rel, _ := filepath.Rel(root, strings.TrimSuffix(name, ".json"))
		m, err := s.readMeta(filepath.ToSlash(rel))
		if errors.Is(err, fs.ErrNotExist) { // deleted since listed
			return nil
		} else if err != nil {
			return err
		}
		if m.Control != nil { // nil: published before BPA parsed .deb files
			debs = append(debs, m)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(debs, func(a, b *FileMeta) int { return strings.Compare(a.Path, b.Path) })
	var b bytes.Buffer
	for i, m := range debs {
		if i > 0 {
			b.WriteByte('\n')
		}
		for _, f := range m.Control {
			if slices.Contains(indexOwned, strings.ToLower(f.Name)) {
				continue
			}
			sep := " "
			if f.Value == "" || f.Value[0] == '\n' {
				sep = ""
			}
			fmt.Fprintf(&b, "%s:%s%s\n", f.Name, sep, f.Value)
		}
		fmt.Fprintf(&b, "Filename: %s\nSize: %d\nSHA256: %s\n", m.Path, m.Size, m.SHA256)
	}
	return b.Bytes(), nil
}
