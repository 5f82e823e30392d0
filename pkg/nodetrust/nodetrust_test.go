package nodetrust_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

func serverCA(t *testing.T) (*httptest.Server, []byte) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	t.Cleanup(ts.Close)
	return ts, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
}

// The CA reaches each host's own trust store through the real update-ca-certificates: the
// host's curl, which trusts only the system store, fails before and succeeds after. A rerun
// changes nothing (the host's bundle keeps its mtime), and the machine's own store never
// changes.
func TestInstallOnRealHosts(t *testing.T) {
	ts, ca := serverCA(t)
	certs, err := nodetrust.Parse(ca)
	require.NoError(t, err)
	machineBundle := digest(t, "/etc/ssl/certs/ca-certificates.crt")

	c := simhost.NewCluster(t)
	hosts := []*simhost.Host{c.Start("master-1", "127.0.1.41"), c.Start("worker-1", "127.0.1.42")}
	var targets []nodetrust.Host
	for _, h := range hosts {
		targets = append(targets, nodetrust.Host{Name: h.Name, Addr: h.IP})
	}
	cfg := sshexec.Config{KeyFile: c.ClientKeyPath(), KnownHostsFile: c.KnownHostsPath(), Port: hosts[0].Port}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	curl := func(h *simhost.Host) error {
		cfg := cfg
		cfg.Port = h.Port
		cl, err := sshexec.Dial(ctx, h.IP, cfg)
		require.NoError(t, err)
		defer cl.Close()
		_, err = cl.Output(ctx, []string{"curl", "-fsS", ts.URL})
		return err
	}
	for i, h := range hosts {
		cfg.Port = h.Port // simhost gives each host its own port; one Install per host here
		assert.ErrorContains(t, curl(h), "SSL certificate problem", "before: the host does not trust the server")
		var log bytes.Buffer
		require.NoError(t, nodetrust.Install(ctx, targets[i:i+1], cfg, certs, &log))
		assert.Contains(t, log.String(), "artifact server CA: installed on "+h.Name)
		assert.Contains(t, log.String(), "installed on 1 hosts, already current on 0")
		assert.NoError(t, curl(h), "after: the host's system store trusts it")
		for _, f := range []string{nodetrust.Path, nodetrust.DebianPath} {
			got, err := os.ReadFile(h.File(f))
			require.NoError(t, err)
			assert.Equal(t, string(nodetrust.Encode(certs)), string(got), f)
		}
		bundle := h.File("/etc/ssl/certs/ca-certificates.crt")
		data, err := os.ReadFile(bundle)
		require.NoError(t, err)
		assert.Contains(t, string(data), strings.TrimSpace(string(ca)))
		before, err := os.Stat(bundle)
		require.NoError(t, err)

		log.Reset()
		require.NoError(t, nodetrust.Install(ctx, targets[i:i+1], cfg, certs, &log))
		assert.Equal(t, "artifact server CA (1 certificates): installed on 0 hosts, already current on 1, failed on 0\n", log.String())
		after, err := os.Stat(bundle)
		require.NoError(t, err)
		assert.Equal(t, before.ModTime(), after.ModTime(), "a rerun runs update-ca-certificates again")
	}
	assert.Equal(t, machineBundle, digest(t, "/etc/ssl/certs/ca-certificates.crt"), "the machine's own trust store changed")
	assert.NoFileExists(t, "/etc/ssl/certs/bpa-artifacts.pem")
	assert.NoFileExists(t, nodetrust.DebianPath)
	assert.NoFileExists(t, nodetrust.Path)

	// A host that is down fails the install naming it, after every other host was tried.
	hosts[1].Stop()
	cfg.Port = hosts[1].Port
	err = nodetrust.Install(ctx, targets[1:], cfg, certs, &bytes.Buffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NodeUnreachable: cannot reach 1 hosts over SSH to install the artifact server's CA")
	assert.Contains(t, err.Error(), "worker-1 (127.0.1.42)")
}

func digest(t *testing.T, file string) [32]byte {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	return sha256.Sum256(data)
}

// Parse takes certificates and nothing else; Encode gives BPA's own PEM whatever the input's
// line ends and wrapping.
func TestParse(t *testing.T) {
	_, ca := serverCA(t)
	certs, err := nodetrust.Parse(ca)
	require.NoError(t, err)
	require.Len(t, certs, 1)
	two, err := nodetrust.Parse(append(append([]byte("\n  "), ca...), ca...))
	require.NoError(t, err)
	assert.Len(t, two, 2)

	crlf := bytes.ReplaceAll(ca, []byte("\n"), []byte("\r\n"))
	got, err := nodetrust.Parse(crlf)
	require.NoError(t, err)
	assert.Equal(t, string(ca), string(nodetrust.Encode(got)))

	body := strings.TrimSpace(string(ca))
	for name, bad := range map[string]string{
		"payload after":  body + "\n$(touch /tmp/pwned)\n",
		"payload before": "$(touch /tmp/pwned)\n" + body,
		"header":         strings.Replace(body, "-----\n", "-----\nX-Run: $(id)\n\n", 1),
		"private key":    "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"not a cert":     "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
		"broken block":   "-----BEGIN CERTIFICATE-----\nAAAA\n" + body,
		"empty":          " \n",
	} {
		_, err := nodetrust.Parse([]byte(bad))
		assert.Error(t, err, name)
	}
	_, err = nodetrust.Parse(bytes.Repeat([]byte(" "), nodetrust.MaxBundle+1))
	assert.ErrorContains(t, err, "more than the")
}

// An install cut off after it wrote the files but before the trust-store tool rebuilt the
// system bundle (here the tool fails; a killed pod or a reboot is the same) is finished by the
// rerun: files that match must not make a host count as current unless the rebuild ran.
func TestInstallRerunAfterCrash(t *testing.T) {
	ts, ca := serverCA(t)
	certs, err := nodetrust.Parse(ca)
	require.NoError(t, err)
	c := simhost.NewCluster(t)
	h := c.Start("master-1", "127.0.1.43")
	cfg := sshexec.Config{KeyFile: c.ClientKeyPath(), KnownHostsFile: c.KnownHostsPath(), Port: h.Port}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	target := []nodetrust.Host{{Name: h.Name, Addr: h.IP}}

	// The session PATH looks in the host's bin first: a tool that dies before rebuilding.
	broken := filepath.Join(h.Dir(), "bin", "update-ca-certificates")
	require.NoError(t, os.WriteFile(broken, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	err = nodetrust.Install(ctx, target, cfg, certs, &bytes.Buffer{})
	assert.ErrorContains(t, err, "installing the artifact server's CA failed on 1 hosts")
	require.NoError(t, os.Remove(broken))

	var log bytes.Buffer
	require.NoError(t, nodetrust.Install(ctx, target, cfg, certs, &log))
	assert.Contains(t, log.String(), "installed on 1 hosts, already current on 0", "the cut-off install counted as done")
	cl, err := sshexec.Dial(ctx, h.IP, cfg)
	require.NoError(t, err)
	defer cl.Close()
	_, err = cl.Output(ctx, []string{"curl", "-fsS", ts.URL})
	assert.NoError(t, err, "the host's system store does not trust the server")
}
