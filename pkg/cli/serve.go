package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/net/netutil"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

func init() {
	registerKube(kubeConfig, func(k *kubeFlags) *cobra.Command {
		var opts artifacts.Options
		var listen, certFile, keyFile, audience string
		var anonymousReads, plainHTTP bool
		var limits serveLimits
		var s3 artifacts.S3BackupOptions
		cmd := &cobra.Command{
			Use:   "serve",
			Short: "Run the site's artifact server: files (tus uploads, kubespray's offline layout), container images (/v2/) and installation status",
			Long: "serve stores and serves what an air-gapped site's nodes download:\n" +
				"  /files/DOMAIN/PATH        files, uploaded with tus (bpa artifacts push), verified against their\n" +
				"                            declared sha256, downloaded with GET (Range), laid out as kubespray's\n" +
				"                            files_repo expects (the original domain as the top directory)\n" +
				"  /api/v1/files[/PATH]      listing, metadata (size, sha256, uploader, OS image URL and checksum), DELETE\n" +
				"  /v2/                      an OCI distribution registry (crane, skopeo, docker, oras)\n" +
				"  /apt/                     a signed flat apt repository of the uploaded .deb files (with --apt-signing-key),\n" +
				"                            recorded in an ArtifactIndex (--index) for Softwares that track version: latest\n" +
				"  /api/v1/status/NS/CLUSTER the cluster's Provisioning and Software status, as JSON\n" +
				"Every token must be minted for --token-audience (a ServiceAccount token from TokenRequest).\n" +
				"Writes need a Kubernetes bearer token allowed to create (or delete) artifacts.bpa.akraino.org;\n" +
				"reads need one allowed to get them, unless --anonymous-reads; status needs list on the CRs.\n" +
				"It reviews tokens with the apiserver of the kubeconfig (--kubeconfig, --context; in a pod,\n" +
				"its in-cluster config).",
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if (certFile == "") != (keyFile == "") || (certFile == "" && !plainHTTP) {
					return errors.New("--tls-cert-file and --tls-private-key-file are both required (or --plain-http, for a test bench only)")
				}
				if s3.Endpoint == "" && s3 != (artifacts.S3BackupOptions{}) {
					return errors.New("the --backup-s3-* flags need --backup-s3-endpoint")
				}
				ctx, stop := signalContext(cmd)
				defer stop()
				cfg, err := k.restConfig()
				if err != nil {
					return err
				}
				if opts.Auth, err = artifacts.NewAuth(cfg, anonymousReads, audience); err != nil {
					return err
				}
				kube, err := client.New(cfg, client.Options{Scheme: scheme.New()})
				if err != nil {
					return err
				}
				opts.Status, opts.IndexClient = kube, kube
				opts.AptSigningKey = aptSigningKey(opts.AptSigningKey, cmd.ErrOrStderr())
				if opts.AptSigningKey == "" && opts.Index != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "bpa serve: no apt repository, so nothing to record in ArtifactIndex %s\n", opts.Index)
					opts.Index = ""
				}
				if s3.Endpoint != "" {
					if opts.Backups, err = artifacts.NewS3Backups(ctx, s3); err != nil {
						return err
					}
				}
				h, err := artifacts.NewServer(ctx, opts)
				if err != nil {
					return err
				}
				srv := limits.server(h)
				go func() {
					<-ctx.Done()
					shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_ = srv.Shutdown(shutdown)
				}()
				fmt.Fprintf(cmd.ErrOrStderr(), "bpa serve: listening on %s, store %s, etcd backups %s\n", listen, opts.Dir, backupsWhere(opts.Dir, s3))
				l, err := net.Listen("tcp", listen)
				if err != nil {
					return err
				}
				l = netutil.LimitListener(l, limits.maxConns)
				if certFile == "" {
					err = srv.Serve(l)
				} else {
					srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: reloading(certFile, keyFile)}
					err = srv.ServeTLS(l, "", "")
				}
				if errors.Is(err, http.ErrServerClosed) {
					return nil
				}
				return err
			},
		}
		f := cmd.Flags()
		f.StringVar(&opts.Dir, "dir", "/var/lib/bpa-artifacts", "store (a persistent volume): uploads, files, metadata and the registry")
		f.StringVar(&listen, "listen", ":8443", "listen address")
		f.StringVar(&certFile, "tls-cert-file", "", "serving certificate, PEM (e.g. tls.crt of a cert-manager Secret); reloaded when it changes")
		f.StringVar(&keyFile, "tls-private-key-file", "", "its private key, PEM (tls.key)")
		f.BoolVar(&plainHTTP, "plain-http", false, "serve without TLS (tokens then cross the network in clear: test benches only)")
		f.StringVar(&audience, "token-audience", artifacts.DefaultAudience, "the audience a caller's token must be minted for (TokenRequest, `kubectl create token --audience`); tokens for the Kubernetes API are refused, as the server could replay them")
		f.BoolVar(&anonymousReads, "anonymous-reads", false, "let nodes download files and pull images without a token")
		f.StringVar(&opts.URL, "url", os.Getenv("BPA_ARTIFACTS_URL"), "base URL nodes reach the server at, for the OS image URLs it shows (default: each request's own)")
		f.StringVar(&opts.AptSigningKey, "apt-signing-key", "", "armored, unencrypted OpenPGP private key that signs the apt repository at /apt/; without one (or when the file does not exist) /apt/ is off. Read at start only")
		f.StringVar(&opts.Index, "index", "", "the ArtifactIndex to record the apt repository's packages in (the newest version of each, which Softwares saying version: latest follow); the BPAPolicy names it for this server. Empty records nothing")
		f.Int64Var(&opts.MaxSize, "max-upload-size", artifacts.DefaultMaxSize, "largest upload in bytes")
		f.IntVar(&limits.maxConns, "max-connections", 512, "connections served at once; more wait to be accepted")
		f.DurationVar(&limits.stall, "stall-timeout", 2*time.Minute, "a request whose body or response makes no progress for this long is cut (a slow but moving upload or download is not)")
		f.DurationVar(&limits.idle, "idle-timeout", 2*time.Minute, "how long a kept-alive connection may sit idle")
		f.DurationVar(&opts.UploadTTL, "upload-ttl", artifacts.DefaultUploadTTL, "how long an interrupted upload stays resumable after its last byte")
		f.Var(bytesFlag{&opts.QuotaTotal}, "quota-total", "bytes the store may hold in all: published files, uploads in progress (at their declared length), the registry (a Kubernetes quantity: 90Gi); 0 is unlimited. Set it below the volume's size: an upload that would pass it is refused at its start with 507, a full volume fails uploads halfway")
		f.Var(bytesFlag{&opts.QuotaPerUploader}, "quota-per-uploader", "bytes one uploader's files, uploads in progress and registry blobs may hold (a quantity: 20Gi); 0 is unlimited")
		backupS3Flags(f, &s3)
		return cmd
	})
}

