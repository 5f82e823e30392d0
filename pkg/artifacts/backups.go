package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// The etcd backup area: /backups/<namespace>/<cluster>/<name>. A snapshot holds every
// Secret of its cluster, so it is never served anonymously, and every request is
// authorized in the cluster's own namespace: verb create, get, list or delete on the
// etcdbackups resource of BPA's group, with the cluster as the resource name (RBAC's
// resourceNames can keep an account to some clusters). The backup step's account holds
// them in its own namespace only, so no tenant reads or overwrites another's snapshots.
//
// A snapshot is written with one PUT (etcd snapshots are megabytes to a few GiB, sent over
// the site's network) carrying its sha256 in X-Content-Sha256; the server hashes what it
// receives, keeps it only when the sums agree, and never replaces a snapshot (409). Beside
// each it keeps the JSON the writer sent in X-Bpa-Backup-Meta (the verification's result),
// which a listing returns. Backups are bounded per cluster (MaxBackupsPerCluster) rather
// than counted in the store's quota.

// BackupResource is the RBAC resource (BPA's group, namespaced) of the backup area.
const BackupResource = "etcdbackups"

// MaxBackupsPerCluster bounds the snapshots one cluster's path holds (spec.etcdBackup.keep
// is at most 100).
const MaxBackupsPerCluster = 100

// Headers of a backup write.
const (
	HeaderContentSHA256 = "X-Content-Sha256"
	HeaderBackupMeta    = "X-Bpa-Backup-Meta"
	maxBackupMeta       = 4096
)

// backupName is a snapshot's file name: letters, digits, '.', '_' and '-', not hidden.
var backupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// dnsLabel is a namespace or cluster name.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// BackupMeta is what the server keeps and lists for one snapshot.
type BackupMeta struct {
	Name       string    `json:"name"`
	Size       int64     `json:"size"`
	SHA256     string    `json:"sha256"`
	UploadedBy string    `json:"uploadedBy"`
	UploadedAt time.Time `json:"uploadedAt"`
	// Backup is the writer's own record of the snapshot (revision, verification...).
	Backup json.RawMessage `json:"backup,omitempty"`
}

// BackupPath is the URL path of a cluster's backups (name "") or of one snapshot.
func BackupPath(namespace, cluster, name string) string {
	p := "/backups/" + namespace + "/" + cluster + "/"
	return p + name
}

// serveBackups routes /backups/<namespace>/<cluster>/[<name>].
func (s *Server) serveBackups(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || !dnsLabel.MatchString(parts[0]) || !dnsLabel.MatchString(parts[1]) ||
		(parts[2] != "" && !backupName.MatchString(parts[2])) {
		http.Error(w, "backup paths are /backups/<namespace>/<cluster>/[<name>]: lower-case DNS labels, and a name of letters, digits, '.', '_' and '-'", http.StatusBadRequest)
		return
	}
	ns, cluster, name := parts[0], parts[1], parts[2]
	verb := map[string]string{http.MethodPut: "create", http.MethodGet: "get", http.MethodHead: "get", http.MethodDelete: "delete"}[r.Method]
	if verb == "" || (name == "" && verb != "get") {
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if name == "" {
		verb = "list"
	}
	u, ok := s.opts.Auth.authenticate(w, r)
	if !ok {
		return
	}
	if allowed, reason := s.opts.Auth.mayResource(r.Context(), u, verb, BackupResource, ns, cluster); !allowed {
		http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s.%s named %q in namespace %s %s", u.GetName(), verb,
			BackupResource, bpav1.GroupVersion.Group, cluster, ns, reason), http.StatusForbidden)
		return
	}
	dir := filepath.Join(s.opts.Dir, "backups", ns, cluster)
	switch verb {
	case "list":
		list, err := listBackups(dir)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, list)
	case "get":
		s.serveBackupFile(w, r, dir, name)
	case "create":
		defer s.lock("backups/" + ns + "/" + cluster)()
		s.putBackup(w, r, u, dir, name)
	case "delete":
		defer s.lock("backups/" + ns + "/" + cluster)()
		// The snapshot first: metadata without a file is not listed.
		if err := os.Remove(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
			http.Error(w, "no such backup: "+name, http.StatusNotFound)
			return
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = os.Remove(filepath.Join(dir, name+".json"))
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) serveBackupFile(w http.ResponseWriter, r *http.Request, dir, name string) {
	f, err := os.Open(filepath.Join(dir, name))
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
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// putBackup stores one snapshot: the body is hashed as it is written to a temp file, which
// is synced and renamed into place only when its sha256 is the declared one.
func (s *Server) putBackup(w http.ResponseWriter, r *http.Request, u user.Info, dir, name string) {
	want := r.Header.Get(HeaderContentSHA256)
	meta := r.Header.Get(HeaderBackupMeta)
	switch {
	case !sha256Hex.MatchString(want):
		http.Error(w, HeaderContentSHA256+": the snapshot's sha256 (64 lower-case hex digits) is required", http.StatusBadRequest)
		return
	case len(meta) > maxBackupMeta || (meta != "" && !json.Valid([]byte(meta))):
		http.Error(w, fmt.Sprintf("%s: at most %d bytes of JSON", HeaderBackupMeta, maxBackupMeta), http.StatusBadRequest)
		return
	case r.ContentLength < 0 || r.ContentLength > s.opts.MaxSize:
		http.Error(w, fmt.Sprintf("a backup needs a Content-Length of at most %d bytes", s.opts.MaxSize), http.StatusRequestEntityTooLarge)
		return
	}
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		http.Error(w, "backup "+name+" exists; snapshots are never replaced", http.StatusConflict)
		return
	}
	if list, err := listBackups(dir); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	} else if len(list) >= MaxBackupsPerCluster {
		http.Error(w, fmt.Sprintf("this cluster holds %d backups, the most the server keeps; delete old ones first", len(list)), http.StatusInsufficientStorage)
		return
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	m := BackupMeta{Name: name, SHA256: want, UploadedBy: u.GetName(), UploadedAt: time.Now().UTC()}
	if meta != "" {
		m.Backup = json.RawMessage(meta)
	}
	if err := writeBackup(dir, name, io.LimitReader(r.Body, r.ContentLength), &m); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrChecksum) || errors.Is(err, io.ErrUnexpectedEOF) {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, m)
}

// writeBackup writes body to dir/name through a temp file, and its metadata beside it, or
// leaves nothing.
func writeBackup(dir, name string, body io.Reader, m *BackupMeta) (err error) {
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	m.Size, err = io.Copy(io.MultiWriter(tmp, h), body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		return fmt.Errorf("%w: received %d bytes with sha256 %s, not the declared %s", ErrChecksum, m.Size, got, m.SHA256)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err = os.WriteFile(filepath.Join(dir, name+".json"), b, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}

// listBackups lists a cluster's snapshots, oldest first.
func listBackups(dir string) ([]BackupMeta, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []BackupMeta{}, nil
	} else if err != nil {
		return nil, err
	}
	out := []BackupMeta{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !backupName.MatchString(name) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			continue // a crash between the two writes: not a backup
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var m BackupMeta
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("metadata of backup %s: %w", name, err)
		}
		out = append(out, m)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].UploadedAt.Equal(out[j].UploadedAt) {
			return out[i].UploadedAt.Before(out[j].UploadedAt)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
