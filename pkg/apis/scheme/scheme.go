// Package scheme is the one runtime.Scheme of BPA: every kind the controller, the CLI and the
// steps read or write. It sits beside the API types, below all of them, so each can import it
// without a cycle.
package scheme

import (
	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// New returns a scheme that knows core, BPA, Argo Workflows and metal3 kinds. Each caller
// gets its own, so none can change another's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, bpav1.AddToScheme, wfv1.AddToScheme, metal3v1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}
