package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestS3PartedUploadsAreBounded: minio-go buffers a part of each upload larger than
// s3PartSize, so past s3PartedUploads of them at once an upload is refused (503) before the
// store reads or claims anything, instead of the server running out of memory.
func TestS3PartedUploadsAreBounded(t *testing.T) {
	b := &s3Backups{parted: make(chan struct{}, s3PartedUploads)}
	for range s3PartedUploads {
		b.parted <- struct{}{}
	}
	err := b.Put(context.Background(), "ns", "c", "snap", strings.NewReader(""), s3PartSize+1, &BackupMeta{})
	if !errors.Is(err, ErrBackupStoreBusy) {
		t.Fatalf("a parted upload past the bound: %v; want ErrBackupStoreBusy", err)
	}
	w := httptest.NewRecorder()
	backupError(w, err, "snap")
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("answered %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
}

// TestBackupErrorHidesStoreDetail: a client reads what it did wrong, never the store's own
// failure (an S3 error names the bucket, the endpoint and the key).
func TestBackupErrorHidesStoreDetail(t *testing.T) {
	w := httptest.NewRecorder()
	backupError(w, fmt.Errorf("storing prefix/backups/ns/c/snap in S3: bucket secret-bucket at s3.internal: %w", errors.New("boom")), "snap")
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "secret-bucket") {
		t.Errorf("answered %d %q; want 500 without the store's detail", w.Code, w.Body.String())
	}
	w = httptest.NewRecorder()
	backupError(w, fmt.Errorf("backup snap exists: %w", ErrBackupExists), "snap")
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "exists") {
		t.Errorf("answered %d %q; want 409 saying why", w.Code, w.Body.String())
	}
}

// TestPutBackupWaitsWhenBusy: a 503 with Retry-After (the S3 store's bound on large uploads)
// is asked again after the wait, the whole file each time; another error is not.
func TestPutBackupWaitsWhenBusy(t *testing.T) {
	file := t.TempDir() + "/snap.db"
	if err := os.WriteFile(file, []byte("snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		body, _ := io.ReadAll(r.Body)
		switch {
		case calls == 1:
			w.Header().Set("Retry-After", "1")
			http.Error(w, ErrBackupStoreBusy.Error(), http.StatusServiceUnavailable)
		case string(body) != "snapshot":
			http.Error(w, "a short body: "+string(body), http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"name":"snap"}`))
		}
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, HTTP: srv.Client()}
	start := time.Now()
	m, err := c.PutBackup(context.Background(), "ns", "c", "snap", file, "sum", nil)
	if err != nil || m.Name != "snap" || calls != 2 {
		t.Fatalf("PutBackup: %v, %+v after %d calls; want stored on the second", err, m, calls)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("asked again after %s; want the Retry-After's 1 s", waited)
	}
}
