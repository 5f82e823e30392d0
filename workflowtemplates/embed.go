// Package workflowtemplates embeds BPA's Argo WorkflowTemplates. The controller applies
// them; `kubectl apply -k config/` applies the same files; the translator's Workflows call
// their step templates by templateRef.
package workflowtemplates

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Names of the templates, as Workflows reference them.
const (
	Provision = "bpa-provision"
	Software  = "bpa-software"
)

// InfraRetryExpression is the retryStrategy expression of the steps that are retried only
// when the node lost them, never for what they said: Argo's Error (the pod or the executor
// gone, or the executor's report refused while the apiserver restarts) or a container whose
// state the runtime lost (containerd restarted under it). The chaos soak (docs/soak.md)
// found both ending runs that nothing had failed. (run-kubespray has no retry: see its
// template.)
const InfraRetryExpression = `lastRetry.status == "Error" || lastRetry.message contains "Unknown (exit code 255)"`

//go:embed *.yaml
var files embed.FS

// All returns the WorkflowTemplates, sorted by name.
func All() ([]*wfv1.WorkflowTemplate, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*wfv1.WorkflowTemplate
	for _, n := range names {
		if n == "kustomization.yaml" {
			continue
		}
		data, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		wft := &wfv1.WorkflowTemplate{}
		if err := yaml.UnmarshalStrict(data, wft); err != nil {
			return nil, fmt.Errorf("workflowtemplates/%s: %w", n, err)
		}
		out = append(out, wft)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Getter serves the embedded templates to Argo's validator and template resolution.
type Getter map[string]*wfv1.WorkflowTemplate

// NewGetter indexes the embedded templates by name.
func NewGetter() (Getter, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	g := Getter{}
	for _, t := range all {
		g[t.Name] = t
	}
	return g, nil
}

// Get implements templateresolution.WorkflowTemplateNamespacedGetter.
func (g Getter) Get(name string) (*wfv1.WorkflowTemplate, error) {
	if t, ok := g[name]; ok {
		return t.DeepCopy(), nil
	}
	return nil, fmt.Errorf("workflowtemplates.argoproj.io %q not found", name)
}
