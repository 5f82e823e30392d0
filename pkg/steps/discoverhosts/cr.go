package discoverhosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
)

// CR names the Provisioning a step carries out. discover-hosts, resolve-leases and
// render-inventory share it, so the three read the CR, and refuse a changed one, alike.
type CR struct {
	Namespace  string
	Name       string
	Generation int64
}

// AddFlags registers --namespace, --provisioning and --generation.
func (r *CR) AddFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the Provisioning")
	cmd.Flags().StringVar(&r.Name, "provisioning", "", "name of the Provisioning")
	cmd.Flags().Int64Var(&r.Generation, "generation", 0,
		"metadata.generation the run was started for; the step fails if the CR has changed since (0: no check)")
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
		return nil, fmt.Errorf("Provisioning %s changed since this run started (generation %d, now %d); the controller starts a new run",
			r.Name, r.Generation, p.Generation)
	}
	return p, nil
}

// BareMetalHostNamespace is where the CR's hosts live.
func BareMetalHostNamespace(p *bpav1.Provisioning) string {
	if p.Spec.BareMetalHostNamespace != "" {
		return p.Spec.BareMetalHostNamespace
	}
	return p.Namespace
}

// ReadHosts reads a hosts file as discover-hosts and resolve-leases write it: a JSON list
// of HostStatus. Unknown fields are errors: the file crosses a process boundary and a
// misspelt field would silently drop a host's address.
func ReadHosts(path string) ([]bpav1.HostStatus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading hosts: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var hosts []bpav1.HostStatus
	if err := dec.Decode(&hosts); err != nil {
		return nil, fmt.Errorf("reading hosts from %s: %w", path, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("reading hosts from %s: the list is empty", path)
	}
	return hosts, nil
}

// WriteHosts writes hosts as the JSON list the next step reads (an Argo output parameter).
func WriteHosts(path string, hosts []bpav1.HostStatus) error {
	data, err := json.Marshal(hosts)
	if err != nil {
		return err
	}
	return stepcmd.WriteOutput(path, data)
}
