// Package artifacts is BPA's artifact server for air-gapped sites (`bpa serve`) and its
// client (`bpa artifacts`): files uploaded with the tus resumable-upload protocol and served
// by plain GET under the layout kubespray's offline mode expects (the original domain as
// the top directory, as contrib/offline/manage-offline-files.sh lays them out), container
// images through an embedded CNCF distribution registry, and the installation status of
// a cluster. Writes need a Kubernetes bearer token that a SubjectAccessReview allows.
package artifacts

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxPathLen bounds a file's path; kubespray's longest download paths are far shorter.
const MaxPathLen = 1024

// domain is the first segment of every file path: the host a file was downloaded from
// (with an optional port). Requiring a dot keeps file paths apart from tus upload IDs,
// which share the /files/ prefix and never contain one.
var domain = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+(:[0-9]{1,5})?$`)

// CleanPath checks a file path as a client gives it (e.g. dl.k8s.io/release/v1.32.5/bin/
// linux/amd64/kubelet) and returns it unchanged when it is safe to join under the store:
// valid UTF-8, relative, no empty, "." or ".." segment, no hidden segment, no backslash, percent,
// control or format character (so no encoded form can mean a different path), and a domain first.
func CleanPath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("path: empty")
	case len(p) > MaxPathLen:
		return "", fmt.Errorf("path: longer than %d bytes", MaxPathLen)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("path %q: must be relative (the original domain first, e.g. dl.k8s.io/...)", p)
	case strings.ContainsAny(p, "\\%?#"):
		return "", fmt.Errorf("path %q: backslash, %%, ? and # are not allowed", p)
	}
	for _, r := range p {
		// C0, DEL and C1 controls could drive a terminal that lists the path; format
		// characters (bidi overrides and isolates, zero-width ones) could make it show as
		// another path. `bpa describe` escapes the same set (pkg/describe).
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return "", fmt.Errorf("path %q: control or format (bidi) character %U", p, r)
		}
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" || s == "." || s == ".." || strings.HasPrefix(s, ".") {
			return "", fmt.Errorf("path %q: empty, '.', '..' or hidden segment %q", p, s)
		}
	}
	if len(segs) < 2 || !domain.MatchString(segs[0]) {
		return "", fmt.Errorf("path %q: must start with the original domain as its top directory (e.g. dl.k8s.io/...) and name a file below it", p)
	}
	return p, nil
}
