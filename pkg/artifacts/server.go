package artifacts

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem" // registers the driver
	"github.com/sirupsen/logrus"
	"github.com/tus/tusd/v2/pkg/filestore"
	tus "github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	"golang.org/x/exp/slog"
	"k8s.io/apiserver/pkg/authentication/user"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// MaxMetadata bounds the Upload-Metadata header: path, sha256 and a file name fit in
	// far less, and tusd would otherwise keep whatever a client sends in every .info file.
	MaxMetadata = 4096
	// DefaultMaxSize bounds one upload (OS images are a few GiB).
	DefaultMaxSize = 64 << 30
	// userHeader carries the authenticated user from the auth check to tusd's creation
	// hook. Any value a client sends is deleted first.
	userHeader = "X-Bpa-Authenticated-User"
	// overrideHeader tells tusd's hooks that the caller holds VerbOverride on the upload's
	// path. Any value a client sends is deleted first.
	overrideHeader = "X-Bpa-Override"
	// checksumMismatch is the status the tus checksum extension uses for a bad checksum.
	checksumMismatch = 460
	// deferredKey in Upload-Metadata, instead of sha256, declares the sum at the end.
	deferredKey = "sha256-deferred"
)

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Options configure a Server.
type Options struct {
	// Dir holds everything, so a restart on the same volume resumes uploads:
	// uploads/ (tus, in progress), files/ (served), meta/ (one JSON per file), registry/.
	Dir  string
	Auth *Auth
	// MaxSize bounds one upload; 0 means DefaultMaxSize.
	MaxSize int64
	// URL is the server's address as nodes reach it (for the OS image URLs it shows);
	// empty means the address each request came to.
	URL string
	// Status reads Provisionings and Softwares for the status endpoint; nil disables it.
	Status client.Reader
	// UploadTTL is how long an unfinished upload is kept after its last byte arrived;
	// 0 means DefaultUploadTTL.
	UploadTTL time.Duration
	// AptSigningKey is the file of an armored, unencrypted OpenPGP private key that signs
	// the apt repository of the uploaded .deb files at /apt/; empty turns /apt/ off.
	AptSigningKey string
	// QuotaTotal bounds the bytes the store holds (files, uploads in progress, the
	// registry) and QuotaPerUploader what one uploader's uploads hold; 0 is unlimited.
	// See quota.go for what is counted.
	QuotaTotal, QuotaPerUploader int64

	// Index names the ArtifactIndex the apt repository's packages are recorded in, through
	// IndexClient (index.go); empty records nothing.
	Index       string
	IndexClient client.Client

	// Backups keeps the etcd snapshots of /backups/ (backups.go); nil keeps them under
	// Dir/backups. NewS3Backups makes one that keeps them in an S3 bucket.
	Backups BackupStore
}

// DefaultUploadTTL keeps an interrupted upload resumable for a week.
const DefaultUploadTTL = 7 * 24 * time.Hour

// Server is the artifact server's HTTP handler.
type Server struct {
	opts     Options
	tus      *tus.UnroutedHandler
	registry http.Handler
	uploads  string
	apt      *aptRepo // nil without a signing key
	backups  BackupStore
	quota    *quota
	metrics  *serverMetrics
	// publishing serializes the check-then-write of one file path or image tag (by a
	// hash of it), so two writers of one path cannot interleave.
	publishing [64]sync.Mutex
	testHooks  atomic.Pointer[raceHooks]

	// indexDirty wakes the recorder of the ArtifactIndex (index.go); indexMu serializes
	// its records.
	indexDirty chan struct{}
	indexMu    sync.Mutex
}

// lock holds the publishing lock of key (a file path, or repository:tag) until unlock.
func (s *Server) lock(key string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	m := &s.publishing[h.Sum32()%uint32(len(s.publishing))]
	lockNoting(m, key, s.hooks)
	return m.Unlock
}

// topSegment is the RBAC resourceName a file path is authorized by: its domain.
func topSegment(p string) string {
	top, _, _ := strings.Cut(p, "/")
	return top
}

