// Package installsoftware is `bpa step install-software`: one host of a software run, one
// Argo node, retried on its own by the template's retryStrategy.
//
// The host comes as one object of resolve-nodes' output (--host, see software.Node). The step
//
//  1. validates the host, every item and the versions its latest items resolve to (Debian
//     syntax) before anything else, so a hostile value never reaches a command, not even a
//     quoted one;
//  2. reads the installed versions over SSH with dpkg-query; if the host already satisfies
//     every item, it stops there: no apt-get at all;
//  3. otherwise, when installing, adds spec.aptSource's repository (--apt-url, with the site
//     admin's --apt-key and --artifacts-ca: the CA, the key, apt preferences that let it
//     supply only the packages this Software names, and a deb822 source, each written
//     by a fixed script and left alone when current), runs apt-get update, checks with apt-cache that every name
//     it will hand apt-get is a package of exactly that name (apt-get would read any other as
//     a pattern), then runs install (with the pinned versions) and/or remove;
//  4. reads the versions back and fails if dpkg does not report the wanted state, whatever
//     apt-get's exit status said.
//
// It writes the host's result (bpav1.HostSoftwareStatus: packages with wanted and installed
// versions, and whether anything changed) to --output, which becomes the node's `result`
// output parameter. The result is written on failure too, as far as the step got, so the CR
// status shows what a failed host has.
package installsoftware

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/nodetrust"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// Result phases, as Argo names node phases.
const (
	PhaseSucceeded = "Succeeded"
	PhaseFailed    = "Failed"
)

// Command returns `bpa step install-software`.
func Command() *cobra.Command {
	o := options{logf: log.Printf}
	return stepcmd.Command(stepcmd.Step{
		Name:  "install-software",
		Short: "Bring one host's Debian packages to the wanted state over SSH",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.flags = fs
			fs.StringVar(&o.host, "host", "", `the host, as JSON: {"name","ip","roles","packages"} (one item of resolve-nodes' output)`)
			fs.StringVar(&o.output, "output", stepio.Out(stepio.ResultFile), "file to write the host's result (JSON) to")
			fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound on the whole step")
			fs.StringVar(&o.aptURL, "apt-url", "", "artifact server whose signed apt repository (URL/apt/) the host gets, \"\" for none")
			fs.StringVar(&o.aptKey, "apt-key", "", "armored OpenPGP public key that signs that repository (the site policy's)")
			fs.StringVar(&o.artifactsCA, "artifacts-ca", "", "PEM CA of that server's certificate (the site policy's), \"\" for none")
			o.ssh.AddFlags(fs)
		},
		Run: func(ctx context.Context) error { return o.run(ctx) },
	})
}

type options struct {
	host, output                string
	aptURL, aptKey, artifactsCA string
	timeout                     time.Duration
	ssh                         sshexec.Flags
	flags                       *pflag.FlagSet
	logf                        func(format string, args ...any)
}

// run installs and always writes the result, then reports the install's error (or a failure
// to write the result).
func (o *options) run(ctx context.Context) error {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	res := &bpav1.HostSoftwareStatus{}
	err := o.install(ctx, res)
	res.Phase = PhaseSucceeded
	if err != nil {
		res.Phase, res.Message = PhaseFailed, err.Error()
	}
	o.logf("%s", software.HostLine(*res))
	data, merr := json.Marshal(res)
	if merr == nil {
		merr = stepio.WriteOutput(o.output, data)
	}
	return errors.Join(err, merr)
}

func (o *options) install(ctx context.Context, res *bpav1.HostSoftwareStatus) error {
	node, items, err := parseHost(o.host)
	res.Name, res.IP = node.Name, node.IP
	if err != nil {
		return err
	}
	who := fmt.Sprintf("%s (%s)", node.Name, node.IP)
	var repo aptRepo
	if o.aptURL != "" {
		if repo.key, err = nodetrust.ParseAptKey([]byte(o.aptKey)); err != nil {
			return fmt.Errorf("--apt-key: %w", err)
		}
		if _, err := nodetrust.AptSource(o.aptURL); err != nil {
			return fmt.Errorf("--apt-url: %w", err)
		}
		if o.artifactsCA != "" {
			if repo.certs, err = nodetrust.Parse([]byte(o.artifactsCA)); err != nil {
				return fmt.Errorf("--artifacts-ca: %w", err)
			}
		}
	}

	cfg := o.ssh.Config(o.flags, nil)
	cfg.Logf = o.logf
	client, err := sshexec.Dial(ctx, node.IP, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	defer client.Close()

	before, err := plan(ctx, client, items, node.Latest)
	if err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	res.Packages = before.Packages
	if !before.Changed() {
		o.logf("%s: all %d packages already in the wanted state; nothing to do", who, len(items))
		return nil
	}

	res.Changed = true
	o.logf("%s: to install: %v; to remove: %v", who, before.Install, before.Remove)
	apt := func(argv []string) error {
		start := time.Now()
		if _, err := client.Output(ctx, argv); err != nil {
			// Record what the host has now, after a partial install, if it can still be asked:
			// with a deadline of its own, since the step's may be what just ran out.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if now, qerr := plan(rctx, client, items, node.Latest); qerr == nil {
				res.Packages = now.Packages
			}
			cancel()
			return fmt.Errorf("%s: %s: %w", who, strings.Join(argv, " "), err)
		}
		o.logf("%s: %s (%v)", who, strings.Join(argv, " "), time.Since(start).Round(time.Millisecond))
		return nil
	}
	if argv := before.Update(); argv != nil {
		if o.aptURL != "" {
			if err := o.addAptSource(ctx, client, repo, who, before.Names()); err != nil {
				return err
			}
		}
		if err := apt(argv); err != nil {
			return err
		}
	}
	if err := known(ctx, client, before.Names()); err != nil {
		return fmt.Errorf("%s: %w", who, err)
	}
	for _, argv := range before.Changes() {
		if err := apt(argv); err != nil {
			return err
		}
	}

	after, err := plan(ctx, client, items, node.Latest)
	if err != nil {
		return fmt.Errorf("%s: after installing: %w", who, err)
	}
	res.Packages = after.Packages
	if bad := after.Unsatisfied(); len(bad) > 0 {
		return fmt.Errorf("%s: apt-get succeeded but dpkg reports: %s", who, strings.Join(bad, "; "))
	}
	return nil
}

