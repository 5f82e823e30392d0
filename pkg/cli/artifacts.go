package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/akraino-edge-stack/bpa/pkg/artifacts"
	"github.com/akraino-edge-stack/bpa/pkg/describe"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

func init() {
	register(func() *cobra.Command {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		overrides := &clientcmd.ConfigOverrides{}
		var server, caFile string
		var plainHTTP bool
		var tok tokenOptions
		newClient := func(cmd *cobra.Command) (*artifacts.Client, error) {
			// The kubeconfig's token goes with every request: never in clear by accident.
			if !strings.HasPrefix(server, "https://") && !(plainHTTP && strings.HasPrefix(server, "http://")) {
				return nil, fmt.Errorf("--server %q: must be an https:// URL (http:// only with --plain-http, for a test bench)", server)
			}
			return artifactsClient(cmd.Context(), rules, overrides, server, caFile, tok)
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
		pf.StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
		pf.StringVar(&overrides.CurrentContext, "context", "", "kubeconfig context to use")
		pf.StringVar(&tok.audience, "audience", artifacts.DefaultAudience, "the audience the server takes tokens for (its --token-audience)")
		pf.StringVar(&tok.file, "token-file", os.Getenv("BPA_ARTIFACTS_TOKEN_FILE"), "file holding a token for --audience, read at each request (default $BPA_ARTIFACTS_TOKEN_FILE)")
		pf.StringVar(&tok.serviceAccount, "service-account", "", "NAMESPACE/NAME of the ServiceAccount to request a token for, when the kubeconfig's user is not that ServiceAccount")

		var path string
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
				return printMeta(cmd, []artifacts.FileMeta{*m}, false)
			},
		}
		push.Flags().StringVar(&path, "path", "", "where the file is served, under the original domain (e.g. dl.k8s.io/release/v1.32.5/bin/linux/amd64/kubelet)")
		_ = push.MarkFlagRequired("path")

		var asJSON bool
		ls := &cobra.Command{
			Use:   "ls [PREFIX]",
			Short: "List files (path, size, sha256, uploader, upload time)",
			Args:  cobra.MaximumNArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := newClient(cmd)
				if err != nil {
					return err
				}
				l, err := c.List(cmd.Context(), strings.Join(args, ""))
				if err != nil {
					return err
				}
				return printMeta(cmd, l, asJSON)
			},
		}
		ls.Flags().BoolVar(&asJSON, "json", false, "print the full metadata as JSON (with the URL, and spec.image for OS images)")

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
					return &ExitError{Code: 1, Err: fmt.Errorf("%d of %d artifacts missing", len(missing), len(files)+len(images))}
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
func artifactsClient(ctx context.Context, rules *clientcmd.ClientConfigLoadingRules, overrides *clientcmd.ConfigOverrides,
	server, caFile string, tok tokenOptions) (*artifacts.Client, error) {
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
		if cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig(); err != nil {
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

func printMeta(cmd *cobra.Command, l []artifacts.FileMeta, asJSON bool) error {
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PATH\tSIZE\tSHA256\tUPLOADED BY\tUPLOADED AT")
	for _, m := range l {
		// What the server lists was named by uploaders (and by a server of any version):
		// escaped as describe escapes, so no name drives the terminal or reorders a line.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", describe.Clean(m.Path), artifacts.HumanBytes(m.Size), describe.Clean(m.SHA256),
			describe.Clean(m.UploadedBy), m.UploadedAt.Format("2006-01-02 15:04:05Z"))
	}
	return tw.Flush()
}
