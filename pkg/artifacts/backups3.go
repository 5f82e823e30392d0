package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3BackupOptions name the S3 bucket `bpa serve` keeps the etcd snapshots in, instead of its
// own disk. Only the server holds the credentials: the backup steps still talk to it, with
// their tokens, and it still authorizes each request in the cluster's namespace, so no
// tenant and no step pod ever holds a key to the bucket.
type S3BackupOptions struct {
	// Endpoint is the service's https:// URL (no path): the snapshots hold every Secret of
	// their cluster, so they never cross the network in clear.
	Endpoint string
	Bucket   string
	// Prefix, if set, is put before every key: <prefix>/backups/<namespace>/<cluster>/<name>.
	Prefix string
	// Region is the bucket's; empty lets the client ask the service.
	Region string
	// PathStyle addresses the bucket in the path (https://host/bucket/key), as most
	// services on a site's own network need; otherwise as the service supports.
	PathStyle bool
	// CAFile is a PEM bundle of the CAs the endpoint's certificate is checked against;
	// empty means the system's.
	CAFile string
	// AccessKeyFile and SecretKeyFile hold the credentials (files of a mounted Secret),
	// read for each request so that a rotated Secret takes effect without a restart.
	AccessKeyFile, SecretKeyFile string
}

// s3Backups keeps each cluster's snapshots at <prefix>/backups/<namespace>/<cluster>/<name>,
// each with <name>.json, its record, written last: a listing reads the records whose
// snapshot is there, so a snapshot is listed only once all of it is stored.
type s3Backups struct {
	c              *minio.Client
	bucket, prefix string
	// clusters holds a *sync.Mutex per cluster, which serializes its claims and deletes
	// (never an upload).
	clusters sync.Map
	// writing holds the keys being uploaded: S3 replaces an object, so this server never
	// lets two writers of one name (or one over a listed snapshot) start.
	writing sync.Map
	// parted holds a token per upload larger than s3PartSize: minio-go buffers a part of
	// each, so at most cap(parted) such uploads run at once (s3PartedUploads).
	parted chan struct{}
}

// s3PartedUploads bounds the uploads sent in parts at once: each buffers s3PartSize, and
// config/serve gives the server 512Mi in all (the files and images it serves too).
const s3PartedUploads = 3

// NewS3Backups connects to the bucket of o and checks that it is there and that the
// credentials and the CA are right, so a wrong one stops `bpa serve` at its start.
func NewS3Backups(ctx context.Context, o S3BackupOptions) (BackupStore, error) {
	c, err := newS3Client(o)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("S3 backup store %s, bucket %s", o.Endpoint, o.Bucket)
	// Bounded: a service that never answers stops `bpa serve` with a reason, not a hang.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ok, err := c.BucketExists(ctx, o.Bucket)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if !ok {
		return nil, fmt.Errorf("%s: no such bucket", where)
	}
	return &s3Backups{c: c, bucket: o.Bucket, prefix: strings.Trim(o.Prefix, "/"), parted: make(chan struct{}, s3PartedUploads)}, nil
}

func newS3Client(o S3BackupOptions) (*minio.Client, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || u.Scheme != "https" || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.User != nil {
		return nil, fmt.Errorf("S3 endpoint %q: want https://host[:port]", o.Endpoint)
	}
	if o.Bucket == "" || o.AccessKeyFile == "" || o.SecretKeyFile == "" {
		return nil, errors.New("an S3 backup store needs a bucket, an access key file and a secret key file")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("S3 CA bundle: %w", err)
		}
		tr.TLSClientConfig.RootCAs = x509.NewCertPool()
		if !tr.TLSClientConfig.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("S3 CA bundle %s: no PEM certificate in it", o.CAFile)
		}
	}
	lookup := minio.BucketLookupAuto
	if o.PathStyle {
		lookup = minio.BucketLookupPath
	}
	return minio.New(u.Host, &minio.Options{
		Creds:  credentials.New(&fileCredentials{o.AccessKeyFile, o.SecretKeyFile}),
		Secure: true, Transport: tr, Region: o.Region, BucketLookup: lookup,
	})
}

// fileCredentials reads the keys from their files each time the client signs a request.
type fileCredentials struct{ access, secret string }

func (f *fileCredentials) Retrieve() (credentials.Value, error) {
	var v credentials.Value
	for _, k := range []struct {
		file string
		into *string
	}{{f.access, &v.AccessKeyID}, {f.secret, &v.SecretAccessKey}} {
		b, err := os.ReadFile(k.file)
		if err != nil {
			return v, fmt.Errorf("S3 credentials: %w", err)
		}
		*k.into = strings.TrimSpace(string(b))
	}
	v.SignerType = credentials.SignatureV4
	return v, nil
}

func (f *fileCredentials) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	return f.Retrieve()
}

// IsExpired is always true: the files are read again for every request.
func (f *fileCredentials) IsExpired() bool { return true }

func (b *s3Backups) key(ns, cluster, name string) string {
	return path.Join(b.prefix, "backups", ns, cluster) + "/" + name
}