// backupS3Flags are the S3 bucket the admin keeps /backups/ in instead of --dir. The keys
// are files (a Secret mounted read-only), never flags or environment values a Pod spec would
// show in clear.
func backupS3Flags(f *pflag.FlagSet, o *artifacts.S3BackupOptions) {
	f.StringVar(&o.Endpoint, "backup-s3-endpoint", "", "keep the etcd snapshots of /backups/ in this S3-compatible service (https://host[:port]) instead of --dir; steps still talk to this server, which alone holds the keys")
	f.StringVar(&o.Bucket, "backup-s3-bucket", "", "the bucket (it must exist)")
	f.StringVar(&o.Prefix, "backup-s3-prefix", "", "put before every key: <prefix>/backups/<namespace>/<cluster>/<name>")
	f.StringVar(&o.Region, "backup-s3-region", "", "the bucket's region (default: asked of the service)")
	f.BoolVar(&o.PathStyle, "backup-s3-path-style", false, "address the bucket in the path (https://host/bucket/key), as most on-site services need, not as a host name")
	f.StringVar(&o.CAFile, "backup-s3-ca-file", "", "PEM bundle of the CAs the service's certificate is checked against (default: the system's); read at start")
	f.StringVar(&o.AccessKeyFile, "backup-s3-access-key-id-file", "", "file holding the access key id (a mounted Secret); read for each request, so a rotated Secret takes effect")
	f.StringVar(&o.SecretKeyFile, "backup-s3-secret-access-key-file", "", "file holding the secret access key (a mounted Secret)")
}