// FileMeta describes one served file.
type FileMeta struct {
	Path       string    `json:"path"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	UploadedBy string    `json:"uploadedBy"`
	UploadedAt time.Time `json:"uploadedAt"`
	// URL is where nodes download it.
	URL string `json:"url,omitempty"`
	// Image is set for OS images: what a BareMetalHost's spec.image takes.
	Image *OSImage `json:"image,omitempty"`
	// Control is a .deb's control file, as the apt repository's index lists it.
	Control []ControlField `json:"control,omitempty"`
}

// OSImage is the part of a BareMetalHost's spec.image the server can fill in.
type OSImage struct {
	URL          string `json:"url"`
	Checksum     string `json:"checksum"`
	ChecksumType string `json:"checksumType"`
	DiskFormat   string `json:"format,omitempty"`
}

// NewServer prepares Dir and the embedded tus handler and registry.
func NewServer(ctx context.Context, opts Options) (*Server, error) {
	if opts.Auth == nil {
		return nil, errors.New("artifacts: Options.Auth is required")
	}
	if opts.MaxSize == 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.UploadTTL == 0 {
		opts.UploadTTL = DefaultUploadTTL
	}
	s := &Server{opts: opts, uploads: filepath.Join(opts.Dir, "uploads"), indexDirty: make(chan struct{}, 1), backups: opts.Backups}
	if s.backups == nil {
		s.backups = &diskBackups{dir: filepath.Join(opts.Dir, "backups"), lock: s.lock}
	}
	if opts.Index != "" && (opts.AptSigningKey == "" || opts.IndexClient == nil) {
		return nil, errors.New("artifacts: Options.Index records the apt repository: it needs AptSigningKey and IndexClient")
	}
	if opts.AptSigningKey != "" {
		key, err := loadAptKey(opts.AptSigningKey)
		if err != nil {
			return nil, fmt.Errorf("apt signing key: %w", err)
		}
		s.apt = &aptRepo{signer: key}
	}
	for _, d := range []string{"uploads", "files", "meta", "registry"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o750); err != nil {
			return nil, err
		}
	}
	var err error
	if s.quota, err = newQuota(opts.Dir, opts.QuotaTotal, opts.QuotaPerUploader); err != nil {
		return nil, err
	}
	s.quota.hooks = s.hooks
	s.metrics = newServerMetrics(s.quota, s.dispatch)
	composer := tus.NewStoreComposer()
	composer.UseCore(quotaStore{hashingStore{filestore.New(s.uploads)}, s.quota})
	memorylocker.New().UseIn(composer)
	s.tus, err = tus.NewUnroutedHandler(tus.Config{
		StoreComposer: composer, BasePath: "/files/", MaxSize: opts.MaxSize,
		// Files are served from files/ once verified, never from the upload store.
		DisableDownload: true, DisableTermination: true, DisableConcatenation: true,
		PreUploadCreateCallback:   s.preCreate,
		PreFinishResponseCallback: s.preFinish,
		// tusd logs every request at info level; only its warnings are worth a line.
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return nil, err
	}
	s.registry, err = newRegistry(ctx, filepath.Join(opts.Dir, "registry"))
	if opts.Index != "" {
		go s.recordIndexLoop(ctx)
	}
	go func() { // abandoned uploads would otherwise fill the volume
		for {
			s.purge(time.Now())
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Hour):
			}
		}
	}()
	return s, err
}

// purge deletes the unfinished uploads whose data last changed more than UploadTTL ago.
func (s *Server) purge(now time.Time) {
	infos, _ := filepath.Glob(filepath.Join(s.uploads, "*.info"))
	for _, info := range infos {
		bin := strings.TrimSuffix(info, ".info")
		st, err := os.Stat(bin)
		if err == nil && now.Sub(st.ModTime()) < s.opts.UploadTTL {
			continue
		}
		for _, f := range []string{bin, bin + ".sha256", bin + ".sha256.tmp", info} {
			_ = os.Remove(f)
		}
	}
}

func newRegistry(ctx context.Context, dir string) (h http.Handler, err error) {
	// distribution logs every request through logrus at info level, and every 404 (which
	// each push starts with, asking for blobs it may not need to send) as an error. What
	// fails reaches the client in the response.
	logrus.SetLevel(logrus.FatalLevel)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	cfg := &configuration.Configuration{Storage: configuration.Storage{
		"filesystem": configuration.Parameters{"rootdirectory": dir},
		"delete":     configuration.Parameters{"enabled": true},
	}}
	// The secret signs upload state between requests; one per process is enough, as a
	// restart only costs an interrupted layer upload its resumption.
	cfg.HTTP.Secret = hex.EncodeToString(secret)
	defer func() { // NewApp panics on a bad configuration
		if r := recover(); r != nil {
			err = fmt.Errorf("registry: %v", r)
		}
	}()
	return handlers.NewApp(ctx, cfg), nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(userHeader)
	r.Header.Del(overrideHeader)
	// An encoded slash or backslash would let one path segment hold several after
	// decoding; nothing BPA serves needs one.
	if esc := strings.ToLower(r.URL.EscapedPath()); strings.Contains(esc, "%2f") || strings.Contains(esc, "%5c") {
		http.Error(w, "encoded slashes are not allowed in paths", http.StatusBadRequest)
		return
	}
	s.metrics.handlers[routeOf(r.URL.Path)].ServeHTTP(w, r)
}

// dispatch answers a request of a route class (routeOf).
func (s *Server) dispatch(route string, w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch route {
	case routeHealthz:
		_, _ = io.WriteString(w, "ok\n")
	case routeMetrics:
		s.serveMetrics(w, r)
	case routeRegistry:
		s.serveRegistry(w, r)
	case routeApt:
		s.serveApt(w, r, strings.TrimPrefix(p, "/apt/"))
	case routeFiles:
		s.serveFiles(w, r, strings.TrimPrefix(p, "/files/"))
	case routeMeta:
		s.serveMeta(w, r, strings.TrimPrefix(strings.TrimPrefix(p, "/api/v1/files"), "/"))
	case routeBackups:
		s.serveBackups(w, r, strings.TrimPrefix(p, "/backups/"))
	case routeStatus:
		s.serveStatus(w, r, strings.TrimPrefix(p, "/api/v1/status/"))
	default:
		http.NotFound(w, r)
	}
}

// serveRegistry guards the registry: reads need get on artifacts; writes create (delete)
// on artifacts named by the image's registry (its first path segment, e.g.
// registry.k8s.io) or its whole repository (registry.k8s.io/kube-apiserver). Tags are
// immutable and images are never deleted, unless the caller holds VerbOverride there.
func (s *Server) serveRegistry(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		if _, ok := s.opts.Auth.allow(w, r, "get"); ok {
			s.registry.ServeHTTP(w, r)
		}
		return
	}
	repo, kind, ref := registryPath(r.URL.Path)
	if repo == "" {
		http.Error(w, "registry writes must name a repository: /v2/<repository>/(blobs|manifests)/...", http.StatusBadRequest)
		return
	}
	// As a file path starts with its domain, a repository starts with its original registry;
	// RBAC names without a dot (apt/<Package>) then never name an image.
	if !domain.MatchString(topSegment(repo)) {
		http.Error(w, fmt.Sprintf("repository %q: must start with the original registry as its first segment (e.g. registry.k8s.io/pause)", repo), http.StatusBadRequest)
		return
	}
	verb := "create"
	if r.Method == http.MethodDelete {
		verb = "delete"
	}
	names := []string{topSegment(repo), repo}
	u, ok := s.opts.Auth.allowNamed(w, r, verb, names...)
	if !ok {
		return
	}
	override, _ := s.opts.Auth.may(r.Context(), u, VerbOverride, names...)
	switch {
	case verb == "delete" && !override:
		http.Error(w, fmt.Sprintf("Forbidden: images in %s are immutable: deleting needs %s on %s named %s",
			repo, VerbOverride, Resource, strings.Join(quoteAll(names), " or ")), http.StatusForbidden)
	case verb == "delete":
		s.registry.ServeHTTP(w, r)
	default:
		s.quota.serveRegistryWrite(w, r, u.GetName(), repo, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut && kind == "manifests" && !strings.Contains(ref, ":") {
				s.putTag(w, r, repo, ref, override)
				return
			}
			s.registry.ServeHTTP(w, r)
		})
	}
}

// registryPath splits /v2/<repository>/<kind>/<ref...> (kind manifests, blobs or tags).
func registryPath(p string) (repo, kind, ref string) {
	rest := strings.TrimPrefix(p, "/v2/")
	for _, k := range []string{"/manifests/", "/blobs/", "/tags/"} {
		if i := strings.LastIndex(rest, k); i > 0 {
			return rest[:i], strings.Trim(k, "/"), rest[i+len(k):]
		}
	}
	return "", "", ""
}

// maxManifest is distribution's own limit on a manifest's size.
const maxManifest = 4 << 20

// manifestTypes are what a tag may point at, asked for when looking one up.
var manifestTypes = []string{
	"application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.image.index.v1+json",
	"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.docker.distribution.manifest.list.v2+json",
}

// putTag pushes a manifest by tag unless the tag already names another manifest and the
// caller may not override: kubespray pulls by tag, so re-pointing one swaps what nodes run.
// The same manifest again is a no-op success.
func (s *Server) putTag(w http.ResponseWriter, r *http.Request, repo, tag string, override bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxManifest+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxManifest {
		http.Error(w, fmt.Sprintf("manifest larger than %d bytes", maxManifest), http.StatusRequestEntityTooLarge)
		return
	}
	sum := sha256.Sum256(body)
	digest := "sha256:" + hex.EncodeToString(sum[:])
	defer s.lock(repo + ":" + tag)()
	head := httptest.NewRequestWithContext(r.Context(), http.MethodHead, "/v2/"+repo+"/manifests/"+tag, nil)
	head.Header["Accept"] = manifestTypes
	cur := httptest.NewRecorder()
	s.registry.ServeHTTP(cur, head)
	if old := cur.Header().Get("Docker-Content-Digest"); cur.Code == http.StatusOK && old != digest && !override {
		http.Error(w, fmt.Sprintf("Conflict: tag %s:%s already names %s; tags are immutable (push a new tag), replacing one needs %s on %s named %q or %q",
			repo, tag, old, VerbOverride, Resource, topSegment(repo), repo), http.StatusConflict)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.registry.ServeHTTP(w, r)
}

// serveFiles routes /files/: POST creates an upload, HEAD and PATCH on a single segment
// without a dot address an upload in progress (tus), and GET and HEAD on a path under a
// domain download a verified file.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request, rest string) {
	upload := rest != "" && !strings.ContainsAny(rest, "/.")
	switch {
	case r.Method == http.MethodPost && rest == "", upload && (r.Method == http.MethodHead || r.Method == http.MethodPatch):
		if len(r.Header.Get("Upload-Metadata")) > MaxMetadata {
			http.Error(w, fmt.Sprintf("Upload-Metadata: longer than %d bytes", MaxMetadata), http.StatusRequestHeaderFieldsTooLarge)
			return
		}
		// The path is the upload's: from its metadata when it is created, from what was
		// recorded then when it goes on.
		p := tus.ParseMetadataHeader(r.Header.Get("Upload-Metadata"))["path"]
		info, started := s.uploadInfo(rest)
		if upload {
			p = info.MetaData["path"]
		}
		u, ok := s.opts.Auth.allowNamed(w, r, "create", topSegment(p))
		if !ok {
			return
		}
		if upload && started && info.MetaData["uploadedBy"] != u.GetName() {
			http.Error(w, fmt.Sprintf("Forbidden: upload %s was started by someone else than %s", rest, u.GetName()), http.StatusForbidden)
			return
		}
		if override, _ := s.opts.Auth.may(r.Context(), u, VerbOverride, topSegment(p)); override {
			r.Header.Set(overrideHeader, "1")
		}
		r.Header.Set(userHeader, u.GetName())
		r = r.WithContext(withUser(r.Context(), u))
		// tusd takes the upload ID from the path as its own router would leave it.
		r.URL.Path, r.URL.RawPath = rest, ""
		switch r.Method {
		case http.MethodPost:
			s.tus.PostFile(w, r)
		case http.MethodHead:
			s.tus.HeadFile(w, r)
		default:
			s.tus.PatchFile(w, r)
		}
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		if _, ok := s.opts.Auth.allow(w, r, "get"); ok {
			s.serveStored(w, r, rest)
		}
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, PATCH")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// serveStored downloads the published file at path p, for a caller allowed to read.
func (s *Server) serveStored(w http.ResponseWriter, r *http.Request, p string) {
	p, err := CleanPath(p)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	serveRegularFile(w, r, filepath.Join(s.opts.Dir, "files", p))
}

// serveRegularFile downloads the regular file at name (a published file, a snapshot), or
// answers 404.
func serveRegularFile(w http.ResponseWriter, r *http.Request, name string) {
	f, err := os.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f) // Range, If-Modified-Since
}

// uploadInfo is the recorded state of the upload id, if there is one (else tusd answers 404).
func (s *Server) uploadInfo(id string) (tus.FileInfo, bool) {
	var info tus.FileInfo
	b, err := os.ReadFile(filepath.Join(s.uploads, id+".info"))
	return info, err == nil && json.Unmarshal(b, &info) == nil
}

func tusError(code, msg string, status int) error { return tus.NewError(code, msg, status) }

// preCreate refuses an upload whose metadata does not name a safe path and either a sha256
// or sha256-deferred (the sum then comes with the request that completes the upload), or
// whose length is deferred (then "larger than declared" could not be enforced), and keeps
// only the metadata BPA uses, with the uploader as authenticated.
func (s *Server) preCreate(hook tus.HookEvent) (tus.HTTPResponse, tus.FileInfoChanges, error) {
	md := hook.Upload.MetaData
	p, err := CleanPath(md["path"])
	if err != nil {
		return tus.HTTPResponse{}, tus.FileInfoChanges{}, tusError("ERR_BAD_PATH", "Upload-Metadata "+err.Error(), http.StatusBadRequest)
	}
	keep := tus.MetaData{"path": p, "uploadedBy": hook.HTTPRequest.Header.Get(userHeader)}
	switch _, deferred := md[deferredKey]; {
	case deferred && md["sha256"] == "":
		keep[deferredKey] = "1"
	case !deferred && sha256Hex.MatchString(md["sha256"]):
		keep["sha256"] = md["sha256"]
	default:
		return tus.HTTPResponse{}, tus.FileInfoChanges{}, tusError("ERR_BAD_SHA256",
			"Upload-Metadata sha256: must be 64 lowercase hex digits, or left out with "+deferredKey+
				" set and the sum sent in the "+DeclareHeader+" header of the request that completes the upload", http.StatusBadRequest)
	}
	if hook.Upload.SizeIsDeferred {
		return tus.HTTPResponse{}, tus.FileInfoChanges{}, tusError("ERR_LENGTH_REQUIRED", "Upload-Length: required", http.StatusBadRequest)
	}
	// Refused before any byte is sent; preFinish decides again, under the path's lock.
	if old, err := s.readMeta(p); err == nil && keep["sha256"] != "" && old.SHA256 != keep["sha256"] && hook.HTTPRequest.Header.Get(overrideHeader) == "" {
		return tus.HTTPResponse{}, tus.FileInfoChanges{}, s.published(old)
	}
	return tus.HTTPResponse{}, tus.FileInfoChanges{MetaData: keep}, nil
}

// preFinish runs when the last byte is written, before the client hears so: it hashes the
// upload and either publishes it under files/ or discards it, so a file whose content
// is not what the client declared, or whose sum was never declared, is never served.
func (s *Server) preFinish(hook tus.HookEvent) (tus.HTTPResponse, error) {
	info := hook.Upload
	bin, infoFile := info.Storage[filestore.StorageKeyPath], info.Storage[filestore.StorageKeyInfoPath]
	state := filepath.Join(s.uploads, info.ID+".sha256")
	defer os.Remove(state)
	discard := func(code, msg string, status int) (tus.HTTPResponse, error) {
		_ = os.Remove(bin)
		_ = os.Remove(infoFile)
		return tus.HTTPResponse{}, tusError(code, msg+"; the upload is discarded", status)
	}
	declared := info.MetaData["sha256"]
	if _, deferred := info.MetaData[deferredKey]; deferred {
		// Only the completing request can declare it: one that stopped short never reaches here.
		if declared = hook.HTTPRequest.Header.Get(DeclareHeader); !sha256Hex.MatchString(declared) {
			return discard("ERR_BAD_SHA256", fmt.Sprintf("%s: the request that completes a sha256-deferred upload must carry the file's sha256 as 64 lowercase hex digits", DeclareHeader), http.StatusBadRequest)
		}
	}
	sum, err := uploadSHA256(bin, state, info.Size)
	if err != nil {
		return tus.HTTPResponse{}, err
	}
	if sum != declared {
		return discard("ERR_CHECKSUM_MISMATCH", fmt.Sprintf(
			"sha256 mismatch for %s: declared %s, received %s", info.MetaData["path"], declared, sum), checksumMismatch)
	}
	m := FileMeta{Path: info.MetaData["path"], Size: info.Size, SHA256: sum, UploadedBy: info.MetaData["uploadedBy"], UploadedAt: time.Now().UTC()}
	u, err := hookUser(hook.Context)
	if err != nil {
		return tus.HTTPResponse{}, err
	}
	if strings.HasSuffix(m.Path, ".deb") { // it joins the apt repository: its index needs the control file
		if m.Control, err = debControl(bin); err != nil {
			return discard("ERR_BAD_DEB", fmt.Sprintf("%s: not a Debian package the apt repository can list: %v", m.Path, err), http.StatusBadRequest)
		}
		if err := s.opts.Auth.mayPackages(hook.Context, u, "create", &m); err != nil {
			return discard("ERR_FORBIDDEN", err.Error(), http.StatusForbidden)
		}
	}
	// From reading what is published to replacing it, no other upload of the path runs.
	defer s.lock(m.Path)()
	old, _ := s.readMeta(m.Path)
	if old != nil {
		switch {
		case old.SHA256 == m.SHA256: // the same bytes again: already published, as they were
			_ = os.Remove(bin)
			_ = os.Remove(infoFile)
			return tus.HTTPResponse{}, nil
		case hook.HTTPRequest.Header.Get(overrideHeader) == "":
			_ = os.Remove(bin)
			_ = os.Remove(infoFile)
			return tus.HTTPResponse{}, s.published(old)
		}
		// Replacing a .deb takes its package out of the index and may bring another in.
		if err := s.opts.Auth.mayPackages(hook.Context, u, VerbOverride, old, &m); err != nil {
			return discard("ERR_FORBIDDEN", err.Error(), http.StatusForbidden)
		}
	}
	if err := s.publish(bin, m); err != nil {
		return tus.HTTPResponse{}, err
	}
	s.quota.published(old, &m)
	s.aptChanged(m.Path)
	_ = os.Remove(infoFile)
	return tus.HTTPResponse{}, nil
}

// published is the refusal of other bytes for a published path.
func (s *Server) published(old *FileMeta) error {
	names := fmt.Sprintf("%q", topSegment(old.Path))
	if pkg := packageName(old); pkg != "" {
		names += fmt.Sprintf(" and %q", pkg)
	}
	return tusError("ERR_PUBLISHED", fmt.Sprintf("%s is published (sha256 %s, uploaded by %s) and published files are immutable: "+
		"upload a new version under a new path; replacing it needs %s on %s named %s",
		old.Path, old.SHA256, old.UploadedBy, VerbOverride, Resource, names), http.StatusConflict)
}

func fileSHA256(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	// 1 MiB reads, not io.Copy's 32 KiB: a 32nd of the read syscalls, which compete with
	// the upload's own when a client hashes while it sends.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, 1<<20)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// publish writes the metadata, then renames the verified upload into place, so a served
// file always has its metadata and a replaced one is swapped atomically.
func (s *Server) publish(bin string, m FileMeta) error {
	dst, meta := filepath.Join(s.opts.Dir, "files", m.Path), filepath.Join(s.opts.Dir, "meta", m.Path+".json")
	for _, d := range []string{filepath.Dir(dst), filepath.Dir(meta)} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(meta+".tmp", b, 0o640); err != nil {
		return err
	}
	if err := os.Rename(meta+".tmp", meta); err != nil {
		return err
	}
	s.hooks().metaWritten(m.Path)
	if err := os.Rename(bin, dst); err != nil {
		return err
	}
	s.hooks().published(m.Path)
	return nil
}

// serveMeta lists files (GET /api/v1/files?prefix=...), shows one (GET .../PATH) or
// deletes one (DELETE .../PATH).
func (s *Server) serveMeta(w http.ResponseWriter, r *http.Request, rest string) {
	verb := "get"
	if r.Method == http.MethodDelete {
		verb = "delete"
	} else if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var u user.Info
	var ok bool
	if verb == "delete" {
		u, ok = s.opts.Auth.allowNamed(w, r, verb, topSegment(rest))
	} else {
		u, ok = s.opts.Auth.allow(w, r, verb)
	}
	if !ok {
		return
	}
	if rest == "" && verb == "get" {
		list, err := s.list(r, r.URL.Query().Get("prefix"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, list)
		return
	}
	p, err := CleanPath(rest)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if verb == "delete" { // what is checked below is what is deleted, and counted off once
		defer s.lock(p)()
	}
	m, err := s.meta(r, p)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "no such file: "+p, http.StatusNotFound)
		return
	} else if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if verb == "get" {
		writeJSON(w, m)
		return
	}
	if err := s.opts.Auth.mayPackages(r.Context(), u, verb, m); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if m.UploadedBy != u.GetName() {
		if override, _ := s.opts.Auth.may(r.Context(), u, VerbOverride, topSegment(p)); !override {
			http.Error(w, fmt.Sprintf("Forbidden: %s was uploaded by %s; deleting another's file needs %s on %s named %q",
				p, m.UploadedBy, VerbOverride, Resource, topSegment(p)), http.StatusForbidden)
			return
		}
		if err := s.opts.Auth.mayPackages(r.Context(), u, VerbOverride, m); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
	}
	// The file goes first: a file without metadata is never served by a listing, and
	// metadata without a file is a 404 on download, both harmless after a crash here.
	if err := os.Remove(filepath.Join(s.opts.Dir, "files", p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = os.Remove(filepath.Join(s.opts.Dir, "meta", p+".json"))
	s.quota.deleted(m)
	s.aptChanged(p)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) readMeta(p string) (*FileMeta, error) {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, "meta", p+".json"))
	if err != nil {
		return nil, err
	}
	var m FileMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", p, err)
	}
	return &m, nil
}

// meta is p's metadata with the URLs a request to this server would use.
func (s *Server) meta(r *http.Request, p string) (*FileMeta, error) {
	m, err := s.readMeta(p)
	if err != nil {
		return nil, err
	}
	base := s.opts.URL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	m.URL = strings.TrimSuffix(base, "/") + "/files/" + m.Path
	if f, ok := diskFormat(m.Path); ok {
		m.Image = &OSImage{URL: m.URL, Checksum: m.SHA256, ChecksumType: "sha256", DiskFormat: f}
	}
	return m, nil
}

// diskFormat tells OS images by extension, with the format metal3's spec.image.format names.
func diskFormat(p string) (string, bool) {
	switch strings.ToLower(path.Ext(p)) {
	case ".qcow2":
		return "qcow2", true
	case ".img", ".raw":
		return "raw", true
	case ".iso":
		return "live-iso", true
	}
	return "", false
}

func (s *Server) list(r *http.Request, prefix string) ([]FileMeta, error) {
	root := filepath.Join(s.opts.Dir, "meta")
	out := []FileMeta{}
	err := filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(name, ".json") {
			return err
		}
		rel, _ := filepath.Rel(root, strings.TrimSuffix(name, ".json"))
		if rel = filepath.ToSlash(rel); !strings.HasPrefix(rel, prefix) {
			return nil
		}
		m, err := s.meta(r, rel)
		if err != nil {
			return err
		}
		out = append(out, *m)
		return nil
	})
	return out, err
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
