package bpatest

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
)

// CreateFixture creates the objects of a YAML file in ns, with their status: the status of
// BPA's kinds is written through its subresource, as the controller writes it; other kinds
// (Argo's, whose CRD has no status subresource) keep theirs from the create.
func CreateFixture(ctx context.Context, c client.Client, ns, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	objs, err := validation.ReadDocuments(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, o := range objs {
		o.SetNamespace(ns)
		o.SetCreationTimestamp(metav1.Time{})
		status, hasStatus := o.Object["status"]
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("%s: creating %s %s: %w", file, o.GetKind(), o.GetName(), err)
		}
		if hasStatus && o.GetAPIVersion() == bpav1.GroupVersion.String() {
			o.Object["status"] = status
			if err := c.Status().Update(ctx, o); err != nil {
				return fmt.Errorf("%s: writing the status of %s %s: %w", file, o.GetKind(), o.GetName(), err)
			}
		}
	}
	return nil
}
