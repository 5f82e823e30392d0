package controller

import (
	"context"
	"fmt"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// FieldOwner is the field manager of everything the controller applies.
const FieldOwner = "bpa-controller"

// defaultStepImage is the image the embedded WorkflowTemplates name.
const defaultStepImage = "ghcr.io/akraino-edge-stack/bpa:latest"

// templateApplier server-side applies the embedded WorkflowTemplates when the manager
// starts, so the templates always match the binary that translates CRs into calls to them.
type templateApplier struct {
	client     client.Client
	namespaces []string
	image      string
}

// NeedLeaderElection: only the active replica writes.
func (a *templateApplier) NeedLeaderElection() bool { return true }

func (a *templateApplier) Start(ctx context.Context) error {
	return ApplyTemplates(ctx, a.client, a.namespaces, a.image)
}

// ApplyTemplates applies the WorkflowTemplates into each namespace with image as the step
// image (empty keeps the embedded one).
func ApplyTemplates(ctx context.Context, c client.Client, namespaces []string, image string) error {
	all, err := workflowtemplates.All()
	if err != nil {
		return err
	}
	for _, ns := range namespaces {
		for _, t := range all {
			wft := WithImage(t, image)
			wft.Namespace = ns
			wft.TypeMeta.APIVersion, wft.TypeMeta.Kind = wfv1.SchemeGroupVersion.String(), "WorkflowTemplate"
			if err := c.Patch(ctx, wft, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying WorkflowTemplate %s/%s: %w", ns, wft.Name, err)
			}
			log.FromContext(ctx).Info("applied WorkflowTemplate", "namespace", ns, "name", wft.Name)
		}
	}
	return nil
}

// WithImage returns a copy of t whose bpa containers use image.
func WithImage(t *wfv1.WorkflowTemplate, image string) *wfv1.WorkflowTemplate {
	t = t.DeepCopy()
	if image == "" || image == defaultStepImage {
		return t
	}
	for i := range t.Spec.Templates {
		tmpl := &t.Spec.Templates[i]
		if tmpl.Container != nil && tmpl.Container.Image == defaultStepImage {
			tmpl.Container.Image = image
		}
		for j := range tmpl.InitContainers {
			if tmpl.InitContainers[j].Image == defaultStepImage {
				tmpl.InitContainers[j].Image = image
			}
		}
	}
	return t
}
