package artifacts

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Client talks to a `bpa serve`. Its HTTP client carries the caller's credentials.
type Client struct {
	// URL is the server's base URL, e.g. https://bpa-artifacts.bpa-system.svc:8443.
	URL  string
	HTTP *http.Client
	// StateDir keeps one small file per unfinished upload (its tus URL), so the same push
	// run again resumes where the server stopped receiving.
	StateDir string
	// Progress, when set, is called as bytes of a push are sent (done, total).
	Progress func(done, total int64)
	// Resuming, when set, is called when a push goes on from where an earlier one stopped.
	Resuming func(offset, total int64)
}

// uploadState is what StateDir keeps for an upload in progress.
type uploadState struct {
	Location string `json:"location"` // path of the tus upload on the server
	SHA256   string `json:"sha256,omitempty"`
	// Deferred: the sha256 is declared when the upload completes, not at creation.
	Deferred bool `json:"deferred,omitempty"`
}

// ErrChecksum is returned when the server refused a push because the bytes it received
// do not hash to what the client declared.
var ErrChecksum = errors.New("checksum mismatch")

var errGone = errors.New("upload gone")

// Push uploads file to path (dl.k8s.io/...), resuming an earlier interrupted push of the
// same file to the same path and server.
func (c *Client) Push(ctx context.Context, file, path string) (*FileMeta, error) {
	if _, err := CleanPath(path); err != nil {
		return nil, err
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	abs, _ := filepath.Abs(file)
	key := sha256.Sum256([]byte(strings.Join([]string{c.URL, path, abs, strconv.FormatInt(st.Size(), 10), st.ModTime().String()}, "\x00")))
	stateFile := filepath.Join(c.StateDir, hex.EncodeToString(key[:16])+".json")

	offset := int64(-1)
	var state uploadState
	if b, err := os.ReadFile(stateFile); err == nil && json.Unmarshal(b, &state) == nil {
		if offset, err = c.offset(ctx, state.Location); errors.Is(err, errGone) || offset >= st.Size() {
			// Finished, discarded or the server's store reset; or every byte arrived but the
			// upload was never completed (it is purged): start again.
			offset = -1
		} else if err != nil {
			return nil, fmt.Errorf("resume %s: %w", file, err)
		} else if c.Resuming != nil {
			c.Resuming(offset, st.Size())
		}
	}
	deferred := st.Size() > preHashMax
	if offset < 0 {
		// A small file is hashed first and its sum declared at creation (one request, as
		// any tus client does). A large one is hashed while it is sent and its sum declared
		// on the request that completes it: hashing first would read it twice in a row.
		state = uploadState{Deferred: deferred}
		if !deferred {
			if state.SHA256, err = fileSHA256(file); err != nil {
				return nil, err
			}
		}
		if state.Location, err = c.create(ctx, path, state.SHA256, st.Size(), filepath.Base(file)); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
			return nil, err
		}
		b, _ := json.Marshal(state)
		if err := os.WriteFile(stateFile, b, 0o600); err != nil {
			return nil, err
		}
		offset = 0
	}
	// The last request (all of a small or declared upload, the last tailSize bytes of a
	// deferred one) waits for the sum; the bytes before it go while it is computed.
	last := offset
	var sum <-chan hashResult
	if state.Deferred {
		last = max(offset, st.Size()-tailSize)
		ch := make(chan hashResult, 1)
		go func() { s, err := fileSHA256(file); ch <- hashResult{s, err} }()
		sum = ch
	}
	if last > offset {
		if err := c.patch(ctx, f, state.Location, offset, last, st.Size(), "", stateFile); err != nil {
			return nil, err
		}
	}
	declare := ""
	if sum != nil {
		r := <-sum
		if r.err != nil {
			return nil, r.err
		}
		declare = r.sum
	}
	if err := c.patch(ctx, f, state.Location, last, st.Size(), st.Size(), declare, stateFile); err != nil {
		return nil, err
	}
	_ = os.Remove(stateFile)
	return c.Stat(ctx, path)
}

const (
	// preHashMax is the largest file whose sha256 is declared at creation.
	preHashMax = 4 << 20
	// tailSize is how much of a deferred upload the completing request carries.
	tailSize = 64 << 10
	// DeclareHeader carries the whole file's sha256 (hex) on the request that completes an
	// upload created with the metadata key sha256-deferred.
	DeclareHeader = "Bpa-Sha256"
)

