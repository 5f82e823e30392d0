// Package s3test runs a real S3 service for the tests of BPA's S3 backup store: versitygw
// (bin/versitygw, pinned by hack/tools/versitygw), its posix backend on a temp dir, serving
// TLS with a certificate from a CA of the test's own, which no trust store holds.
package s3test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust/nodetrusttest"
	"github.com/akraino-edge-stack/bpa/test/framework/rig"
)

// Bucket is the bucket Start creates.
const Bucket = "bpa-backups"

// Server is a running versitygw.
type Server struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// CAFile is the PEM of the CA its certificate comes from; AccessKeyFile and
	// SecretKeyFile hold its root user's keys, as files of a mounted Secret would.
	CAFile, AccessKeyFile, SecretKeyFile string
	// Dir is the posix backend's root: the bucket is Dir/Bucket, each object a file.
	Dir string
	// Client reaches it as its root user (what the tests read the bucket with).
	Client *minio.Client
}

// Start runs versitygw until the test ends, with Bucket created.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := rig.DefaultBinDir()
	require.NoError(t, err)
	vgw := filepath.Join(bin, "versitygw")
	if _, err := os.Stat(vgw); err != nil {
		t.Fatalf("%s: run hack/build-tools.sh versitygw", vgw)
	}
	work := t.TempDir()
	s := &Server{Dir: filepath.Join(work, "gw"), CAFile: filepath.Join(work, "ca.pem"),
		AccessKeyFile: filepath.Join(work, "access-key-id"), SecretKeyFile: filepath.Join(work, "secret-access-key")}
	require.NoError(t, os.Mkdir(s.Dir, 0o700))
	access, secret := "bpa-test-"+strconv.Itoa(os.Getpid()), fmt.Sprintf("secret-%d", time.Now().UnixNano())
	certFile, keyFile := serving(t, work, s.CAFile)
	for f, v := range map[string]string{s.AccessKeyFile: access, s.SecretKeyFile: secret} {
		require.NoError(t, os.WriteFile(f, []byte(v+"\n"), 0o600))
	}
	addr := freePort(t)
	s.URL = "https://" + addr
	log, err := os.Create(filepath.Join(work, "versitygw.log"))
	require.NoError(t, err)
	cmd := exec.Command(vgw, "--port", addr, "--cert", certFile, "--key", keyFile, "--quiet", "posix", s.Dir)
	// The keys by environment, not argv: ps shows argv to every user of the machine.
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+access, "ROOT_SECRET_ACCESS_KEY="+secret)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("versitygw's log:\n%s", b)
		}
	})
	s.Client = s.rootClient(t)
	s.waitAndMakeBucket(t)
	return s
}

// Options is the S3 backup store of the server's bucket under prefix, as an admin names it.
func (s *Server) Options(prefix string) artifacts.S3BackupOptions {
	return artifacts.S3BackupOptions{Endpoint: s.URL, Bucket: Bucket, Prefix: prefix, PathStyle: true,
		CAFile: s.CAFile, AccessKeyFile: s.AccessKeyFile, SecretKeyFile: s.SecretKeyFile}
}

func (s *Server) rootClient(t testing.TB) *minio.Client {
	o := s.Options("")
	ca, err := os.ReadFile(o.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tr, err := minio.DefaultTransport(true)
	require.NoError(t, err)
	tr.TLSClientConfig.RootCAs = pool
	access, _ := os.ReadFile(o.AccessKeyFile)
	secret, _ := os.ReadFile(o.SecretKeyFile)
	c, err := minio.New(s.URL[len("https://"):], &minio.Options{Secure: true, Transport: tr, BucketLookup: minio.BucketLookupPath,
		Creds: credentials.NewStaticV4(string(access[:len(access)-1]), string(secret[:len(secret)-1]), "")})
	require.NoError(t, err)
	return c
}

// waitAndMakeBucket creates Bucket once versitygw answers (within 30 s).
func (s *Server) waitAndMakeBucket(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := s.Client.MakeBucket(ctx, Bucket, minio.MakeBucketOptions{})
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("versitygw at %s: %v", s.URL, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serving writes a CA (caFile) and a certificate it issues for 127.0.0.1, with its key.
func serving(t testing.TB, dir, caFile string) (certFile, keyFile string) {
	ca := nodetrusttest.NewCA(t, nil, net.IPv4(127, 0, 0, 1))
	require.NoError(t, os.WriteFile(caFile, ca.PEM, 0o600))
	c := ca.Issue(t, "versitygw", "127.0.0.1")
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))
	return certFile, keyFile
}

// freePort is a loopback address no one listens on now (versitygw cannot report the port
// it chose for :0).
func freePort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
