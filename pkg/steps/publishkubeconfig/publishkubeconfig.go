// Package publishkubeconfig is `bpa step publish-kubeconfig`, the last step of a
// provisioning run. It takes the kubeconfig verify staged in `<workflow>-admin-conf` (see
// pkg/steps/verify for the hand-over) and publishes what the rest of the world reads:
//
//   - Secret `<cluster>-kubeconfig`, key `value`, type cluster.x-k8s.io/secret (Cluster API's
//     convention, so CAPI-aware tools find it), labelled bpa.akraino.org/cluster;
//   - ConfigMap `<cluster>-configmap` with `MASTER_<node>: <ip>` and `WORKER_<node>: <ip>`
//     (ICN's contract, read by Software runs and the controller; a node with both roles has
//     both keys). Its node keys are replaced as a whole, so a node that left the cluster
//     leaves the ConfigMap; other keys are kept.
//
// Both are owned by the Provisioning (controller reference), so they go with it, and
// labelled app.kubernetes.io/managed-by=bpa, the only Secrets and ConfigMaps the steps may
// write. Then the staging Secret is deleted.
//
// Every write is create-or-update, so a retry after a partial failure converges. A retry
// after the staging Secret was already deleted finds the published Secret annotated with
// this Workflow's name and only re-asserts the ConfigMap. An existing Secret or ConfigMap
// controlled by something else is left alone and the step fails, rather than two owners
// fighting over one cluster's credentials.
package publishkubeconfig

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
)

// Command returns `bpa step publish-kubeconfig`.
func Command() *cobra.Command {
	o := options{logf: log.Printf}
	return stepcmd.Command(stepcmd.Step{
		Name:  "publish-kubeconfig",
		Short: "Publish the staged kubeconfig as <cluster>-kubeconfig and the node addresses as <cluster>-configmap",
		Flags: func(cmd *cobra.Command) {
			fs := cmd.Flags()
			o.cr.AddNameFlags(fs)
			fs.StringVar(&o.hostsFile, "hosts-file", stepio.In(stepio.HostsFile), "JSON list of the run's hosts ({name, roles, ip, ...})")
			fs.StringVar(&o.workflowName, "workflow-name", "", "name of the Workflow running this step ({{workflow.name}}); names the staging Secret")
		},
		RunWithClient: func(ctx context.Context, c client.Client) error { return o.run(ctx, c) },
	})
}

type options struct {
	cr                      stepio.CR
	hostsFile, workflowName string
	logf                    func(format string, args ...any)
}

func (o *options) run(ctx context.Context, c client.Client) error {
	if o.workflowName == "" {
		return errors.New("--workflow-name is required")
	}
	p, err := o.cr.Get(ctx, c)
	if err != nil {
		return err
	}
	cluster, err := translator.ClusterOf(p)
	if err != nil {
		return err
	}
	hosts, err := stepio.ReadHosts(o.hostsFile)
	if err != nil {
		return err
	}
	// Nodes this run removed leave the address ConfigMap, so Software stops targeting them.
	hosts = slices.DeleteFunc(hosts, func(h bpav1.HostStatus) bool { return h.Removing })
	addresses, err := software.AddressData(hosts)
	if err != nil {
		return fmt.Errorf("node addresses: %w", err)
	}

	staging := &corev1.Secret{}
	stagingKey := client.ObjectKey{Namespace: o.cr.Namespace, Name: kubeconfig.StagingSecretName(o.workflowName)}
	err = c.Get(ctx, stagingKey, staging)
	switch {
	case apierrors.IsNotFound(err):
		if done, derr := o.alreadyPublished(ctx, c, cluster); derr != nil || !done {
			if derr == nil {
				derr = fmt.Errorf("staging Secret %s not found: verify must succeed first in this Workflow", stagingKey)
			}
			return derr
		}
		o.logf("kubeconfig already published by this Workflow (an earlier attempt); checking the ConfigMap")
		staging = nil
	case err != nil:
		return fmt.Errorf("reading staging Secret %s: %w", stagingKey, err)
	case len(staging.Data[kubeconfig.SecretKey]) == 0:
		return fmt.Errorf("staging Secret %s has no %q key", stagingKey, kubeconfig.SecretKey)
	}

	if staging != nil {
		if err := o.publishSecret(ctx, c, p, cluster, kubeconfig.PublishedSecretName(cluster), staging.Data[kubeconfig.SecretKey]); err != nil {
			return err
		}
		// verify stages the node-reader kubeconfig where spec.remediation asks for it.
		if nr := staging.Data[kubeconfig.NodeReaderKey]; len(nr) > 0 {
			if err := o.publishSecret(ctx, c, p, cluster, kubeconfig.NodeReaderSecretName(cluster), nr); err != nil {
				return err
			}
		}
	}
	if err := o.publishConfigMap(ctx, c, p, cluster, addresses); err != nil {
		return err
	}
	if staging != nil {
		if err := c.Delete(ctx, staging); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting staging Secret %s: %w", stagingKey, err)
		}
	}
	o.logf("published Secret %s and ConfigMap %s (%d nodes)", kubeconfig.PublishedSecretName(cluster), kubeconfig.AddressConfigMapName(cluster), len(hosts))
	return nil
}

