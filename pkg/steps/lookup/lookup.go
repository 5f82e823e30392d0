// Package lookup is `bpa step lookup`, the first step of an ad-hoc run
// (`argo submit --from workflowtemplate/bpa-provision -p provisioning=<name>`). It reads the
// CR, applies the checks the controller applies before a run, and writes the same
// parameters the controller would have put on its Workflow, so both kinds of run take the
// same per-cluster lock and call the steps with the same values. For a Provisioning it also
// writes the run's plan, as the controller plans a rerun (translator.AdHocParameters): which
// of the template's step slots run, with which operations.
package lookup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/policy"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step lookup`.
func Command() *cobra.Command {
	var o options
	return stepcmd.Command(stepcmd.Step{
		Name:  "lookup",
		Short: "Read a Provisioning or Software CR and write its Workflow parameters (ad-hoc runs)",
		Flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the CR")
			cmd.Flags().StringVar(&o.provisioning, "provisioning", "", "name of the Provisioning")
			cmd.Flags().StringVar(&o.software, "software", "", "name of the Software")
			cmd.Flags().StringVar(&o.cluster, "cluster", "", "the cluster whose mutex the run holds: the Provisioning must still belong to it (empty: not checked)")
			cmd.Flags().StringVar(&o.outputDir, "output-dir", stepio.OutDir, "directory to write one file per parameter")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	namespace, provisioning, software, cluster, outputDir string
}

func (o options) run(ctx context.Context, c client.Client) error {
	params, err := o.parameters(ctx, c)
	if err != nil {
		return err
	}
	for name, value := range params {
		if err := stepio.WriteOutput(filepath.Join(o.outputDir, name), []byte(value)); err != nil {
			return err
		}
	}
	return nil
}

// parameters reads the CR and runs the checks the controller runs before it starts a run
// (the site policy, the cluster's holder, the SSH Secret's consent): an ad-hoc run gets no
// more than a controller run would.
func (o options) parameters(ctx context.Context, c client.Client) (map[string]string, error) {
	pol, err := policy.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	var params map[string]string
	var refusal *policy.Refusal
	switch {
	case o.provisioning != "" && o.software == "":
		params, refusal, err = o.provisioningParameters(ctx, c, pol)
	case o.software != "" && o.provisioning == "":
		params, refusal, err = o.softwareParameters(ctx, c, pol)
	default:
		return nil, errors.New("exactly one of --provisioning and --software is required")
	}
	if err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, fmt.Errorf("%s: %s", refusal.Reason, refusal.Message)
	}
	return params, nil
}

// provisioningParameters are the Provisioning's parameters and the run's plan.
func (o options) provisioningParameters(ctx context.Context, c client.Client, pol policy.Policy) (map[string]string, *policy.Refusal, error) {
	p := &bpav1.Provisioning{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.provisioning}, p); err != nil {
		return nil, nil, fmt.Errorf("reading Provisioning %s/%s: %w", o.namespace, o.provisioning, err)
	}
	params, err := translator.ProvisioningParameters(p)
	if err != nil {
		return nil, nil, err
	}
	if o.cluster != "" && params["cluster"] != o.cluster {
		return nil, nil, fmt.Errorf("Provisioning %s/%s now belongs to cluster %s, not %s, whose lock this run holds: submit the run again", o.namespace, o.provisioning, params["cluster"], o.cluster)
	}
	siblings := &bpav1.ProvisioningList{}
	if err := c.List(ctx, siblings, client.InNamespace(o.namespace), client.MatchingLabels{bpav1.ClusterLabel: params["cluster"]}); err != nil {
		return nil, nil, fmt.Errorf("listing the Provisionings of cluster %s: %w", params["cluster"], err)
	}
	refusal, err := policy.AdmitProvisioning(ctx, pol, c, p, params["cluster"], params["ssh-secret"], siblings.Items)
	if err != nil || refusal != nil {
		return nil, refusal, err
	}
	// The CA the run installs on the nodes for spec.offline's server: the admin's only.
	ca, err := pol.ArtifactsCA(p)
	if err != nil {
		return nil, nil, err
	}
	server, serverCA, err := pol.BackupServer(p)
	if err != nil {
		return nil, nil, err
	}
	params, err = translator.AdHocParameters(p, translator.Options{ArtifactsCA: ca, BackupServer: server, BackupServerCA: serverCA})
	return params, nil, err
}

// softwareParameters are the Software's parameters, with its apt repository.
func (o options) softwareParameters(ctx context.Context, c client.Client, pol policy.Policy) (map[string]string, *policy.Refusal, error) {
	s := &bpav1.Software{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: o.software}, s); err != nil {
		return nil, nil, fmt.Errorf("reading Software %s/%s: %w", o.namespace, o.software, err)
	}
	params, err := translator.SoftwareParameters(s)
	if err != nil {
		return nil, nil, err
	}
	refusal, err := policy.AdmitSoftware(ctx, pol, c, s, params["cluster"], params["ssh-secret"])
	if err != nil || refusal != nil {
		return nil, refusal, err
	}
	// The apt repository spec.aptSource adds, with the admin's key and CA for it.
	repo, err := policy.SoftwareAptRepo(ctx, pol, c, s, params["cluster"])
	if err != nil {
		return nil, nil, err
	}
	if repo != nil {
		params["apt-url"], params["apt-key"], params["artifacts-ca"] = repo.URL, repo.Key, repo.CA
	}
	// The newest versions the latest items follow, from the index the policy names for
	// that server; an ad-hoc run visits every host (scope all).
	latest, err := policy.SoftwareLatest(ctx, pol, c, s, params["cluster"])
	if err != nil {
		return nil, nil, err
	}
	if latest != nil {
		params["latest"] = software.FormatLatest(latest.Versions)
	}
	return params, nil, nil
}
