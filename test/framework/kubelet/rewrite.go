package kubelet

import (
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// pathMap maps in-container paths (mount paths, artifact and output paths)
// to where the stand-in put them on the host.
type pathMap struct {
	root  string            // <pod dir>/fs: home of paths no mount covers
	mount map[string]string // container path -> host path
}

func newPathMap(root string) *pathMap {
	return &pathMap{root: root, mount: map[string]string{}}
}

// add maps a container path to a host path (the first mapping wins).
func (m *pathMap) add(containerPath, hostPath string) {
	p := path.Clean(containerPath)
	if p == "/" || p == "." {
		return
	}
	if _, ok := m.mount[p]; !ok {
		m.mount[p] = hostPath
	}
}

// host returns where a container path lives on the host: under the mount
// that covers it, else under root (mapping it, so rewrite covers it too).
func (m *pathMap) host(containerPath string) string {
	p := path.Clean(containerPath)
	if h, ok := m.lookup(p); ok {
		return h
	}
	h := filepath.Join(m.root, filepath.FromSlash(p))
	m.add(p, h)
	return h
}

func (m *pathMap) lookup(p string) (string, bool) {
	for c := p; c != "/" && c != "."; c = path.Dir(c) {
		if h, ok := m.mount[c]; ok {
			return filepath.Join(h, strings.TrimPrefix(p, c)), true
		}
	}
	return "", false
}

// rewrite replaces every mapped container path in s (a command-line word or
// an env value) by its host path, in one pass, longest match first. A match
// must start a path (at the start of s or after a character that cannot be
// part of a path, like '=' or a space) and end one (at the end of s, a '/',
// or a non-path character), so "/out" does not rewrite "/data/out" or
// "/output".
func (m *pathMap) rewrite(s string) string {
	keys := make([]string, 0, len(m.mount))
	for k := range m.mount {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	var b strings.Builder
	for i := 0; i < len(s); {
		matched := false
		if s[i] == '/' && (i == 0 || !isPathChar(s[i-1])) {
			for _, k := range keys {
				end := i + len(k)
				if strings.HasPrefix(s[i:], k) && (end == len(s) || s[end] == '/' || !isPathChar(s[end])) {
					b.WriteString(m.mount[k])
					i = end
					matched = true
					break
				}
			}
		}
		if !matched {
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String()
}

func isPathChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '-' || c == '.' || c == '/' || c == '~'
}
