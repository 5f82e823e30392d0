package artifacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	tus "github.com/tus/tusd/v2/pkg/handler"
)

// quota bounds the bytes the store holds, in total and per uploader (Options.QuotaTotal,
// QuotaPerUploader; 0 is unlimited). What counts:
//   - published files (.debs among them), to their uploader: exact, from meta/ at start
//     and kept in step by publish and delete, which hold the path's lock;
//   - tus uploads in progress, at the length they declared, to their uploader: the
//     uploads/*.info files, so an upload reserves its whole length from its creation until
//     it is published, refused, purged or expires, across restarts;
//   - the registry: in total, every byte under registry/; per uploader, the blobs (layers,
//     manifests) whose upload it completed first and the registry uploads it started
//     (owners/, written as the registry answers).
//
// Uploads in progress and the registry are counted from disk at start and before any
// refusal; in between their counts are upper bounds kept in memory (a new upload and every
// registry byte received are added; what ends, an upload published or purged, a blob the
// registry already had, is not taken off), so checks stay cheap and a refusal is never owed
// to that drift. A check and what it admits happen under mu, so concurrent uploads cannot
// both fit into the same room.
type quota struct {
	total, perUploader int64
	dir                string // the server's Dir
	mu                 sync.Mutex
	files              map[string]int64 // published bytes per uploader
	filesTotal         int64
	uploads            map[string]int64 // declared bytes of tus uploads in progress, an upper bound
	uploadsTotal       int64
	registry           map[string]int64 // registry bytes per uploader, an upper bound
	registryTotal      int64            // registry bytes on disk, an upper bound
	// inflight are registry bytes admitted for requests still running: a recount from disk
	// sees only what they have written so far, so it never replaces these.
	inflight      map[string]int64
	inflightTotal int64
	hooks         func() *raceHooks
}

// usage is what one uploader, or everyone, holds.
type usage struct{ files, uploads, registry int64 }

func (u usage) sum() int64 { return u.files + u.uploads + u.registry }

const (
	ownersDir = "owners"
	// registryRoot is where distribution's filesystem driver keeps its layout under registry/.
	registryRoot = "docker/registry/v2"
)

var (
	blobDigest = regexp.MustCompile(`^sha256:([0-9a-f]{64})$`)
	uploadUUID = regexp.MustCompile(`^[0-9a-fA-F-]{1,64}$`)
)

// newQuota counts what dir holds. Without limits it counts nothing: no check reads the
// counts, and the owners of registry blobs are recorded anyway, for a later start with limits.
func newQuota(dir string, total, perUploader int64) (*quota, error) {
	if total < 0 || perUploader < 0 {
		return nil, errors.New("quotas must not be negative (0 is unlimited)")
	}
	q := &quota{total: total, perUploader: perUploader, dir: dir, files: map[string]int64{}, uploads: map[string]int64{},
		registry: map[string]int64{}, inflight: map[string]int64{}, hooks: func() *raceHooks { return &noHooks }}
	if !q.limited() {
		return q, nil
	}
	if err := q.countFiles(); err != nil {
		return nil, fmt.Errorf("quota: %w", err)
	}
	return q, q.recount()
}

func (q *quota) limited() bool { return q.total > 0 || q.perUploader > 0 }

// countFiles reads the size and uploader of every published file.
func (q *quota) countFiles() error {
	root := filepath.Join(q.dir, "meta")
	return filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".json") {
			return err
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var m FileMeta
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		q.files[m.UploadedBy] += m.Size
		q.filesTotal += m.Size
		return nil
	})
}

// published moves a file's bytes from old's uploader (when it replaced old) to m's.
func (q *quota) published(old, m *FileMeta) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if old != nil {
		q.files[old.UploadedBy] -= old.Size
		q.filesTotal -= old.Size
	}
	q.files[m.UploadedBy] += m.Size
	q.filesTotal += m.Size
}

// deleted takes a deleted file's bytes off its uploader.
func (q *quota) deleted(m *FileMeta) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.files[m.UploadedBy] -= m.Size
	q.filesTotal -= m.Size
}

// recount counts from disk what is counted only approximately in between: the tus uploads
// in progress and the registry. q.mu is held.
func (q *quota) recount() error {
	q.countUploads()
	return q.recountRegistry()
}