type hashResult struct {
	sum string
	err error
}

// patch sends bytes [from, to) of f (tus PATCH), with the deferred sha256 when declare is
// set.
func (c *Client) patch(ctx context.Context, f *os.File, location string, from, to, size int64, declare, stateFile string) error {
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	var body io.Reader = f
	if to < size {
		body = io.LimitReader(f, to-from)
	}
	if c.Progress != nil {
		body = &progressReader{r: body, done: from, total: size, report: c.Progress}
	}
	req, err := c.request(ctx, http.MethodPatch, location, body)
	if err != nil {
		return err
	}
	req.ContentLength = to - from
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Offset", strconv.FormatInt(from, 10))
	if declare != "" {
		req.Header.Set(DeclareHeader, declare)
	}
	resp, err := c.do(req, http.StatusNoContent)
	if err != nil {
		refused := resp != nil && resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict
		if refused {
			_ = os.Remove(stateFile) // refused for good: a rerun must start over
		}
		if resp != nil && resp.StatusCode == checksumMismatch {
			return fmt.Errorf("%s: %w: %v", f.Name(), ErrChecksum, err)
		}
		if refused {
			return fmt.Errorf("push %s refused: %w", f.Name(), err)
		}
		return fmt.Errorf("push %s interrupted at byte %d of %d (run the same command again to resume): %w",
			f.Name(), from, size, err)
	}
	resp.Body.Close()
	return nil
}

// offset asks the server how much of an upload it has (tus HEAD).
func (c *Client) offset(ctx context.Context, location string) (int64, error) {
	req, err := c.request(ctx, http.MethodHead, location, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(req, http.StatusOK)
	if resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone) {
		return 0, errGone
	} else if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
}

// create starts a tus upload and returns its path on the server.
func (c *Client) create(ctx context.Context, path, sum string, size int64, name string) (string, error) {
	req, err := c.request(ctx, http.MethodPost, "/files/", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Upload-Length", strconv.FormatInt(size, 10))
	md := map[string]string{"path": path, "sha256": sum, "filename": name}
	if sum == "" {
		md = map[string]string{"path": path, deferredKey: "1", "filename": name}
	}
	req.Header.Set("Upload-Metadata", EncodeMetadata(md))
	resp, err := c.do(req, http.StatusCreated)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Path == "" {
		return "", fmt.Errorf("server gave no upload Location")
	}
	// Only the path is kept: the server may be reached under another address next time.
	return loc.Path, nil
}

// EncodeMetadata is tus's Upload-Metadata encoding: key base64(value), comma-separated.
func EncodeMetadata(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+" "+base64.StdEncoding.EncodeToString([]byte(v)))
	}
	return strings.Join(parts, ",")
}

// Stat returns one file's metadata.
func (c *Client) Stat(ctx context.Context, path string) (*FileMeta, error) {
	var m FileMeta
	return &m, c.getJSON(ctx, "/api/v1/files/"+path, &m)
}

// List returns the files whose path starts with prefix.
func (c *Client) List(ctx context.Context, prefix string) ([]FileMeta, error) {
	var l []FileMeta
	return l, c.getJSON(ctx, "/api/v1/files?prefix="+url.QueryEscape(prefix), &l)
}

// Remove deletes one file.
func (c *Client) Remove(ctx context.Context, path string) error {
	req, err := c.request(ctx, http.MethodDelete, "/api/v1/files/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func (c *Client) getJSON(ctx context.Context, p string, v any) error {
	req, err := c.request(ctx, http.MethodGet, p, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(v)
}

func (c *Client) request(ctx context.Context, method, p string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+p, body)
	if err == nil {
		req.Header.Set("Tus-Resumable", "1.0.0")
	}
	return req, err
}

// StatusError is an answer other than the one a request wanted. Its Error repeats the
// server's status line and message, for an uploader talking to their own server; a caller
// that must not repeat what a server says (the offline pre-flight) uses Method, Path and
// Code only.
type StatusError struct {
	Method, Path string
	Code         int
	// Status and Message are the server's own words.
	Status, Message string
	// RetryAfter is the answer's Retry-After header, if any.
	RetryAfter string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %s: %s", e.Method, e.Path, e.Status, e.Message)
}

// retryAfter is how long the server asked to wait (Retry-After in seconds), else def, at
// most limit: a server's word does not hold a step for long.
func (e *StatusError) retryAfter(def, limit time.Duration) time.Duration {
	d := def
	if n, err := strconv.Atoi(e.RetryAfter); err == nil && n >= 0 {
		d = time.Duration(n) * time.Second
	}
	return min(d, limit)
}

// do sends req and fails unless the status is want, with the server's message (a
// *StatusError). The caller closes the body of a successful response.
func (c *Client) do(req *http.Request, want int) (*http.Response, error) {
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return resp, &StatusError{Method: req.Method, Path: req.URL.Path, Code: resp.StatusCode, Status: resp.Status, Message: strings.TrimSpace(string(msg)),
			RetryAfter: resp.Header.Get("Retry-After")}
	}
	return resp, nil
}

