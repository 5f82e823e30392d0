// Package stepcmd is the small shared harness of every `bpa step <name>` entrypoint.
//
// A step is a function of its flags and the cluster it runs against. On failure the harness
// writes a one-line reason to the container's termination-message file, which Kubernetes
// copies into the pod status and Argo shows as the node's message, and which BPA mirrors into
// the CR's status. Steps never print secrets; the harness prints only the error.
package stepcmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/akraino-edge-stack/bpa/pkg/apis/scheme"
)

// DefaultTerminationLog is Kubernetes' default terminationMessagePath.
const DefaultTerminationLog = "/dev/termination-log"

// maxTerminationMessage is what the kubelet keeps of a termination message.
const maxTerminationMessage = 4096

// Step is one DAG step: a name for `bpa step <name>`, flags, and the work.
type Step struct {
	Name  string
	Short string
	// Flags registers the step's flags on the command.
	Flags func(cmd *cobra.Command)
	// Run does the work. Its error becomes the Argo node message, so it must say what failed
	// in terms a cluster operator understands, naming the node, host or MAC concerned.
	Run func(ctx context.Context) error
	// RunWithClient, used instead of Run, is handed a client for the cluster the step runs in.
	RunWithClient func(ctx context.Context, c client.Client) error
}

// Command turns a Step into its cobra command.
func Command(s Step) *cobra.Command {
	var terminationLog string
	cmd := &cobra.Command{
		Use:   s.Name,
		Short: s.Short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err := s.run(ctx)
			if err != nil {
				writeTerminationMessage(terminationLog, err)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&terminationLog, "termination-log", "",
		"file the failure reason is written to: the container's terminationMessagePath, which the WorkflowTemplates pass explicitly")
	if s.Flags != nil {
		s.Flags(cmd)
	}
	return cmd
}

func (s Step) run(ctx context.Context) error {
	if s.RunWithClient == nil {
		return s.Run(ctx)
	}
	c, err := Client()
	if err != nil {
		return err
	}
	return s.RunWithClient(ctx, c)
}

func writeTerminationMessage(path string, err error) {
	if path == "" {
		return
	}
	msg := strings.TrimSpace(err.Error())
	if len(msg) > maxTerminationMessage {
		msg = msg[:maxTerminationMessage-3] + "..."
	}
	// Best effort: outside a pod the file may not be writable, and the error is printed anyway.
	_ = os.WriteFile(path, []byte(msg), 0o644)
}

// Client returns a client for the cluster the step runs in (in-cluster config, or
// KUBECONFIG outside a pod).
func Client() (client.Client, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}