// Put claims the name, streams the body to its object while hashing it, checks the sum
// and the size S3 reports, then writes the record; on any failure it deletes the object.
func (b *s3Backups) Put(ctx context.Context, ns, cluster, name string, body io.Reader, size int64, m *BackupMeta) (err error) {
	if size > s3PartSize {
		select {
		case b.parted <- struct{}{}:
			defer func() { <-b.parted }()
		default:
			return ErrBackupStoreBusy
		}
	}
	release, err := b.claim(ctx, ns, cluster, name)
	if err != nil {
		return err
	}
	defer release()
	key := b.key(ns, cluster, name)
	defer func() {
		if err != nil {
			// A background context: the request's may be what ended. (minio-go aborts a
			// failed multipart upload itself, so no part is left either.)
			_ = b.c.RemoveObject(context.WithoutCancel(ctx), b.bucket, key, minio.RemoveObjectOptions{})
		}
	}()
	counted := &sent{h: sha256.New()}
	// Up to s3PartSize the body streams as one PUT, nothing buffered; beyond, minio-go sends
	// parts of that size, one buffered at a time (config/serve's memory limit is 512Mi).
	info, err := b.c.PutObject(ctx, b.bucket, key, io.TeeReader(io.LimitReader(body, size), counted), size, minio.PutObjectOptions{ContentType: "application/octet-stream", PartSize: s3PartSize})
	m.Size = counted.n
	switch {
	case counted.n < size:
		return fmt.Errorf("received %d of %d bytes: %w", counted.n, size, io.ErrUnexpectedEOF)
	case err != nil:
		return fmt.Errorf("storing %s in S3: %w", key, err)
	case info.Size != size:
		return fmt.Errorf("S3 stored %d bytes of %s, not %d", info.Size, key, size)
	}
	if err := checkSum(counted.h.Sum(nil), m); err != nil {
		return err
	}
	rec, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = b.c.PutObject(ctx, b.bucket, key+metaSuffix, bytes.NewReader(rec), int64(len(rec)), minio.PutObjectOptions{ContentType: "application/json"})
	return err
}

// claim refuses a name listed or being written, or a full cluster; else it holds the name
// until release.
func (b *s3Backups) claim(ctx context.Context, ns, cluster, name string) (release func(), err error) {
	defer b.lock(ns, cluster)()
	key := b.key(ns, cluster, name)
	if _, ok := b.writing.Load(key); ok {
		return nil, fmt.Errorf("backup %s is being written: %w", name, ErrBackupExists)
	}
	list, err := b.List(ctx, ns, cluster)
	if err != nil {
		return nil, err
	}
	for _, m := range list {
		if m.Name == name {
			return nil, fmt.Errorf("backup %s exists: %w", name, ErrBackupExists)
		}
	}
	// Uploads in flight count too: parallel writers would each see room otherwise.
	inFlight := 0
	b.writing.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), b.key(ns, cluster, "")) {
			inFlight++
		}
		return true
	})
	if err := admitCount(len(list) + inFlight); err != nil {
		return nil, err
	}
	b.writing.Store(key, true)
	return func() { b.writing.Delete(key) }, nil
}

func (b *s3Backups) lock(ns, cluster string) (unlock func()) {
	m, _ := b.clusters.LoadOrStore(ns+"/"+cluster, &sync.Mutex{})
	m.(*sync.Mutex).Lock()
	return m.(*sync.Mutex).Unlock
}

// List reads the records whose snapshot object is there (one listing, then one GET per
// record): an object without its record is an upload in progress or a failed one.
func (b *s3Backups) List(ctx context.Context, ns, cluster string) ([]BackupMeta, error) {
	dir := b.key(ns, cluster, "")
	objects := map[string]bool{}
	for o := range b.c.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: dir}) {
		if o.Err != nil {
			return nil, fmt.Errorf("listing %s in S3: %w", dir, o.Err)
		}
		objects[strings.TrimPrefix(o.Key, dir)] = true
	}
	out := []BackupMeta{}
	for file := range objects {
		name, ok := recordOf(file)
		if !ok || !objects[name] {
			continue
		}
		m, err := b.record(ctx, dir+file, name)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	sortBackups(out)
	return out, nil
}

func (b *s3Backups) record(ctx context.Context, key, name string) (BackupMeta, error) {
	o, err := b.c.GetObject(ctx, b.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return BackupMeta{}, err
	}
	defer o.Close()
	rec, err := io.ReadAll(io.LimitReader(o, 1<<20))
	if err != nil {
		return BackupMeta{}, fmt.Errorf("record of backup %s: %w", name, err)
	}
	return parseRecord(name, rec)
}

// Open reads the object lazily: ServeContent's seeks become ranged GETs.
func (b *s3Backups) Open(ctx context.Context, ns, cluster, name string) (io.ReadSeekCloser, time.Time, error) {
	o, err := b.c.GetObject(ctx, b.bucket, b.key(ns, cluster, name), minio.GetObjectOptions{})
	if err != nil {
		return nil, time.Time{}, err
	}
	st, err := o.Stat()
	if err != nil {
		_ = o.Close()
		return nil, time.Time{}, s3NotFound(err)
	}
	return o, st.LastModified, nil
}

// Delete removes the snapshot first, then its record: a record without its snapshot is not
// listed.
func (b *s3Backups) Delete(ctx context.Context, ns, cluster, name string) error {
	defer b.lock(ns, cluster)()
	key := b.key(ns, cluster, name)
	if _, err := b.c.StatObject(ctx, b.bucket, key, minio.StatObjectOptions{}); err != nil {
		return s3NotFound(err)
	}
	if err := b.c.RemoveObject(ctx, b.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return err
	}
	return b.c.RemoveObject(ctx, b.bucket, key+metaSuffix, minio.RemoveObjectOptions{})
}

// s3NotFound is ErrNoBackup for S3's "no such key", else err.
func s3NotFound(err error) error {
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey || minio.ToErrorResponse(err).StatusCode == http.StatusNotFound {
		return ErrNoBackup
	}
	return err
}

// s3PartSize: most etcd snapshots (25 MiB for 100,000 keys) go in one request.
const s3PartSize = 64 << 20

// sent hashes and counts the bytes handed to S3.
type sent struct {
	h hash.Hash
	n int64
}

func (s *sent) Write(p []byte) (int, error) {
	s.n += int64(len(p))
	return s.h.Write(p)
}