type progressReader struct {
	r           io.Reader
	done, total int64
	report      func(done, total int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	p.report(p.done, p.total)
	return n, err
}

// PutBackup stores the snapshot file as name under namespace/cluster on the server, with
// meta (JSON, the writer's record of it) beside it. sum is the file's hex sha256, which the
// server checks against what it received. A server too busy for it now (503: an S3 store
// takes a few large uploads at once) is asked again after its Retry-After, within ctx.
func (c *Client) PutBackup(ctx context.Context, namespace, cluster, name, file, sum string, meta []byte) (*BackupMeta, error) {
	for {
		m, err := c.putBackup(ctx, namespace, cluster, name, file, sum, meta)
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusServiceUnavailable {
			return m, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (and then: %w)", err, ctx.Err())
		case <-time.After(se.retryAfter(30*time.Second, 2*time.Minute)):
		}
	}
}

func (c *Client) putBackup(ctx context.Context, namespace, cluster, name, file, sum string, meta []byte) (*BackupMeta, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	req, err := c.request(ctx, http.MethodPut, BackupPath(namespace, cluster, name), f)
	if err != nil {
		return nil, err
	}
	req.ContentLength = st.Size()
	req.Header.Set(HeaderContentSHA256, sum)
	if len(meta) > 0 {
		req.Header.Set(HeaderBackupMeta, string(meta))
	}
	resp, err := c.do(req, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m BackupMeta
	return &m, json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&m)
}

// ListBackups lists a cluster's snapshots on the server, oldest first.
func (c *Client) ListBackups(ctx context.Context, namespace, cluster string) ([]BackupMeta, error) {
	var l []BackupMeta
	return l, c.getJSON(ctx, BackupPath(namespace, cluster, ""), &l)
}

// RemoveBackup deletes one snapshot.
func (c *Client) RemoveBackup(ctx context.Context, namespace, cluster, name string) error {
	req, err := c.request(ctx, http.MethodDelete, BackupPath(namespace, cluster, name), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// GetBackup downloads one snapshot into file, checking its sha256 against want.
func (c *Client) GetBackup(ctx context.Context, namespace, cluster, name, file, want string) error {
	req, err := c.request(ctx, http.MethodGet, BackupPath(namespace, cluster, name), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != want {
		err = fmt.Errorf("%w: backup %s downloaded with sha256 %s, not %s", ErrChecksum, name, hex.EncodeToString(h.Sum(nil)), want)
	}
	if err != nil {
		_ = os.Remove(file)
	}
	return err
}

// NewTokenClient is a client of the server at url for a step: it trusts only ca (the
// server's artifactServers entry's caBundle), sends the ServiceAccount token in
// tokenFile (projected for the server's audience), and follows no redirect, so the token
// goes to the admin's server only.
func NewTokenClient(url string, ca []*x509.Certificate, tokenFile string) (*Client, error) {
	if url == "" {
		return nil, errors.New("no server: the site policy names none")
	}
	if len(ca) == 0 {
		return nil, errors.New("no CA: the server must be one of the policy's artifactServers, with its caBundle")
	}
	pool := x509.NewCertPool()
	for _, c := range ca {
		pool.AddCert(c)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("this step's token for the server: %w", err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &Client{URL: url, HTTP: &http.Client{
		Transport:     bearer{token: strings.TrimSpace(string(token)), next: tr},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