// aptRepo is --apt-key and --artifacts-ca as parsed before anything else runs.
type aptRepo struct {
	key   []byte
	certs []*x509.Certificate
}

// addAptSource puts the artifact server's CA, the repository's key and its source on the
// host, before the apt-get update that reads them.
func (o *options) addAptSource(ctx context.Context, client *sshexec.Client, repo aptRepo, who string, names []string) error {
	if len(repo.certs) > 0 {
		changed, err := nodetrust.InstallCAOn(ctx, client, repo.certs)
		if err != nil {
			return fmt.Errorf("%s: installing the artifact server's CA: %w", who, err)
		}
		if changed {
			o.logf("%s: artifact server CA installed (%s and the OS trust store)", who, nodetrust.Path)
		}
	}
	changed, err := nodetrust.InstallAptSource(ctx, client, repo.key, o.aptURL, names)
	if err != nil {
		return fmt.Errorf("%s: adding the apt repository of %s: %w", who, o.aptURL, err)
	}
	if changed {
		o.logf("%s: apt repository %s/apt/ added (%s, checked with %s, supplying only %s: %s)", who, o.aptURL,
			bpav1.AptSourcePath, bpav1.AptKeyPath, strings.Join(names, " "), bpav1.AptPreferencesPath)
	}
	return nil
}

// known fails unless apt has a package of exactly each name (see software.KnownCommand), so
// that apt-get is never handed a name it would read as a pattern.
func known(ctx context.Context, client *sshexec.Client, names []string) error {
	stdout, stderr, code, err := client.Run(ctx, software.KnownCommand(names))
	if err != nil {
		return fmt.Errorf("asking apt-cache about the packages: %w", err)
	}
	// apt-cache show exits 100 when it finds none of the names; stdout answers either way.
	if code != 0 && code != 100 {
		return fmt.Errorf("asking apt-cache about the packages: %w", &sshexec.ExitError{Command: "apt-cache", Code: code, Stderr: sshexec.Tail(stderr, 512)})
	}
	if unknown := software.Unknown(names, stdout); len(unknown) > 0 {
		return fmt.Errorf("apt knows no package named %s (apt-cache show finds none of exactly that name); nothing was installed or removed",
			strings.Join(unknown, ", "))
	}
	return nil
}

// plan reads the installed versions and compares them with the items, latest ones with
// their targets (software.Node.Latest).
func plan(ctx context.Context, client *sshexec.Client, items []bpav1.SoftwareItem, latest map[string]string) (software.Plan, error) {
	out, err := client.Output(ctx, software.QueryCommand())
	if err != nil {
		return software.Plan{}, fmt.Errorf("reading installed packages: %w", err)
	}
	installed, err := software.ParseDpkgQuery(out)
	if err != nil {
		return software.Plan{}, err
	}
	return software.PlanHost(items, installed, latest)
}

// parseHost decodes and validates --host. It returns what it could decode even on error, so
// the result names the host.
func parseHost(s string) (software.Node, []bpav1.SoftwareItem, error) {
	var n software.Node
	if strings.TrimSpace(s) == "" {
		return n, nil, errors.New("--host is required")
	}
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return software.Node{}, nil, fmt.Errorf("--host is not a host object: %w", err)
	}
	if n.Name == "" {
		return n, nil, errors.New("--host has no name")
	}
	if net.ParseIP(n.IP) == nil {
		return n, nil, fmt.Errorf("host %s: %q is not an IP address", n.Name, n.IP)
	}
	items, err := software.Normalize(n.Packages)
	if err != nil {
		return n, nil, fmt.Errorf("host %s: %w", n.Name, err)
	}
	// The latest items' targets are checked before any host is contacted, like the items.
	if _, err := software.PlanHost(items, nil, n.Latest); err != nil {
		return n, nil, fmt.Errorf("host %s: %w", n.Name, err)
	}
	return n, items, nil
}
