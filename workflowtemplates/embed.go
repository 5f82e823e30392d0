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
// found both ending runs that nothing had failed. A step's own failure is Failed, with
// a message such as "Error (exit code 2)", and is never retried.
const InfraRetryExpression = `lastRetry.status == "Error" || lastRetry.message contains "Unknown (exit code 255)"`

// NotChangedExpression is the retryStrategy expression of the steps retried on any failure
// but one: a step that found its Provisioning changed since the run started exits with
// stepio.ExitChanged, and no retry of it can succeed (the controller starts a new run).
// An Error (the node lost the step) has exit code -1 and is retried.
const NotChangedExpression = `lastRetry.exitCode != "3"`

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

// CheckArguments checks that each argument of the DAG tasks of templates names an input of
// the template the task calls, of the same kind: a parameter as a parameter, an artifact as
// an artifact. Argo's validator lets any other argument through and Argo ignores it, so an
// input with a default would quietly take the default: a run-kubespray task passing its
// operations as a parameter would run cluster.yml. A task's template is one of templates,
// or one of g's by templateRef.
func (g Getter) CheckArguments(templates []wfv1.Template) error {
	local := map[string]*wfv1.Template{}
	for i := range templates {
		local[templates[i].Name] = &templates[i]
	}
	for _, t := range templates {
		if t.DAG == nil {
			continue
		}
		for _, task := range t.DAG.Tasks {
			where := fmt.Sprintf("templates.%s.tasks.%s", t.Name, task.Name)
			called, name := local[task.Template], task.Template
			if ref := task.TemplateRef; ref != nil {
				name = ref.Name + "/" + ref.Template
				called = nil
				if wft, ok := g[ref.Name]; ok {
					called = wft.GetTemplateByName(ref.Template)
				}
			}
			if called == nil {
				return fmt.Errorf("%s: no template %s", where, name)
			}
			for _, p := range task.Arguments.Parameters {
				if called.Inputs.GetParameterByName(p.Name) == nil {
					return fmt.Errorf("%s.arguments.parameters.%s: %s has no input parameter %s%s", where, p.Name, name, p.Name, otherKind(called.Inputs.GetArtifactByName(p.Name) != nil, "an artifact"))
				}
			}
			for _, a := range task.Arguments.Artifacts {
				if called.Inputs.GetArtifactByName(a.Name) == nil {
					return fmt.Errorf("%s.arguments.artifacts.%s: %s has no input artifact %s%s", where, a.Name, name, a.Name, otherKind(called.Inputs.GetParameterByName(a.Name) != nil, "a parameter"))
				}
			}
		}
	}
	return nil
}

func otherKind(has bool, kind string) string {
	if has {
		return " (it takes it as " + kind + ")"
	}
	return ""
}