// backupsWhere says where the snapshots go, for the start-up line.
func backupsWhere(dir string, s3 artifacts.S3BackupOptions) string {
	if s3.Endpoint == "" {
		return filepath.Join(dir, "backups")
	}
	return s3.Endpoint + ", bucket " + path.Join(s3.Bucket, strings.Trim(s3.Prefix, "/"), "backups")
}

// aptSigningKey is the --apt-signing-key file to sign /apt/ with, or "" (the repository off)
// when the file does not exist: config/serve mounts it from an optional Secret, so no
// Secret means no repository, said once on stderr. Any other problem with the file is kept
// for artifacts.NewServer to refuse, so a key that is there but unreadable or malformed
// stops the server instead of quietly turning the repository off.
func aptSigningKey(path string, stderr io.Writer) string {
	if _, err := os.Stat(path); path != "" && errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(stderr, "bpa serve: %s does not exist, the apt repository is off\n", path)
		return ""
	}
	return path
}

// reloading serves the key pair in certFile and keyFile, read again when the certificate
// file changes, so a Secret that cert-manager renews takes effect without a restart.
func reloading(certFile, keyFile string) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	var mu sync.Mutex
	var cert *tls.Certificate
	var loaded time.Time
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		defer mu.Unlock()
		st, err := os.Stat(certFile)
		if err != nil {
			return nil, err
		}
		if cert == nil || !st.ModTime().Equal(loaded) {
			c, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, err
			}
			cert, loaded = &c, st.ModTime()
		}
		return cert, nil
	}
}

// serveLimits bound what unauthenticated clients can hold: connections, and time without
// progress. A whole-request read or write timeout would cut a multi-GiB tus PATCH or image
// download on a slow link, so each deadline is pushed on while bytes move (progressDeadlines).
type serveLimits struct {
	maxConns    int
	stall, idle time.Duration
}

func (l serveLimits) server(h http.Handler) *http.Server {
	return &http.Server{Handler: progressDeadlines(h, l.stall), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: l.idle}
}

// progressDeadlines sets a read and a write deadline of stall on each request, and pushes
// each on by stall whenever the body yields bytes or the response takes some.
func progressDeadlines(h http.Handler, stall time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(stall))
		_ = rc.SetWriteDeadline(time.Now().Add(stall))
		r.Body = &progressBody{ReadCloser: r.Body, rc: rc, stall: stall}
		h.ServeHTTP(&progressWriter{ResponseWriter: w, rc: rc, stall: stall}, r)
	})
}

type progressBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	stall time.Duration
}

func (b *progressBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.stall))
	}
	return n, err
}

type progressWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (w *progressWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController (tusd's, distribution's) reach the connection.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bytesFlag is a byte count given as a Kubernetes quantity (90Gi, 500M, 1e9).
type bytesFlag struct{ n *int64 }

func (f bytesFlag) String() string {
	if f.n == nil {
		return "0"
	}
	return resource.NewQuantity(*f.n, resource.BinarySI).String()
}

func (f bytesFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("want a quantity such as 90Gi: %w", err)
	}
	n := q.Value() // rounded up, so compared below
	if q.Sign() < 0 || q.Cmp(*resource.NewQuantity(n, resource.BinarySI)) != 0 {
		return fmt.Errorf("%s: want a whole, non-negative number of bytes", s)
	}
	*f.n = n
	return nil
}

func (bytesFlag) Type() string { return "quantity" }
