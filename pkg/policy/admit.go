package policy

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Refusal says why a run may not start, in words naming the field and the rule.
type Refusal struct {
	Reason  string
	Message string
	// Retry is set when the refusal may lift without any BPA object changing (a Secret
	// created or labelled later), so the caller should look again after a while.
	Retry bool
}

// SSH Secret keys: the only ones a step pod ever mounts.
const (
	SSHKeyKey        = corev1.SSHAuthPrivateKey
	SSHKnownHostsKey = "known_hosts"
)

// CheckSSHSecret checks the Secret a CR's runs would mount. Its label
// bpa.akraino.org/cluster: <cluster> is its owner's consent: without it, a CR could have any
// Secret of the namespace (another cluster's kubeconfig, say) mounted into a step. Only the
// Secret's metadata is read (r may be a metadata-only cache of labelled Secrets, in which
// an unlabelled Secret is simply not found); the step pods mount only the two keys BPA
// uses, and fail naming the key if one is missing.
func CheckSSHSecret(ctx context.Context, r client.Reader, ns, name, cluster string) (*Refusal, error) {
	s := &metav1.PartialObjectMetadata{}
	s.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)
	if apierrors.IsNotFound(err) {
		return &Refusal{Reason: bpav1.ReasonSSHSecretRefused, Retry: true,
			Message: fmt.Sprintf("spec.ssh.secretName: no Secret %s labelled %s=%s; create it (keys %s and %s) with that label, which is its owner's consent to this cluster's runs mounting it",
				name, bpav1.ClusterNameLabel, cluster, SSHKeyKey, SSHKnownHostsKey)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading SSH Secret %s/%s: %w", ns, name, err)
	}
	if got := s.Labels[bpav1.ClusterNameLabel]; got != cluster {
		return &Refusal{Reason: bpav1.ReasonSSHSecretRefused, Retry: true,
			Message: fmt.Sprintf("spec.ssh.secretName: Secret %s is labelled %s=%q, not %s; the label is its owner's consent to this cluster's runs mounting it",
				name, bpav1.ClusterNameLabel, got, cluster)}, nil
	}
	return nil, nil
}

// Holder is the one Provisioning of a cluster in a namespace that may act for it: the
// oldest live one (then by name). Another one touches nothing, so a CR labelled with
// someone else's cluster can neither take its hosts nor its published kubeconfig.
func Holder(items []bpav1.Provisioning) *bpav1.Provisioning {
	live := make([]*bpav1.Provisioning, 0, len(items))
	for i := range items {
		if items[i].DeletionTimestamp.IsZero() {
			live = append(live, &items[i])
		}
	}
	if len(live) == 0 {
		return nil
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i].CreationTimestamp, live[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return live[i].Name < live[j].Name
	})
	return live[0]
}

// CheckHolder refuses p unless it holds its cluster among siblings (the Provisionings of its
// namespace with its cluster label, p included or not).
func CheckHolder(p *bpav1.Provisioning, cluster string, siblings []bpav1.Provisioning) *Refusal {
	h := Holder(append(siblings[:len(siblings):len(siblings)], *p))
	if h == nil || h.Name == p.Name {
		return nil
	}
	return &Refusal{Reason: bpav1.ReasonClusterHeldByOther,
		Message: fmt.Sprintf("metadata.labels.cluster: cluster %s is held by Provisioning %s in this namespace; one Provisioning per cluster acts, and this one touches nothing until that one is deleted", cluster, h.Name)}
}

// AdmitProvisioning runs every check a Provisioning's run must pass when it starts:
// the policy, the cluster's holder, and the SSH Secret's consent. siblings are the
// Provisionings of p's namespace with p's cluster label; secrets reads Secrets.
func AdmitProvisioning(ctx context.Context, pol Policy, secrets client.Reader, p *bpav1.Provisioning, cluster, sshSecret string, siblings []bpav1.Provisioning) (*Refusal, error) {
	if errs := pol.CheckProvisioning(p); len(errs) > 0 {
		return &Refusal{Reason: bpav1.ReasonPolicyViolation, Message: errs.ToAggregate().Error()}, nil
	}
	if r := CheckHolder(p, cluster, siblings); r != nil {
		return r, nil
	}
	return CheckSSHSecret(ctx, secrets, p.Namespace, sshSecret, cluster)
}

// AdmitSoftware runs the checks a Software's run must pass when it starts.
func AdmitSoftware(ctx context.Context, pol Policy, secrets client.Reader, sw *bpav1.Software, cluster, sshSecret string) (*Refusal, error) {
	if errs := pol.CheckSoftware(sw); len(errs) > 0 {
		return &Refusal{Reason: bpav1.ReasonPolicyViolation, Message: errs.ToAggregate().Error()}, nil
	}
	return CheckSSHSecret(ctx, secrets, sw.Namespace, sshSecret, cluster)
}

// SoftwareAptRepo resolves sw's spec.aptSource (Policy.AptRepo) against the Provisioning of
// its cluster in its namespace that succeeded (the one the Software's run is gated on).
// A repository the nodes could not check is an *AptRefusal.
func SoftwareAptRepo(ctx context.Context, pol Policy, r client.Reader, sw *bpav1.Software, cluster string) (*AptRepo, error) {
	if sw.Spec.AptSource == "" {
		return nil, nil
	}
	prov, err := succeededProvisioning(ctx, r, sw.Namespace, cluster)
	if err != nil {
		return nil, err
	}
	repo, err := pol.AptRepo(sw, prov)
	if err != nil {
		return nil, &AptRefusal{err}
	}
	return repo, nil
}

// succeededProvisioning is the live Provisioning of cluster in ns that succeeded, the one a
// Software's run is gated on; nil if none.
func succeededProvisioning(ctx context.Context, r client.Reader, ns, cluster string) (*bpav1.Provisioning, error) {
	list := &bpav1.ProvisioningList{}
	if err := r.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{bpav1.ClusterLabel: cluster}); err != nil {
		return nil, fmt.Errorf("listing the Provisionings of cluster %s: %w", cluster, err)
	}
	for i, p := range list.Items {
		if p.Status.Phase == bpav1.PhaseSucceeded && p.DeletionTimestamp.IsZero() {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// AptRefusal is a spec.aptSource the site cannot serve: the Software is Stalled until the
// CR, its cluster's Provisioning or the site policy changes.
type AptRefusal struct{ Err error }

func (e *AptRefusal) Error() string { return "spec.aptSource: " + e.Err.Error() }
func (e *AptRefusal) Unwrap() error { return e.Err }
