package translator

import (
	"strconv"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// Run scopes: which hosts a software run visits.
const (
	// ScopeAll visits every host of the cluster: a spec change, a rerun, a node joining.
	ScopeAll = "all"
	// ScopeOutdated visits only the hosts that need a newly uploaded version of a tracked
	// package, by what the Software's status records of them (software.NeedsLatest).
	ScopeOutdated = "outdated"
)

// SoftwareSteps are the DAG's tasks, in order.
var SoftwareSteps = []string{"resolve-nodes", "install-software", "verify-software"}

var softwareParameterOrder = []string{
	"software", "cluster", "generation", "ssh-secret", "ssh-user", "ssh-port", "insecure-ignore-host-key",
	"apt-url", "apt-key", "artifacts-ca", "latest", "scope",
}

// SoftwareParameters derives the Workflow parameters of a Software, defaults applied.
// apt-url, apt-key and artifacts-ca, the apt repository of spec.aptSource, are the site
// policy's and empty here; latest, the versions the items saying latest resolve to, comes
// from the artifact server's index; the caller sets them (Options, or lookup). scope is
// ScopeAll unless the caller says otherwise. None is secret.
func SoftwareParameters(s *bpav1.Software) (map[string]string, error) {
	cluster, err := ClusterOf(s)
	if err != nil {
		return nil, err
	}
	params := sshParameters(s.Spec.SSH, cluster)
	params["software"] = s.Name
	params["cluster"] = cluster
	params["generation"] = strconv.FormatInt(s.Generation, 10)
	params["apt-url"], params["apt-key"], params["artifacts-ca"] = "", "", ""
	params["latest"], params["scope"] = "", ScopeAll
	return params, nil
}

// SoftwareParameterNames lists the parameters in Workflow order.
func SoftwareParameterNames() []string { return append([]string(nil), softwareParameterOrder...) }

// Software translates a Software into its Workflow: resolve-nodes lists the cluster's hosts,
// install-software fans out over their names with withParam (one Argo node per host, shown as
// install-software(0:master-1) and retryable alone), and verify-software summarises, even when
// some hosts failed.
func Software(s *bpav1.Software, opts Options) (*wfv1.Workflow, error) {
	params, err := SoftwareParameters(s)
	if err != nil {
		return nil, err
	}
	params["apt-url"], params["apt-key"], params["artifacts-ca"] = opts.AptURL, opts.AptKey, opts.ArtifactsCA
	params["latest"] = opts.Latest
	if opts.Scope != "" {
		params["scope"] = opts.Scope
	}
	wf := newWorkflow(s, "Software", bpav1.SoftwareNameLabel, workflowtemplates.Software, "software", params["cluster"], opts, softwareDeadline)
	if opts.Trigger != "" {
		wf.Annotations[bpav1.TriggerAnnotation] = opts.Trigger
	}
	wf.Spec.Entrypoint = "install"
	wf.Spec.Arguments.Parameters = parameters(params, softwareParameterOrder)

	const t = workflowtemplates.Software
	install := task("install-software", t, "install-software", "resolve-nodes",
		"host", HostOfItem,
		"ssh-secret", wfParam("ssh-secret"), "ssh-user", wfParam("ssh-user"),
		"ssh-port", wfParam("ssh-port"), "insecure-ignore-host-key", wfParam("insecure-ignore-host-key"),
		"apt-url", wfParam("apt-url"), "apt-key", wfParam("apt-key"), "artifacts-ca", wfParam("artifacts-ca"))
	install.WithParam = FanOutItems
	tasks := []wfv1.DAGTask{
		task("resolve-nodes", t, "resolve-nodes", "", "software", wfParam("software"), "generation", wfParam("generation"),
			"latest", wfParam("latest"), "scope", wfParam("scope")),
		install,
		task("verify-software", t, "verify-software", "install-software.Succeeded || install-software.Failed",
			"results", "{{tasks.install-software.outputs.parameters.result}}"),
	}
	wf.Spec.Templates = []wfv1.Template{{Name: "install", DAG: &wfv1.DAGTemplate{Tasks: tasks}}}
	return wf, nil
}

// The install-software fan-out (here and in workflowtemplates/software.yaml). Its items are
// the node names, so Argo names each host's node install-software(0:master-1), not after the
// whole node object. Each child picks its own node out of resolve-nodes' list by name, in the
// workflow-controller when it expands the task: a child's inputs hold one host, so the
// Workflow's status grows linearly with the cluster (the whole list in every child would
// grow it quadratically).
const (
	FanOutItems = "{{tasks.resolve-nodes.outputs.parameters.names}}"
	HostOfItem  = "{{=toJson(find(fromJSON(tasks['resolve-nodes'].outputs.parameters.nodes), {.name == item}))}}"
)
