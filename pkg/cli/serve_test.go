package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// config/serve mounts --apt-signing-key from an optional Secret: without the Secret the file
// is missing and /apt/ is off, said on stderr; any other state of the file is left for
// artifacts.NewServer to judge, so a broken key stops the server rather than hiding.
func TestAptSigningKey(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "key.asc")
	require.NoError(t, os.WriteFile(present, []byte("not even a key"), 0o600))
	for _, c := range []struct {
		name, path, want, said string
	}{
		{name: "no flag", path: "", want: ""},
		{name: "the Secret is absent", path: filepath.Join(dir, "missing.asc"), want: "",
			said: "bpa serve: " + filepath.Join(dir, "missing.asc") + " does not exist, the apt repository is off\n"},
		{name: "the file is there", path: present, want: present},
		{name: "the path cannot be a file (not a directory on the way): kept, for NewServer to refuse", path: filepath.Join(present, "key.asc"), want: filepath.Join(present, "key.asc")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, c.want, aptSigningKey(c.path, &stderr))
			assert.Equal(t, c.said, stderr.String())
		})
	}
}

// Issue 26, item 7: a request body that stops moving is cut after the stall timeout, one that
// keeps moving is not, however long it takes in all (a multi-GiB tus PATCH on a slow link).
func TestServeStallTimeout(t *testing.T) {
	const stall = 300 * time.Millisecond
	got := make(chan error, 1)
	h := progressDeadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		got <- err
	}), stall)
	ts := httptest.NewUnstartedServer(h)
	ts.Config = (serveLimits{stall: stall, idle: time.Minute}).server(h)
	ts.Start()
	defer ts.Close()
	send := func(pause time.Duration, chunks int) error {
		pr, pw := io.Pipe()
		go func() {
			for range chunks {
				_, _ = pw.Write([]byte("chunk"))
				time.Sleep(pause)
			}
			_ = pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPatch, ts.URL, pr)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		return <-got
	}
	assert.NoError(t, send(stall/3, 8), "moving for %s in all, never stalled", 8*stall/3)
	assert.ErrorContains(t, send(3*stall, 2), "timeout", "stalled for longer than the stall timeout")
}

// --quota-total and --quota-per-uploader take Kubernetes quantities of whole bytes.
func TestBytesFlag(t *testing.T) {
	for in, want := range map[string]int64{"90Gi": 90 << 30, "1.5Gi": 3 << 29, "500M": 500e6, "0": 0, "1e9": 1e9} {
		var n int64
		require.NoError(t, bytesFlag{&n}.Set(in), in)
		assert.Equal(t, want, n, in)
	}
	for in, msg := range map[string]string{"-1Gi": "non-negative", "500m": "whole", "ninety": "want a quantity such as 90Gi"} {
		var n int64
		assert.ErrorContains(t, bytesFlag{&n}.Set(in), msg, in)
	}
	n := int64(90 << 30)
	assert.Equal(t, "90Gi", bytesFlag{&n}.String())
}

// An S3 option without --backup-s3-endpoint is a mistake, not a reason to keep the
// snapshots on the volume quietly: bpa serve does not start.
func TestServeBackupS3Flags(t *testing.T) {
	for _, args := range [][]string{
		{"--backup-s3-bucket=b"},
		{"--backup-s3-path-style"},
		{"--backup-s3-secret-access-key-file=/etc/s3/secret"},
	} {
		cmd := NewRootCommand()
		cmd.SetArgs(append([]string{"serve", "--plain-http"}, args...))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		assert.ErrorContains(t, cmd.Execute(), "need --backup-s3-endpoint", args)
	}
}
