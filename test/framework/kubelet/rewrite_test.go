package kubelet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestRewrite(t *testing.T) {
	pm := newPathMap("/h/fs")
	pm.add("/etc/creds", "/h/volumes/creds")
	pm.add("/etc/creds/ca", "/h/volumes/ca") // a longer mount wins
	assert.Equal(t, "/h/fs/tmp/out", pm.host("/tmp/out"))
	assert.Equal(t, "/h/volumes/creds/token", pm.host("/etc/creds/token"), "paths under a mount resolve through it")

	for in, want := range map[string]string{
		"/etc/creds":                      "/h/volumes/creds",
		"/etc/creds/token":                "/h/volumes/creds/token",
		"/etc/creds/ca/ca.crt":            "/h/volumes/ca/ca.crt",
		"--token-file=/etc/creds/token":   "--token-file=/h/volumes/creds/token",
		"cat /tmp/out; echo /tmp/out>x":   "cat /h/fs/tmp/out; echo /h/fs/tmp/out>x",
		`"/tmp/out"`:                      `"/h/fs/tmp/out"`,
		"/tmp/output":                     "/tmp/output",
		"/tmp/out.txt":                    "/tmp/out.txt",
		"/data/tmp/out":                   "/data/tmp/out",
		"/etc/credsx/token":               "/etc/credsx/token",
		"https://example.invalid/tmp/out": "https://example.invalid/tmp/out",
		"no paths here":                   "no paths here",
	} {
		assert.Equal(t, want, pm.rewrite(in), in)
	}
}

func TestEmissaryArgv(t *testing.T) {
	argv, err := emissaryArgv(&corev1.Container{
		Command: []string{"/var/run/argo/argoexec", "emissary", "--loglevel", "info", "--", "bpa", "step"},
		Args:    []string{"--x", "1"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"bpa", "step", "--x", "1"}, argv)

	_, err = emissaryArgv(&corev1.Container{Command: []string{"/var/run/argo/argoexec", "resource", "create"}})
	assert.ErrorContains(t, err, "not simulated")
}

func TestResolve(t *testing.T) {
	k := &Kubelet{opts: Options{Executables: map[string]string{
		"bpa":                    "/build/bpa",
		"quay.io/x/kubespray":    "/build/fake-kubespray",
		"/usr/local/bin/special": "/build/special",
	}}}
	_, argv, err := k.resolve("quay.io/x/bpa:v1", []string{"/usr/bin/bpa", "step", "a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"/build/bpa", "step", "a"}, argv, "command base name")

	_, argv, err = k.resolve("quay.io/x/kubespray:v2.25@sha256:abc", []string{"ansible-playbook", "cluster.yml"})
	require.NoError(t, err)
	assert.Equal(t, []string{"/build/fake-kubespray", "ansible-playbook", "cluster.yml"}, argv, "image stand-in gets the whole command")

	_, _, err = k.resolve("busybox", []string{"rm", "-rf", "/"})
	assert.ErrorContains(t, err, "kubelet.Options.Executables", "unmapped commands never run host binaries")
}

func TestTerminationMessage(t *testing.T) {
	assert.Equal(t, "last", terminationMessage("/nonexistent", "first\nlast\n\n"))
	assert.Equal(t, "", terminationMessage("/nonexistent", ""))
}
