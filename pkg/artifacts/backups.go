package artifacts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
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
	switch verb {
	case "list":
		list, err := s.backups.List(r.Context(), ns, cluster)
		if err != nil {
			backupError(w, err, "")
			return
		}
		writeJSON(w, list)
	case "get":
		s.getBackup(w, r, ns, cluster, name)
	case "create":
		s.putBackup(w, r, u, ns, cluster, name)
	case "delete":
		if err := s.backups.Delete(r.Context(), ns, cluster, name); err != nil {
			backupError(w, err, name)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// getBackup downloads one snapshot (Range, If-Modified-Since), or answers 404.
func (s *Server) getBackup(w http.ResponseWriter, r *http.Request, ns, cluster, name string) {
	f, mod, err := s.backups.Open(r.Context(), ns, cluster, name)
	if err != nil {
		if errors.Is(err, ErrNoBackup) {
			http.NotFound(w, r)
		} else {
			backupError(w, err, name)
		}
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", mod, f)
}

// putBackup checks a write's headers and hands its body to the store, which keeps the
// snapshot only when its sha256 is the declared one.
func (s *Server) putBackup(w http.ResponseWriter, r *http.Request, u user.Info, ns, cluster, name string) {
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
	m := BackupMeta{Name: name, SHA256: want, UploadedBy: u.GetName(), UploadedAt: time.Now().UTC()}
	if meta != "" {
		m.Backup = json.RawMessage(meta)
	}
	if err := s.backups.Put(r.Context(), ns, cluster, name, r.Body, r.ContentLength, &m); err != nil {
		backupError(w, err, name)
		return
	}
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, m)
}

// backupError answers a BackupStore's error about name (if any). The client reads what it
// did wrong; a failure of the store itself (an S3 error naming the bucket, the endpoint or a
// key, a disk error) goes to the server's log only.
func backupError(w http.ResponseWriter, err error, name string) {
	status := backupErrorStatus(err)
	msg := err.Error()
	if name != "" {
		msg += ": " + name
	}
	switch status {
	case http.StatusInternalServerError:
		slog.Error("backup store", "backup", name, "err", err)
		msg = "the backup store failed; the server's log says why"
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "30")
	}
	http.Error(w, msg, status)
}

// backupErrorStatus is the HTTP status of a BackupStore's error.
func backupErrorStatus(err error) int {
	switch {
	case errors.Is(err, ErrBackupStoreBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, ErrChecksum), errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest
	case errors.Is(err, ErrBackupExists):
		return http.StatusConflict
	case errors.Is(err, ErrBackupsFull):
		return http.StatusInsufficientStorage
	case errors.Is(err, ErrNoBackup):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}
