package describe

import (
	"context"
	"fmt"
	"sort"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
)

// kindNames maps what a user may type (kubectl's names and short names) to a kind.
var kindNames = map[string]string{
	"provisioning": KindProvisioning, "provisionings": KindProvisioning, "prov": KindProvisioning, "bpa": KindProvisioning,
	"software": KindSoftware, "softwares": KindSoftware, "sw": KindSoftware,
	"cluster": KindCluster, "clusters": KindCluster,
}

// ParseKind turns a kind as typed on the command line into a Kind* constant.
func ParseKind(s string) (string, error) {
	if k, ok := kindNames[strings.TrimSuffix(strings.ToLower(s), ".bpa.akraino.org")]; ok {
		return k, nil
	}
	return "", fmt.Errorf("cannot describe %q: give provisioning, software or cluster", s)
}

// Fetch reads one CR and what Render shows about it. It fails only when the CR cannot be
// read; anything else it cannot read is shown in the tree, with the reason.
func Fetch(ctx context.Context, c client.Reader, kind, namespace, name string) (*Tree, error) {
	t, err := fetch(ctx, c, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	if t.Object == nil {
		return nil, fmt.Errorf("%s %s/%s not found", kind, namespace, name)
	}
	return t, nil
}

func fetch(ctx context.Context, c client.Reader, kind, namespace, name string) (*Tree, error) {
	t := &Tree{Kind: kind, Namespace: namespace, Name: name}
	var obj client.Object
	label := ""
	switch kind {
	case KindProvisioning:
		obj, label = &bpav1.Provisioning{}, bpav1.ProvisioningNameLabel
	case KindSoftware:
		obj, label = &bpav1.Software{}, bpav1.SoftwareNameLabel
	case KindCluster:
		obj = &bpav1.Cluster{}
	default:
		return nil, fmt.Errorf("unknown kind %q", kind)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return t, nil
		}
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	t.Object = obj
	if cl, ok := obj.(*bpav1.Cluster); ok {
		for _, child := range []struct{ kind, name string }{
			{KindProvisioning, cl.Spec.ProvisioningCR}, {KindSoftware, cl.Spec.SoftwareCR},
		} {
			if child.name == "" {
				continue
			}
			ct, err := fetch(ctx, c, child.kind, namespace, child.name)
			if err != nil {
				return nil, err
			}
			t.Children = append(t.Children, ct)
		}
		return t, nil
	}

	var wfs wfv1.WorkflowList
	if err := c.List(ctx, &wfs, client.InNamespace(namespace), client.MatchingLabels{label: name}); err != nil {
		t.WorkflowsErr = err
	}
	t.Workflows = wfs.Items
	sort.Slice(t.Workflows, func(i, j int) bool {
		a, b := t.Workflows[i], t.Workflows[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})

	cluster := obj.GetLabels()[bpav1.ClusterLabel]
	if cluster == "" {
		return t, nil
	}
	if kind == KindProvisioning {
		t.Published = append(t.Published, fetchRef(ctx, c, namespace, "Secret", kubeconfig.PublishedSecretName(cluster)))
	}
	t.Published = append(t.Published, fetchRef(ctx, c, namespace, "ConfigMap", kubeconfig.AddressConfigMapName(cluster)))
	return t, nil
}

// fetchRef reads an object's metadata only: a Secret's data is never fetched, so it can
// never be shown.
func fetchRef(ctx context.Context, c client.Reader, namespace, kind, name string) Ref {
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
	r := Ref{Kind: kind, Name: name}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m); {
	case apierrors.IsNotFound(err):
	case err != nil:
		r.Err = err
	default:
		r.Object = m
	}
	return r
}
