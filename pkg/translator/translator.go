// Package translator turns BPA CRs into Argo Workflows. It is pure: a CR in, a Workflow
// out, no client and no I/O, so the controller, `bpa render`, `bpa lint` and the tests all
// get the same Workflow for the same CR.
//
// The Workflows carry only names and small settings as parameters; the steps read the CR
// and hosts themselves. That keeps a 1,000-node Workflow as small as a one-node one and
// keeps every secret out of the Workflow: Secrets are named, then mounted by the step pods.
package translator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// Defaults the translator applies itself, so that CRs read from files (which the apiserver
// has not defaulted) translate exactly like stored ones.
const (
	DefaultServiceAccount = "bpa-step"
	DefaultKubesprayImage = "quay.io/kubespray/kubespray"
	DefaultKubesprayVer   = kubespray.DefaultVersion
	DefaultSSHUser        = "root"
	DefaultSSHPort        = 22
	provisionDeadline     = 4 * 60 * 60
	softwareDeadline      = 2 * 60 * 60
	keepSucceededSeconds  = 24 * 60 * 60
	keepFailedSeconds     = 7 * 24 * 60 * 60 // long enough for someone to `argo retry` after a weekend
	maxWorkflowNameLength = 63
	GenerationLabel       = "bpa.akraino.org/generation"
	RerunAnnotation       = bpav1.RerunAnnotation
	WorkflowTemplateLabel = "workflows.argoproj.io/workflow-template"
	mutexPrefix           = "bpa-cluster-"
)

// Options are the deployment-wide settings of the translation.
type Options struct {
	// ServiceAccountName runs the step pods; defaults to bpa-step.
	ServiceAccountName string
	// Revision distinguishes runs of one generation started for another reason than a
	// spec change (a node joined the cluster, say). It becomes part of the Workflow name.
	Revision string
	// ArtifactsCA is the CA the site's BPAPolicy gives a Provisioning's artifact server
	// (policy.Policy.ArtifactsCA), "" for none: the translator reads no policy itself.
	// For a Software, the CA of its apt repository's server (policy.Policy.AptRepo).
	ArtifactsCA string
	// BackupServer and BackupServerCA are the site policy's etcd backup server for a
	// Provisioning's namespace (policy.Policy.BackupServer) and its CA, "" for none.
	BackupServer, BackupServerCA string
	// AptURL and AptKey are a Software's apt repository (policy.Policy.AptRepo): its
	// server and the admin's key for it, "" for none.
	AptURL, AptKey string
	// Latest are the versions a Software's latest items resolve to (software.FormatLatest);
	// Scope the hosts its run visits (ScopeAll when empty); Trigger why the run
	// starts when no CR was edited, for the Workflow's bpa.akraino.org/trigger annotation.
	Latest, Scope, Trigger string
}

// UpToDate is a translation's answer when the change it was asked to carry out needs no
// run (every host of a Software already has the version an upload made newest); Message
// says why, for the CR's conditions and events.
type UpToDate struct{ Message string }

func (u *UpToDate) Error() string { return u.Message }

// ClusterOf returns the cluster a CR belongs to, or an error naming the missing label.
func ClusterOf(obj metav1.Object) (string, error) {
	c := obj.GetLabels()[bpav1.ClusterLabel]
	if c == "" {
		return "", fmt.Errorf("metadata.labels.cluster: required: it names the cluster %s belongs to", obj.GetName())
	}
	if errs := validation.IsDNS1123Label(c); len(errs) > 0 {
		return "", fmt.Errorf("metadata.labels.cluster: invalid value %q: %s", c, errs[0])
	}
	return c, nil
}

