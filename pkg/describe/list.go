package describe

import (
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// List is what Render shows, as objects for programs (`bpa describe -o yaml|json`): a v1
// List of the CR, its Workflows (the current one, then up to history earlier ones, as
// Render lists them), the metadata of the objects it publishes (never a Secret's data,
// which Fetch never reads), and a Cluster's Provisioning and Software with theirs. Each
// object carries its apiVersion and kind; managedFields are left out, as kubectl leaves
// them out. What could not be read is said on warn, one line each, as Render says it in
// the tree.
func (t *Tree) List(scheme *runtime.Scheme, history int, warn io.Writer) (*metav1.List, error) {
	list := &metav1.List{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "List"}}
	err := t.addTo(list, scheme, history, warn)
	return list, err
}

func (t *Tree) addTo(list *metav1.List, scheme *runtime.Scheme, history int, warn io.Writer) error {
	if t.Object == nil {
		fmt.Fprintf(warn, "warning: %s %s/%s not found\n", t.Kind, clean(t.Namespace), clean(t.Name))
		return nil
	}
	add := func(obj client.Object) error {
		obj = obj.DeepCopyObject().(client.Object)
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			return err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		obj.SetManagedFields(nil)
		list.Items = append(list.Items, runtime.RawExtension{Object: obj})
		return nil
	}
	if err := add(t.Object); err != nil {
		return err
	}
	if t.WorkflowsErr != nil {
		fmt.Fprintf(warn, "warning: %s %s/%s: cannot list its Workflows: %s\n", t.Kind, clean(t.Namespace), clean(t.Name), clean(t.WorkflowsErr.Error()))
	}
	current, earlier := t.currentWorkflow(), 0
	for i := range t.Workflows {
		wf := &t.Workflows[i]
		if wf.Name != current {
			if earlier == history {
				continue
			}
			earlier++
		}
		if err := add(wf); err != nil {
			return err
		}
	}
	for _, r := range t.Published {
		if r.Err != nil {
			fmt.Fprintf(warn, "warning: cannot read %s %s: %s\n", r.Kind, clean(r.Name), clean(r.Err.Error()))
		}
		if r.Object != nil {
			m := r.Object.DeepCopy()
			m.SetManagedFields(nil)
			list.Items = append(list.Items, runtime.RawExtension{Object: m})
		}
	}
	for _, c := range t.Children {
		if err := c.addTo(list, scheme, history, warn); err != nil {
			return err
		}
	}
	return nil
}

// currentWorkflow is the name of the Workflow of the CR's current run, if any.
func (t *Tree) currentWorkflow() string {
	var run *bpav1.RunStatus
	switch o := t.Object.(type) {
	case *bpav1.Provisioning:
		run = &o.Status.RunStatus
	case *bpav1.Software:
		run = &o.Status.RunStatus
	}
	if run == nil || run.Workflow == nil {
		return ""
	}
	return run.Workflow.Name
}
