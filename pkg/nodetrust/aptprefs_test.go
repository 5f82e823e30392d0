package nodetrust_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
)

// Issue 26, item 1: with the preferences install-software writes, the real apt takes from
// the artifact server's repository only the packages the Software names: an uploaded bash
// of a higher version does not outrank the OS archive's, and a package no Software names
// (a would-be dependency) is not installable from it at all. The repositories are flat, as
// the server's is, with the server's Release fields.
func TestAptPreferencesWithRealApt(t *testing.T) {
	apt, _ := aptRoot(t, "", pkg("bash", "5.2.15-2")+pkg("curl", "7.88.1-10"),
		pkg("bash", "99.0")+pkg("site-tool", "1.0-1")+pkg("evil-dep", "1.0")+pkg("curl", "7.88.1-99"), "curl", "site-tool")
	candidate := regexp.MustCompile(`Candidate: (\S+)`)
	for name, want := range map[string]string{
		"bash":      "5.2.15-2",  // not named: the server's higher version is never a candidate
		"evil-dep":  "(none)",    // not named, only on the server: not installable at all
		"site-tool": "1.0-1",     // named: from the server
		"curl":      "7.88.1-99", // named: the higher version wins, as between any sources
	} {
		m := candidate.FindStringSubmatch(apt("apt-cache", "policy", name))
		require.NotNil(t, m, name)
		assert.Equal(t, want, m[1], name)
	}

	for _, bad := range []string{"a\nPin-Priority: 1001", "*", "Bash", "x"} {
		_, err := nodetrust.AptPreferences([]string{bad})
		assert.ErrorContains(t, err, "not a Debian package name", "%q", bad)
	}
}

func pkg(name, version string) string {
	return fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: amd64\nFilename: ./%s.deb\nSize: 1\nDescription: test\n\n", name, version, name)
}

// aptRoot is a root for the machine's real apt: dpkg status, an OS archive and the artifact
// server's flat repository (each a Packages index, with the Release fields of their origin),
// and the preferences install-software writes for names; updated, so apt knows both. It
// returns a runner of apt commands in that root, which fails the test when one fails, and
// one that returns the failure.
func aptRoot(t *testing.T, status, archive, bpa string, names ...string) (apt func(cmd string, args ...string) string, try func(cmd string, args ...string) (string, error)) {
	t.Helper()
	if _, err := exec.LookPath("apt-cache"); err != nil {
		t.Fatalf("these tests run the real apt (Debian: apt): %v", err)
	}
	dir := t.TempDir()
	repo := func(name, origin, packages string) string {
		d := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "Packages"), []byte(packages), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "Release"), []byte("Origin: "+origin+"\nLabel: "+origin+"\n"), 0o644))
		return "Types: deb\nURIs: file://" + d + "/\nSuites: ./\nTrusted: yes\n"
	}
	root := filepath.Join(dir, "root")
	for _, d := range []string{"etc/apt/sources.list.d", "etc/apt/preferences.d", "var/lib/apt/lists/partial", "var/cache/apt/archives/partial", "var/lib/dpkg"} {
		require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), []byte(status), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/apt/sources.list.d/debian.sources"), []byte(repo("archive", "Debian", archive)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/apt/sources.list.d/bpa-artifacts.sources"), []byte(repo("bpa", "BPA", bpa)), 0o644))
	prefs, err := nodetrust.AptPreferences(names)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/apt/preferences.d/bpa-artifacts.pref"), []byte(prefs), 0o644))
	try = func(cmd string, args ...string) (string, error) {
		out, err := exec.Command(cmd, append([]string{"-o", "Dir=" + root, "-o", "Dir::State::status=" + root + "/var/lib/dpkg/status",
			"-o", "APT::Architecture=amd64", "-o", "Debug::NoLocking=1"}, args...)...).CombinedOutput()
		return string(out), err
	}
	apt = func(cmd string, args ...string) string {
		out, err := try(cmd, args...)
		require.NoError(t, err, out)
		return out
	}
	apt("apt-get", "update")
	return apt, try
}