// WorkflowName is deterministic: the same CR, generation, rerun request and revision always
// give the same name, so a create after a crash finds the Workflow it already made.
func WorkflowName(crName, kind string, generation int64, rerun, revision string) string {
	suffix := "-" + kind + "-" + strconv.FormatInt(generation, 10)
	if rerun != "" || revision != "" {
		suffix += "-" + shortHash(rerun+"\x00"+revision, 6)
	}
	if len(crName)+len(suffix) <= maxWorkflowNameLength {
		return crName + suffix
	}
	// Keep the name unique and readable: a prefix of the CR name plus a hash of all of it.
	h := "-" + shortHash(crName, 8)
	keep := maxWorkflowNameLength - len(suffix) - len(h)
	prefix := crName[:keep]
	for len(prefix) > 0 && (prefix[len(prefix)-1] == '-' || prefix[len(prefix)-1] == '.') {
		prefix = prefix[:len(prefix)-1]
	}
	return prefix + h + suffix
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// SSHParameters are the SSH settings steps need as parameters (not the key: that is the
// Secret the pods mount).
func sshParameters(ssh *bpav1.SSHConfig, cluster string) map[string]string {
	p := map[string]string{
		"ssh-secret":               cluster + "-ssh",
		"ssh-user":                 DefaultSSHUser,
		"ssh-port":                 strconv.Itoa(DefaultSSHPort),
		"insecure-ignore-host-key": "false",
	}
	if ssh != nil {
		if ssh.SecretName != "" {
			p["ssh-secret"] = ssh.SecretName
		}
		if ssh.User != "" {
			p["ssh-user"] = ssh.User
		}
		if ssh.Port != 0 {
			p["ssh-port"] = strconv.Itoa(int(ssh.Port))
		}
		p["insecure-ignore-host-key"] = strconv.FormatBool(ssh.InsecureIgnoreHostKey)
	}
	return p
}

// newWorkflow fills in what every BPA Workflow shares.
func newWorkflow(owner metav1.Object, gvkKind, nameLabel, template, kind string, cluster string, opts Options, deadline int64) *wfv1.Workflow {
	rerun := owner.GetAnnotations()[RerunAnnotation]
	sa := opts.ServiceAccountName
	if sa == "" {
		sa = DefaultServiceAccount
	}
	annotations := map[string]string{}
	if rerun != "" {
		annotations[RerunAnnotation] = rerun
	}
	return &wfv1.Workflow{
		TypeMeta: metav1.TypeMeta{APIVersion: wfv1.SchemeGroupVersion.String(), Kind: "Workflow"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      WorkflowName(owner.GetName(), kind, owner.GetGeneration(), rerun, opts.Revision),
			Namespace: owner.GetNamespace(),
			Labels: map[string]string{
				nameLabel:              owner.GetName(),
				bpav1.ClusterNameLabel: cluster,
				WorkflowTemplateLabel:  template,
				GenerationLabel:        strconv.FormatInt(owner.GetGeneration(), 10),
			},
			Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         bpav1.GroupVersion.String(),
				Kind:               gvkKind,
				Name:               owner.GetName(),
				UID:                owner.GetUID(),
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: wfv1.WorkflowSpec{
			ServiceAccountName:    sa,
			ActiveDeadlineSeconds: ptr.To(deadline),
			// One run at a time per cluster, whichever CR or kind started it. The ad-hoc
			// templates take the same mutex, so `argo submit --from` runs queue too.
			Synchronization: &wfv1.Synchronization{Mutexes: []*wfv1.Mutex{{Name: mutexPrefix + cluster}}},
			// Argo applies SecondsAfterFailure to the Failed phase only: a Workflow in Error
			// (a template it cannot resolve, an evicted pod) goes by SecondsAfterCompletion,
			// kept as long as a failure, else never.
			TTLStrategy: &wfv1.TTLStrategy{
				SecondsAfterSuccess:    ptr.To(int32(keepSucceededSeconds)),
				SecondsAfterFailure:    ptr.To(int32(keepFailedSeconds)),
				SecondsAfterCompletion: ptr.To(int32(keepFailedSeconds)),
			},
			// Failed pods stay so their logs can be read; successful ones go after
			// PodLogsKept, so `argo logs`, `kubectl logs` and the UI show a finished run's
			// every step (a pod's log goes with the pod).
			PodGC: &wfv1.PodGC{Strategy: wfv1.PodGCOnPodSuccess, DeleteDelayDuration: PodLogsKept},
		},
	}
}

// PodLogsKept is how long a succeeded step's pod, and so its log, outlives it (here and in
// the WorkflowTemplates' podGC).
const PodLogsKept = "1h"

func parameters(kv map[string]string, order []string) []wfv1.Parameter {
	out := make([]wfv1.Parameter, 0, len(order))
	for _, k := range order {
		out = append(out, wfv1.Parameter{Name: k, Value: wfv1.AnyStringPtr(kv[k])})
	}
	return out
}

// task builds a DAG task that calls template tmpl of the WorkflowTemplate wft. Each
// argument is either "workflow:<name>" (a workflow parameter) or a literal expression.
func task(name, wft, tmpl, depends string, args ...string) wfv1.DAGTask {
	t := wfv1.DAGTask{
		Name:        name,
		TemplateRef: &wfv1.TemplateRef{Name: wft, Template: tmpl},
		Depends:     depends,
	}
	for i := 0; i+1 < len(args); i += 2 {
		t.Arguments.Parameters = append(t.Arguments.Parameters, wfv1.Parameter{Name: args[i], Value: wfv1.AnyStringPtr(args[i+1])})
	}
	return t
}

// asFiles passes t's arguments named files as raw artifacts rather than parameters, in the
// same order: the template takes those inputs as files only (run-kubespray's kubesprayFiles).
func asFiles(t wfv1.DAGTask, files ...string) wfv1.DAGTask {
	var params []wfv1.Parameter
	for _, p := range t.Arguments.Parameters {
		if !slices.Contains(files, p.Name) {
			params = append(params, p)
			continue
		}
		t.Arguments.Artifacts = append(t.Arguments.Artifacts, wfv1.Artifact{Name: p.Name,
			ArtifactLocation: wfv1.ArtifactLocation{Raw: &wfv1.RawArtifact{Data: p.Value.String()}}})
	}
	t.Arguments.Parameters = params
	return t
}

func wfParam(name string) string { return "{{workflow.parameters." + name + "}}" }

// Translate translates any runnable BPA object. A Cluster or a BPAPolicy has no Workflow of
// its own and gives (nil, nil).
func Translate(obj any, opts Options) (*wfv1.Workflow, error) {
	switch o := obj.(type) {
	case *bpav1.Provisioning:
		return Provisioning(o, opts)
	case *bpav1.Software:
		return Software(o, opts)
	case *bpav1.Cluster, *bpav1.BPAPolicy:
		return nil, nil
	default:
		return nil, fmt.Errorf("cannot translate %T", obj)
	}
}