// countUploads sums the declared lengths of the tus uploads in progress per uploader.
func (q *quota) countUploads() {
	q.uploads, q.uploadsTotal = map[string]int64{}, 0
	infos, _ := filepath.Glob(filepath.Join(q.dir, "uploads", "*.info"))
	for _, f := range infos {
		b, err := os.ReadFile(f)
		var info tus.FileInfo
		if err != nil || json.Unmarshal(b, &info) != nil {
			continue // finished or purged since listed
		}
		q.uploads[info.MetaData["uploadedBy"]] += info.Size
		q.uploadsTotal += info.Size
	}
}

// usage is what user and everyone hold, as counted. q.mu is held.
func (q *quota) usage(user string) (mine, all usage) {
	mine.uploads, all.uploads = q.uploads[user], q.uploadsTotal
	mine.files, all.files = q.files[user], q.filesTotal
	mine.registry, all.registry = q.registry[user]+q.inflight[user], q.registryTotal+q.inflightTotal
	return mine, all
}

// admit is nil when add more bytes of user's fit the quotas, else the refusal naming the
// quota; the caller counts what it admits. q.mu is held.
func (q *quota) admit(user string, add int64) error {
	if !q.limited() {
		return nil
	}
	err := q.fits(user, add)
	if err != nil { // the counts may have drifted up: count again, then decide
		if rerr := q.recount(); rerr != nil {
			return fmt.Errorf("quota: %w", rerr)
		}
		err = q.fits(user, add)
	}
	return err
}

func (q *quota) fits(user string, add int64) error {
	mine, all := q.usage(user)
	switch {
	case q.perUploader > 0 && mine.sum()+add > q.perUploader:
		return q.refusal(fmt.Sprintf("the per-uploader quota of %s (bpa serve --quota-per-uploader) for %s", HumanBytes(q.perUploader), user), add, mine)
	case q.total > 0 && all.sum()+add > q.total:
		return q.refusal(fmt.Sprintf("the store's total quota of %s (bpa serve --quota-total)", HumanBytes(q.total)), add, all)
	}
	return nil
}

// quotaError is a refusal for want of room; it answers 507 Insufficient Storage, as the
// request itself is well-formed (413, Request Entity Too Large, is for one upload over
// --max-upload-size).
type quotaError struct{ msg string }

func (e *quotaError) Error() string { return e.msg }

func (q *quota) refusal(which string, add int64, u usage) error {
	return &quotaError{fmt.Sprintf("Insufficient Storage: storing %s more would exceed %s: %s in use "+
		"(published files %s, uploads in progress %s, registry %s); delete what is no longer needed, or ask the site admin for more",
		HumanBytes(add), which, HumanBytes(u.sum()), HumanBytes(u.files), HumanBytes(u.uploads), HumanBytes(u.registry))}
}

// quotaStore is the tus store, creating an upload only when its declared length fits:
// the check and the creation of its .info (the reservation) happen under q.mu.
type quotaStore struct {
	tus.DataStore
	q *quota
}

func (s quotaStore) NewUpload(ctx context.Context, info tus.FileInfo) (tus.Upload, error) {
	user := info.MetaData["uploadedBy"]
	lockNoting(&s.q.mu, "quota", s.q.hooks)
	defer s.q.mu.Unlock()
	if err := s.q.admit(user, info.Size); err != nil {
		var qe *quotaError
		if errors.As(err, &qe) {
			return nil, tusError("ERR_QUOTA", qe.msg, http.StatusInsufficientStorage)
		}
		return nil, err
	}
	s.q.hooks().admitted(user)
	u, err := s.DataStore.NewUpload(ctx, info)
	if err == nil {
		s.q.uploads[user] += info.Size
		s.q.uploadsTotal += info.Size
	}
	return u, err
}

// take admits add more registry bytes of a request of user's, counted in flight.
func (q *quota) take(user string, add int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.admit(user, add); err != nil {
		return err
	}
	q.inflight[user] += add
	q.inflightTotal += add
	return nil
}

// settle moves what a finished request was admitted from in flight to the registry's count,
// whether or not the registry kept it (the next recount finds out).
func (q *quota) settle(user string, n int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inflight[user] -= n
	q.inflightTotal -= n
	q.registry[user] += n
	q.registryTotal += n
}

