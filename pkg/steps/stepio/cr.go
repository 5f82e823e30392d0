package stepio

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// CR names the Provisioning a step carries out, so every step reads the CR, and refuses a
// changed one, alike.
type CR struct {
	Namespace  string
	Name       string
	Generation int64
}

// AddFlags registers --namespace, --provisioning and --generation.
func (r *CR) AddFlags(fs *pflag.FlagSet) {
	r.AddNameFlags(fs)
	fs.Int64Var(&r.Generation, "generation", 0,
		"metadata.generation the run was started for; the step fails if the CR has changed since (0: no check)")
}

// AddNameFlags registers --namespace and --provisioning only, for the steps that act on the
// CR as it is (verify, publish-kubeconfig): Get then checks no generation.
func (r *CR) AddNameFlags(fs *pflag.FlagSet) {
	fs.StringVar(&r.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Provisioning")
	fs.StringVar(&r.Name, "provisioning", "", "name of the Provisioning")
}

// Get reads the Provisioning. A run works for one generation of the spec: if the CR has
// changed since the run started, continuing would build a cluster nobody asked for, so it
// fails and leaves it to the controller's next run.
func (r CR) Get(ctx context.Context, c client.Reader) (*bpav1.Provisioning, error) {
	if r.Name == "" {
		return nil, errors.New("--provisioning is required")
	}
	if r.Namespace == "" {
		return nil, errors.New("--namespace is required (or set POD_NAMESPACE)")
	}
	p := &bpav1.Provisioning{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, p); err != nil {
		return nil, fmt.Errorf("reading Provisioning %s/%s: %w", r.Namespace, r.Name, err)
	}
	if r.Generation > 0 && p.Generation != r.Generation {
		return nil, &ChangedError{Name: r.Name, Was: r.Generation, Now: p.Generation}
	}
	return p, nil
}

// ExitChanged is the exit status of a step that found its Provisioning changed since the
// run started (ChangedError). No retry of the step can succeed, so the steps' retry
// strategies never retry it (workflowtemplates.NotChangedExpression): a drift check that
// outlived its generation once retried resolve-leases for its whole 15 minutes, and held
// every later check back.
const ExitChanged = 3

// ChangedError is CR.Get's refusal of a Provisioning whose generation is no longer the run's.
type ChangedError struct {
	Name     string
	Was, Now int64
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("Provisioning %s changed since this run started (generation %d, now %d); the controller starts a new run", e.Name, e.Was, e.Now)
}

// ExitCode is the step's exit status (ExitChanged): `bpa` exits with it.
func (e *ChangedError) ExitCode() int { return ExitChanged }
