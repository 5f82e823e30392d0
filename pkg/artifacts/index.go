package artifacts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/debversion"
)

// The apt repository's index is recorded in the cluster (Options.Index), so that Softwares
// tracking `version: latest` follow uploads: after every change of the set of .deb files,
// and once at start, the server writes the newest version of each package and the digest
// of the Packages file into the status of its ArtifactIndex.
//
// The record is idempotent: an unchanged digest is never written again, and each change
// adds one to the revision read back from the object, so a restart of the server neither
// loses a change (it records what its store holds at start) nor repeats one. Changes that
// come while a record is being written are taken together by the next one.

// indexRetry bounds the wait before a failed record is tried again (the object missing, the
// apiserver away, a conflict with another writer).
const indexRetry = 2 * time.Minute

var indexName = regexp.MustCompile(bpav1.DebianPackageNamePattern)

// indexChanged wakes the recorder; changes that come while it works coalesce into one.
func (s *Server) indexChanged() {
	select {
	case s.indexDirty <- struct{}{}:
	default:
	}
}

// recordIndexLoop records the index at start and after each change until ctx ends.
func (s *Server) recordIndexLoop(ctx context.Context) {
	backoff := time.Second
	for {
		wait := time.Duration(0)
		if err := s.RecordIndex(ctx); err != nil {
			log.Printf("bpa serve: recording the apt repository in ArtifactIndex %s: %v (again in %v)", s.opts.Index, err, backoff)
			wait, backoff = backoff, min(2*backoff, indexRetry)
		} else {
			backoff = time.Second
		}
		var retry <-chan time.Time
		if wait > 0 {
			retry = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.indexDirty:
		case <-retry:
		}
	}
}

// RecordIndex writes the repository's current index into the ArtifactIndex's status, unless
// the status already holds it.
func (s *Server) RecordIndex(ctx context.Context) error {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	snap, err := s.aptSnapshot()
	if err != nil {
		return err
	}
	packages := snap.files["Packages"]
	sum := sha256.Sum256(packages)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	idx := &bpav1.ArtifactIndex{}
	if err := s.opts.IndexClient.Get(ctx, client.ObjectKey{Name: s.opts.Index}, idx); err != nil {
		return fmt.Errorf("reading it (the site admin creates it, config/serve ships one): %w", err)
	}
	if idx.Status.Digest == digest {
		return nil
	}
	newest, skipped := newestVersions(packages)
	for _, p := range skipped {
		log.Printf("bpa serve: ArtifactIndex %s leaves out %s: not a Debian package name and version", s.opts.Index, p)
	}
	if len(newest) > bpav1.MaxIndexedPackages {
		return fmt.Errorf("the repository holds %d package names, more than the %d an ArtifactIndex records", len(newest), bpav1.MaxIndexedPackages)
	}
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	idx.Status = bpav1.ArtifactIndexStatus{Revision: idx.Status.Revision + 1, Digest: digest, UpdatedAt: &now, Packages: newest}
	// An update carrying the resourceVersion read above: a concurrent writer makes it fail
	// with a conflict rather than be overwritten, and the retry starts from its record.
	if err := s.opts.IndexClient.Status().Update(ctx, idx); err != nil {
		return err
	}
	log.Printf("bpa serve: ArtifactIndex %s revision %d: %d packages (Packages %s)", s.opts.Index, idx.Status.Revision, len(newest), digest)
	return nil
}

// newestVersions reads a Packages index: the newest version of each package (dpkg's order),
// sorted by name. A paragraph whose name or version is not Debian syntax is left out and
// returned as skipped: dpkg would not install it, and a version that is not one could
// otherwise sort above every real one.
func newestVersions(packages []byte) (newest []bpav1.PackageVersion, skipped []string) {
	best := map[string]string{}
	flush := func(name, version string) {
		switch {
		case name == "" && version == "":
		case len(name) > bpav1.MaxPackageFieldLength || !indexName.MatchString(name) || !debversion.Valid(version):
			skipped = append(skipped, fmt.Sprintf("%q %q", name, version))
		case best[name] == "" || debversion.Newer(version, best[name]):
			best[name] = version
		}
	}
	var name, version string
	sc := bufio.NewScanner(bytes.NewReader(packages))
	sc.Buffer(make([]byte, 64<<10), maxControlFile+1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush(name, version)
			name, version = "", ""
		case strings.HasPrefix(line, "Package:"):
			name = strings.TrimSpace(strings.TrimPrefix(line, "Package:"))
		case strings.HasPrefix(line, "Version:"):
			version = strings.TrimSpace(strings.TrimPrefix(line, "Version:"))
		}
	}
	flush(name, version)
	for n, v := range best {
		newest = append(newest, bpav1.PackageVersion{Name: n, Version: v})
	}
	sort.Slice(newest, func(i, j int) bool { return newest[i].Name < newest[j].Name })
	return newest, skipped
}
