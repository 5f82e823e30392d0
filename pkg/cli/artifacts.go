package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/rest"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

func init() {
	registerKube(kubeConfig, func(k *kubeFlags) *cobra.Command {
		var server, caFile string
		var plainHTTP bool
		var tok tokenOptions
		newClient := func(cmd *cobra.Command) (*artifacts.Client, error) {
			// The kubeconfig's token goes with every request: never in clear by accident.
			if !strings.HasPrefix(server, "https://") && !(plainHTTP && strings.HasPrefix(server, "http://")) {
				return nil, fmt.Errorf("--server %q: must be an https:// URL (http:// only with --plain-http, for a test bench)", server)
			}
			return artifactsClient(cmd.Context(), k, server, caFile, tok)
		}
		cmd := &cobra.Command{
			Use:   "artifacts",
			Short: "Upload, list, remove and check the files and images of a site's artifact server (bpa serve)",
			Long: "artifacts talks to `bpa serve` with a token minted for the server alone (audience --audience),\n" +
				"which the server checks with TokenReview and SubjectAccessReviews on artifacts.bpa.akraino.org;\n" +
				"a token for the Kubernetes API never leaves for the artifact server. The token is, in this order:\n" +
				"  --token-file FILE                e.g. from `kubectl create token SA -n NS --audience bpa-artifacts`\n" +
				"  --service-account NS/NAME        requested from the apiserver (TokenRequest) with the kubeconfig's\n" +
				"                                   credentials, which need create on serviceaccounts/token for NAME\n" +
				"  the kubeconfig's own ServiceAccount, when its user is one (a TokenRequest for itself: it needs\n" +
				"                                   create on its own serviceaccounts/token, see config/serve/rbac.yaml)\n" +
				"A kubeconfig user that is not a ServiceAccount (a person, with OIDC or a certificate) names the\n" +
				"ServiceAccount it uploads as with --service-account.",
		}
		pf := cmd.PersistentFlags()
		pf.StringVar(&server, "server", os.Getenv("BPA_ARTIFACTS_SERVER"), "the artifact server's URL (default $BPA_ARTIFACTS_SERVER)")
		pf.BoolVar(&plainHTTP, "plain-http", false, "allow an http:// server (the token then crosses the network in clear)")
		pf.StringVar(&caFile, "certificate-authority", os.Getenv("BPA_ARTIFACTS_CA"), "PEM CA that signed the server's certificate (default $BPA_ARTIFACTS_CA, else the system's)")
		pf.StringVar(&tok.audience, "audience", artifacts.DefaultAudience, "the audience the server takes tokens for (its --token-audience)")
		pf.StringVar(&tok.file, "token-file", os.Getenv("BPA_ARTIFACTS_TOKEN_FILE"), "file holding a token for --audience, read at each request (default $BPA_ARTIFACTS_TOKEN_FILE)")
		pf.StringVar(&tok.serviceAccount, "service-account", "", "NAMESPACE/NAME of the ServiceAccount to request a token for, when the kubeconfig's user is not that ServiceAccount")

		var path string
		var pushOut *outputFormat
		push := &cobra.Command{
			Use:   "push FILE --path DOMAIN/PATH",
			Short: "Upload a file, resumably: run the same command again after an interrupt and it goes on where the server stopped",
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := newClient(cmd)
				if err != nil {
					return err
				}
				bar := progressBar(cmd, filepath.Base(args[0]))
				c.Progress = bar
				c.Resuming = func(offset, total int64) {
					fmt.Fprintf(cmd.ErrOrStderr(), "resuming at %s of %s\n", artifacts.HumanBytes(offset), artifacts.HumanBytes(total))
				}
				m, err := c.Push(cmd.Context(), args[0], path)
				if bar != nil {
					fmt.Fprintln(cmd.ErrOrStderr())
				}
				if err != nil {
					return err
				}
				return pushOut.print(cmd.OutOrStdout(), m, func(w io.Writer) error { return printMeta(w, []artifacts.FileMeta{*m}) })
			},
		}
		push.Flags().StringVar(&path, "path", "", "where the file is served, under the original domain (e.g. dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet)")
		_ = push.MarkFlagRequired("path")
		pushOut = addOutputFlag(push, formatText, formatYAML, formatJSON)

		var asJSON bool
		var lsOut *outputFormat
		ls := &cobra.Command{
			Use:   "ls [PREFIX]",
			Short: "List files (path, size, sha256, uploader, upload time; -o yaml|json: the full metadata, with the URL, and spec.image for OS images)",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				if asJSON { // the deprecated alias
					if cmd.Flags().Changed("output") && lsOut.value != formatJSON {
						return fmt.Errorf("--json and -o %s disagree: give -o alone", lsOut.value)
					}
					lsOut.value = formatJSON
				}
				c, err := newClient(cmd)
				if err != nil {
					return err
				}
				l, err := c.List(cmd.Context(), strings.Join(args, ""))
				if err != nil {
					return err
				}
				return lsOut.print(cmd.OutOrStdout(), l, func(w io.Writer) error { return printMeta(w, l) })
			},
		}
		lsOut = addOutputFlag(ls, formatText, formatYAML, formatJSON)
		ls.Flags().BoolVar(&asJSON, "json", false, "the same as -o json")
		_ = ls.Flags().MarkDeprecated("json", "use -o json")

		rm := &cobra.Command{
			Use:   "rm PATH...",
			Short: "Delete files",
			Args:  cobra.MinimumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := newClient(cmd)
				if err != nil {
					return err
				}
				for _, p := range args {
					if err := c.Remove(cmd.Context(), p); err != nil {
						return err
					}
				}
				return nil
			},
		}

		mirror := &cobra.Command{
			Use:   "mirror DIR",
			Short: "Upload a directory as kubespray's contrib/offline/manage-offline-files.sh lays it out, and push the OCI image layouts in it",
			Long: "mirror walks DIR: a directory holding an oci-layout file is an OCI image layout, whose images\n" +
				"(named by their io.containerd.image.name or org.opencontainers.image.ref.name annotation) are\n" +
				"pushed to SERVER/<original registry>/<repository>; every other file is uploaded to its path\n" +
				"below DIR (below DIR/offline-files when that is there), skipping files the server already has.",
			Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := newClient(cmd)
				if err != nil {
					return err
				}
				return c.Mirror(cmd.Context(), args[0], cmd.OutOrStdout())
			},
		}

		var filesList, imagesList, ksVersion, kubeVersion, arch string
		check := &cobra.Command{
			Use:   "check (--kubespray v2.28.0 [--kubernetes 1.32.5] | --files files.list --images images.list)",
			Short: "List which files and images of a kubespray release's download table, or of kubespray's lists (contrib/offline/generate_list.sh), the server lacks",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := newClient(cmd)
				if err != nil {
					return err
				}
				var files, images []string
				if cmd.Flags().Changed("kubespray") || cmd.Flags().Changed("kubernetes") {
					// The same table run-kubespray's pre-flight reads (pkg/kubespray/downloads.go).
					d, err := kubespray.DownloadsFor(ksVersion, kubeVersion, arch)
					if err != nil {
						return err
					}
					files, images = d.Files, d.Images
				}
				if filesList != "" {
					if files, err = artifacts.ReadList(filesList); err != nil {
						return err
					}
				}
				if imagesList != "" {
					if images, err = artifacts.ReadList(imagesList); err != nil {
						return err
					}
				}
				missing, err := c.Missing(cmd.Context(), files, images)
				if err != nil {
					return err
				}
				for _, m := range missing {
					fmt.Fprintln(cmd.OutOrStdout(), "missing", m)
				}
				if len(missing) > 0 {
					return refused(fmt.Errorf("%d of %d artifacts missing", len(missing), len(files)+len(images)))
				}
				return nil
			},
		}
		check.Flags().StringVar(&filesList, "files", "", "file URLs, one a line (kubespray's temp/files.list)")
		check.Flags().StringVar(&imagesList, "images", "", "image references, one a line (kubespray's temp/images.list)")
		check.Flags().StringVar(&ksVersion, "kubespray", "", "check what this kubespray release downloads for a default cluster (default "+kubespray.DefaultVersion+")")
		check.Flags().StringVar(&kubeVersion, "kubernetes", "", "the Kubernetes version for --kubespray (default: the release's newest)")
		check.Flags().StringVar(&arch, "arch", "amd64", "the nodes' architecture for --kubespray")
		cmd.AddCommand(push, ls, rm, mirror, check)
		return cmd
	})
}