// recountRegistry counts the registry from disk: all of registry/, and per uploader the
// blobs and uploads owners/ attributes to it that are still there. q.mu is held.
func (q *quota) recountRegistry() error {
	total, err := du(filepath.Join(q.dir, "registry"))
	if err != nil {
		return err
	}
	per := map[string]int64{}
	v2 := filepath.Join(q.dir, "registry", registryRoot)
	blobs := filepath.Join(q.dir, ownersDir, "blobs")
	entries, _ := os.ReadDir(blobs)
	for _, e := range entries {
		hex := e.Name()
		owner, err := os.ReadFile(filepath.Join(blobs, hex))
		st, serr := os.Stat(filepath.Join(v2, "blobs", "sha256", hex[:min(2, len(hex))], hex, "data"))
		if err != nil || serr != nil {
			_ = os.Remove(filepath.Join(blobs, hex)) // collected since
			continue
		}
		per[string(owner)] += st.Size()
	}
	uploads := filepath.Join(q.dir, ownersDir, "uploads")
	entries, _ = os.ReadDir(uploads)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(uploads, e.Name()))
		owner, repo, _ := strings.Cut(string(b), "\n")
		size, derr := du(filepath.Join(v2, "repositories", filepath.FromSlash(repo), "_uploads", e.Name()))
		if err != nil || derr != nil {
			_ = os.Remove(filepath.Join(uploads, e.Name())) // completed or purged since
			continue
		}
		per[owner] += size
	}
	q.registry, q.registryTotal = per, total
	return nil
}

// du is the size of the regular files under dir.
func du(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// recordOwner writes that user completed the blob or started the upload the registry just
// answered for (201 with Docker-Content-Digest, 202 with Docker-Upload-UUID), unless an
// owner is on record already: the first to store a blob is charged for it.
func (q *quota) recordOwner(user, repo string, status int, h http.Header) {
	var file, content string
	switch m := blobDigest.FindStringSubmatch(h.Get("Docker-Content-Digest")); {
	case status == http.StatusCreated && m != nil:
		file, content = filepath.Join(q.dir, ownersDir, "blobs", m[1]), user
	case status == http.StatusAccepted && uploadUUID.MatchString(h.Get("Docker-Upload-UUID")) && !strings.Contains(repo, ".."):
		file, content = filepath.Join(q.dir, ownersDir, "uploads", h.Get("Docker-Upload-UUID")), user+"\n"+repo
	default:
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o750); err != nil {
		return
	}
	if f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640); err == nil {
		_, _ = io.WriteString(f, content)
		_ = f.Close()
	}
}

// serveRegistryWrite passes a registry write of user's to next, admitting its body's
// bytes as they arrive (all of a declared Content-Length first, so an upload that cannot
// fit is refused before any byte of it is read), and records what user came to own.
func (q *quota) serveRegistryWrite(w http.ResponseWriter, r *http.Request, user, repo string, next http.HandlerFunc) {
	var paid int64
	switch {
	case r.ContentLength > 0:
		paid = r.ContentLength
	case r.Method == http.MethodPost && r.URL.Query().Get("mount") == "":
		paid = 1 // a blob upload starts: refused when not one more byte fits
	}
	if paid > 0 {
		if err := q.take(user, paid); err != nil {
			http.Error(w, err.Error(), statusOf(err))
			return
		}
	}
	body := &quotaBody{ReadCloser: r.Body, q: q, user: user, paid: paid}
	defer func() { q.settle(user, body.paid) }()
	r.Body = body
	qw := &quotaWriter{ResponseWriter: w, body: body}
	next(qw, r)
	q.recordOwner(user, repo, qw.status, w.Header())
}

func statusOf(err error) int {
	var qe *quotaError
	if errors.As(err, &qe) {
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// quotaBody admits each byte read beyond those paid for up front; once one does not fit,
// reading fails, and quotaWriter answers with the refusal instead of the registry's error.
type quotaBody struct {
	io.ReadCloser
	q          *quota
	user       string
	paid, read int64
	err        error
}

func (b *quotaBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if extra := b.read - b.paid; extra > 0 {
		if b.err = b.q.take(b.user, extra); b.err != nil {
			return 0, b.err
		}
		b.paid = b.read
	}
	return n, err
}

type quotaWriter struct {
	http.ResponseWriter
	body   *quotaBody
	status int
}

func (w *quotaWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if w.body.err == nil {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	h := w.ResponseWriter.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.ResponseWriter.WriteHeader(statusOf(w.body.err))
	_, _ = io.WriteString(w.ResponseWriter, w.body.err.Error()+"\n")
}

func (w *quotaWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.err != nil {
		return len(b), nil // the registry's own error, replaced
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *quotaWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// HumanBytes writes n in binary units, e.g. 1.5 GiB.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
