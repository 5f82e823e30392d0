// Package cli wires BPA's subcommands. Each subcommand lives in its own file and registers
// itself through register or registerKube, so the verbs stay independent of each other.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// subcommands is filled by the init functions of this package's files; each is handed the
// kubeconfig flags the root command shares.
var subcommands []func(*kubeFlags) *cobra.Command

// register adds a verb that reads no cluster: the root's kubeconfig flags are refused on it.
func register(f func() *cobra.Command) {
	subcommands = append(subcommands, func(*kubeFlags) *cobra.Command { return f() })
}

// registerKube adds a verb that talks to a cluster through the root's kubeconfig flags;
// use says which of them it honours (the others are refused on it).
func registerKube(use kubeUse, f func(*kubeFlags) *cobra.Command) {
	subcommands = append(subcommands, func(k *kubeFlags) *cobra.Command {
		cmd := f(k)
		markKubeUse(cmd, use)
		return cmd
	})
}

// InCluster marks cmd, `bpa step`, as run in a pod: its steps take the pod's in-cluster
// config (or $KUBECONFIG) and their own --namespace, and refuse the root's --kubeconfig
// and --context. cmd/bpa adds it, so that pkg/cli imports no step.
func InCluster(cmd *cobra.Command) *cobra.Command {
	markKubeUse(cmd, kubeInCluster)
	return cmd
}

// NewRootCommand builds the `bpa` command tree.
func NewRootCommand() *cobra.Command {
	k := newKubeFlags()
	root := &cobra.Command{
		Use:           "bpa",
		Short:         "BPA turns bare-metal hosts into Kubernetes clusters, declaratively, with Argo Workflows",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A kubeconfig flag given to a verb that would not use it is an error, not ignored.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return k.check(cmd) },
	}
	k.register(root.PersistentFlags())
	// Installed as kubectl-bpa, the binary is a kubectl plugin run as `kubectl bpa`; its
	// help and usage lines should say so.
	if plugin, ok := strings.CutPrefix(filepath.Base(os.Args[0]), "kubectl-"); ok {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl " + plugin}
	}
	for _, f := range subcommands {
		root.AddCommand(f(k))
	}
	return root
}

// Exit statuses: as grep and diff do, a verb that checks says "refused" apart from "could
// not": 1 means the input was read, judged and refused (lint's problems, a change plan
// refuses, a host that cannot be matched, artifacts the server lacks); 2 means the verb
// failed (a bad flag, a file that cannot be read, an apiserver out of reach). A step may
// name a status of its own (3: its CR changed since the run started, stepio.ExitChanged).
const (
	exitRefused = 1
	exitFailed  = 2
)

// ExitError carries a specific exit status; Code exitRefused marks a refusal (see
// refused). An ExitError without a message is one whose output already said why.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitError) Unwrap() error { return e.Err }

// refused marks err as a refusal of input the verb read and judged (exit status 1).
func refused(err error) error { return &ExitError{Code: exitRefused, Err: err} }

// judged is refused for the error of reading and judging an input file, except when the
// file could not be read at all (a *fs.PathError: missing, unreadable), which is a failure.
func judged(err error) error {
	var pe *fs.PathError
	if err == nil || errors.As(err, &pe) {
		return err
	}
	return refused(err)
}

// ExitCode prints err (unless it was already reported) to stderr and returns the process's
// exit status.
func ExitCode(err error) int { return report(os.Stderr, err) }

func report(stderr io.Writer, err error) int {
	var exit *ExitError
	if errors.As(err, &exit) {
		if exit.Err != nil && exit.Err.Error() != "" {
			fmt.Fprintln(stderr, "Error:", exit.Err)
		}
		return exit.Code
	}
	fmt.Fprintln(stderr, "Error:", err)
	// An error of a step's that names its own status (stepio.ChangedError: 3).
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return exitFailed
}

// signalContext is cmd's context, ended by SIGINT or SIGTERM; a second signal then stops
// the process at once, as controller-runtime's SetupSignalHandler does (which may be
// called only once in a process, and ignores cmd's context). stop releases the signals.
func signalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the default action again: a second ^C ends the process
	}()
	return ctx, stop
}