// alreadyPublished reports whether this Workflow published the kubeconfig already.
func (o *options) alreadyPublished(ctx context.Context, c client.Client, cluster string) (bool, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: o.cr.Namespace, Name: kubeconfig.PublishedSecretName(cluster)}, s)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading Secret %s: %w", kubeconfig.PublishedSecretName(cluster), err)
	}
	return s.Annotations[kubeconfig.WorkflowAnnotation] == o.workflowName, nil
}

// publishSecret publishes the kubeconfig conf as the Secret name, owned by p.
func (o *options) publishSecret(ctx context.Context, c client.Client, p *bpav1.Provisioning, cluster, name string, conf []byte) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.cr.Namespace, Name: name}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, s, func() error {
		// A Secret's type cannot change; one of another type is not ours to replace.
		if s.Type != "" && s.Type != kubeconfig.PublishedSecretType {
			return fmt.Errorf("it exists with type %s, not %s; delete it to let BPA publish", s.Type, kubeconfig.PublishedSecretType)
		}
		s.Type = kubeconfig.PublishedSecretType
		s.Labels = withLabel(withLabel(s.Labels, bpav1.ClusterNameLabel, cluster), bpav1.ManagedByLabel, bpav1.ManagedByValue)
		s.Annotations = withLabel(s.Annotations, kubeconfig.WorkflowAnnotation, o.workflowName)
		s.Data = map[string][]byte{kubeconfig.SecretKey: conf}
		if err := takeOver(ctx, c, s, p); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(p, s, c.Scheme())
	})
	if err != nil {
		return fmt.Errorf("publishing Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

func (o *options) publishConfigMap(ctx context.Context, c client.Client, p *bpav1.Provisioning, cluster string, addresses map[string]string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: o.cr.Namespace, Name: kubeconfig.AddressConfigMapName(cluster)}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, cm, func() error {
		data := map[string]string{}
		for k, v := range cm.Data {
			if !software.IsAddressKey(k) {
				data[k] = v
			}
		}
		for k, v := range addresses {
			data[k] = v
		}
		cm.Data = data
		cm.Labels = withLabel(withLabel(cm.Labels, bpav1.ClusterNameLabel, cluster), bpav1.ManagedByLabel, bpav1.ManagedByValue)
		if err := takeOver(ctx, c, cm, p); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(p, cm, c.Scheme())
	})
	if err != nil {
		return fmt.Errorf("publishing ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return nil
}

// takeOver lets the Provisioning publishing now own objects an earlier Provisioning of the
// same cluster published, but only once that one no longer exists (a CR deleted with its
// finalizer skipped, or re-created under the same name): while it lives, it is the
// cluster's holder and this run is refused, so its kubeconfig is never taken from under it.
// Objects owned by anything else are left to SetControllerReference, which refuses them.
func takeOver(ctx context.Context, c client.Client, obj metav1.Object, p *bpav1.Provisioning) error {
	refs := obj.GetOwnerReferences()[:0:0]
	for _, r := range obj.GetOwnerReferences() {
		gv, _ := schema.ParseGroupVersion(r.APIVersion)
		if r.Controller != nil && *r.Controller && gv.Group == bpav1.GroupVersion.Group && r.Kind == "Provisioning" && r.UID != p.UID {
			prev := &bpav1.Provisioning{}
			err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: r.Name}, prev)
			if err == nil && prev.UID == r.UID {
				return fmt.Errorf("it belongs to Provisioning %s, which still exists; one Provisioning per cluster publishes", r.Name)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("checking its owner Provisioning %s: %w", r.Name, err)
			}
			continue
		}
		refs = append(refs, r)
	}
	obj.SetOwnerReferences(refs)
	return nil
}

func withLabel(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}
