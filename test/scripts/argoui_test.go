package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// uiCheckout is a copy of the scripts hack/build-tools.sh runs for Argo's web UI, with an
// empty bin/ of its own (the repository's bin/argo-ui stays untouched), and a node that
// says v20, so that only GitHub can be what is missing.
func uiCheckout(t *testing.T) (dir string) {
	root, err := rig.RepoRoot()
	require.NoError(t, err)
	dir = t.TempDir()
	for _, f := range []string{"hack/build-tools.sh", "hack/logged.sh", "hack/deps.sh",
		"hack/tools/argo/go.mod", "hack/tools/argo/go.sum", "hack/tools/argo/tools.go"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), data, 0o755))
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "stubs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stubs", "node"), []byte("#!/bin/sh\necho v20.0.0\n"), 0o755))
	return dir
}

// buildTools runs `hack/build-tools.sh TOOLS...` in dir on a machine where github.com cannot
// be reached (git's own url.<base>.insteadOf, from the environment, sends it to a closed
// port) and BPA_ARGO_UI_TARBALL is unset; env is added to the environment.
func buildTools(t *testing.T, dir string, env []string, tools ...string) (string, int) {
	cmd := exec.Command(filepath.Join(dir, "hack", "build-tools.sh"), tools...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BPA_") && !strings.HasPrefix(kv, "GIT_CONFIG_") && !strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Join(dir, "stubs")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url.http://127.0.0.1:1/.insteadOf", "GIT_CONFIG_VALUE_0=https://github.com/")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return string(out), code
}

// Issue 27, item 8: without GitHub and without BPA_ARGO_UI_TARBALL, the UI build says in one
// line what failed and what to set, before it builds anything else (the tools before it in
// the list too); with BPA_UI_OPTIONAL (make demo, make test) it goes on without the UI,
// saying so; and the UI scenario's reason is that line. Before: yarn failed after the other builds
// with git's error, and make demo stopped there.
func TestArgoUIWithoutGitHub(t *testing.T) {
	dir := uiCheckout(t)
	const hint = `^argo-ui v3\.7\.18: cannot fetch argoproj/argo-ui from GitHub \(git ls-remote: unable to access 'http://127\.0\.0\.1:1/argoproj/argo-ui\.git/': [^\n]*\): ` +
		`set BPA_ARGO_UI_TARBALL=/path/to/argo-ui-54f36c7\.tgz \(argoproj/argo-ui at 54f36c7: git archive --prefix=package/ 54f36c7 \| gzip, on a machine that reaches GitHub\)\n`
	bin := filepath.Join(dir, "bin")

	out, code := buildTools(t, dir, nil, "argo-crds", "argo-ui")
	assert.Equal(t, 1, code, out)
	assert.Regexp(t, hint+`$`, out, "one line: what failed and what to set")
	assert.NoDirExists(t, filepath.Join(bin, "argo-crds"), "nothing built before it says so")
	line, err := os.ReadFile(filepath.Join(bin, "argo-ui.unavailable"))
	require.NoError(t, err)
	assert.Equal(t, out, string(line))
	assert.NoDirExists(t, filepath.Join(bin, "argo-ui"))
	assert.Equal(t, strings.TrimSpace(out), rig.ArgoUIMissing(bin), "the UI scenario fails with the same line")

	out, code = buildTools(t, dir, []string{"BPA_UI_OPTIONAL=1"}, "argo-ui")
	assert.Equal(t, 0, code, out)
	assert.Regexp(t, hint+`argo-ui v3\.7\.18: going on without Argo's web UI \(BPA_UI_OPTIONAL\): argo server will serve its API and a page saying this\n$`, out)
	assert.Equal(t, strings.TrimSpace(strings.SplitAfter(out, "\n")[0]), rig.ArgoUIMissing(bin))
}

// Without the build's line, the UI scenario says what to run; with the UI built, nothing is missing.
func TestArgoUIMissingReasons(t *testing.T) {
	bin := t.TempDir()
	assert.Contains(t, rig.ArgoUIMissing(bin), "Argo's web UI was not built (bin/argo-ui/index.html missing): run hack/build-tools.sh argo-ui argo")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "argo-ui.unavailable"), []byte("argo-ui v3.7.18: why\n"), 0o644))
	assert.Equal(t, "argo-ui v3.7.18: why", rig.ArgoUIMissing(bin))
	require.NoError(t, os.MkdirAll(filepath.Join(bin, "argo-ui"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(bin, "argo-ui", "index.html"), nil, 0o644))
	assert.Empty(t, rig.ArgoUIMissing(bin), "built: a stale line is not read")
}