// artifactsClient authenticates with a token for the artifact server (serverTransport) over a
// transport that trusts caFile, the artifact server's CA rather than the apiserver's. The
// kubeconfig's credentials (any kind: token, certificate, exec plugin) only ever go to the
// apiserver, to request that token.
func artifactsClient(ctx context.Context, k *kubeFlags, server, caFile string, tok tokenOptions) (*artifacts.Client, error) {
	base := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--certificate-authority %s: no PEM certificate", caFile)
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var cfg *rest.Config
	if tok.file == "" {
		var err error
		if cfg, err = k.restConfig(); err != nil {
			return nil, err
		}
	}
	rt, err := serverTransport(ctx, cfg, tok, base)
	if err != nil {
		return nil, err
	}
	state, err := os.UserCacheDir()
	if err != nil {
		state = os.TempDir()
	}
	return &artifacts.Client{URL: server, HTTP: &http.Client{Transport: rt}, StateDir: filepath.Join(state, "bpa", "uploads")}, nil
}

// progressBar draws on stderr when it is a terminal, else returns nil.
func progressBar(cmd *cobra.Command, label string) func(done, total int64) {
	if f, ok := cmd.ErrOrStderr().(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	out := cmd.ErrOrStderr()
	last := -1
	return func(done, total int64) {
		pct := 100
		if total > 0 {
			pct = int(done * 100 / total)
		}
		if pct == last {
			return
		}
		last = pct
		fmt.Fprintf(out, "\r%-24.24s [%-40s] %3d%% %s/%s", label, strings.Repeat("=", pct*40/100), pct, artifacts.HumanBytes(done), artifacts.HumanBytes(total))
	}
}

// printMeta is the text form of `bpa artifacts ls` and `push`. What the server lists was
// named by uploaders (and by a server of any version): printTable escapes it, so no name
// drives the terminal or reorders a line.
func printMeta(w io.Writer, l []artifacts.FileMeta) error {
	rows := make([][]string, len(l))
	for i, m := range l {
		rows[i] = []string{m.Path, artifacts.HumanBytes(m.Size), m.SHA256, m.UploadedBy, m.UploadedAt.Format("2006-01-02 15:04:05Z")}
	}
	return printTable(w, []string{"PATH", "SIZE", "SHA256", "UPLOADED BY", "UPLOADED AT"}, rows)
}
