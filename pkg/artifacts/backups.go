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

// MaxBackupsPerCluster bounds the snapshots one cluster's path holds: spec.etcdBackup.keep
// is at most 100, and the step stores the new snapshot before it deletes the oldest.
const MaxBackupsPerCluster = 101

// Headers of a backup write.
const (
	HeaderContentSHA256 = "X-Content-Sha256"
	HeaderBackupMeta    = "X-Bpa-Backup-Meta"
	maxBackupMeta       = 4096
)

// backupName is a snapshot's file name: letters, digits, '.', '_' and '-', not hidden.
var backupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// metaSuffix names the record kept beside each snapshot; no snapshot's name ends in it, so
// no request can address a record as a snapshot (and overwrite or delete it).
const metaSuffix = ".json"

func validBackupName(name string) bool {
	return backupName.MatchString(name) && !strings.HasSuffix(name, metaSuffix)
}

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
		(parts[2] != "" && !validBackupName(parts[2])) {
		http.Error(w, "backup paths are /backups/<namespace>/<cluster>/[<name>]: lower-case DNS labels, and a name of letters, digits, '.', '_' and '-', not ending in "+metaSuffix, http.StatusBadRequest)
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
		serveRegularFile(w, r, filepath.Join(dir, name))
	case "create":
		s.putBackup(w, r, u, ns, cluster, dir, name)
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
		_ = os.Remove(filepath.Join(dir, name+metaSuffix))
		w.WriteHeader(http.StatusNoContent)
	}
}

// putBackup stores one snapshot: the body is hashed as it is written to a temp file, which
// is synced and linked into place only when its sha256 is the declared one. The upload runs
// without the cluster's lock (a slow writer of gigabytes must not hold up any other); the
// lock covers only the checks and the link, which never replaces a snapshot.
func (s *Server) putBackup(w http.ResponseWriter, r *http.Request, u user.Info, ns, cluster, dir, name string) {
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
	// Refused early, before any byte is read; checked again under the lock.
	if code, msg := admitBackup(dir, name); code != 0 {
		http.Error(w, msg, code)
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
	tmp, err := receiveBackup(dir, io.LimitReader(r.Body, r.ContentLength), &m)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrChecksum) || errors.Is(err, io.ErrUnexpectedEOF) {
			code = http.StatusBadRequest
		}
		http.Error(w, err.Error(), code)
		return
	}
	defer os.Remove(tmp)
	unlock := s.lock("backups/" + ns + "/" + cluster)
	defer unlock()
	if code, msg := admitBackup(dir, name); code != 0 {
		http.Error(w, msg, code)
		return
	}
	if err := publishBackup(dir, name, tmp, &m); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, m)
}

// admitBackup refuses a name taken, or a cluster that holds the most snapshots the server
// keeps: an HTTP status and message, or 0.
func admitBackup(dir, name string) (int, string) {
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		return http.StatusConflict, "backup " + name + " exists; snapshots are never replaced"
	}
	list, err := listBackups(dir)
	if err != nil {
		return http.StatusInternalServerError, err.Error()
	}
	if len(list) >= MaxBackupsPerCluster {
		return http.StatusInsufficientStorage, fmt.Sprintf("this cluster holds %d backups, the most the server keeps; delete old ones first", len(list))
	}
	return 0, ""
}

// receiveBackup writes body to a temp file in dir, synced, and returns its path once its
// sha256 is m's; m.Size is set. On an error nothing is left.
func receiveBackup(dir string, body io.Reader, m *BackupMeta) (_ string, err error) {
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return "", err
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
		return "", err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
		return "", fmt.Errorf("%w: received %d bytes with sha256 %s, not the declared %s", ErrChecksum, m.Size, got, m.SHA256)
	}
	return tmp.Name(), nil
}

// publishBackup writes the metadata, then links the received file in as name: a link never
// replaces a file, so even a writer that slipped past the checks cannot overwrite one.
func publishBackup(dir, name, tmp string, m *BackupMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+metaSuffix), b, 0o640); err != nil {
		return err
	}
	return os.Link(tmp, filepath.Join(dir, name))
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
		name, ok := strings.CutSuffix(e.Name(), metaSuffix)
		if !ok || !validBackupName(name) {
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
