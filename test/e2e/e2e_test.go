package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubeconfig"
	"github.com/akraino-edge-stack/bpa/pkg/translator"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/framework/sim"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// runTimeout bounds the wait for one run. The longest, three masters joining (three
// kubespray runs after the etcd snapshot), took just over six minutes under make test's load
// on two cores with six lanes, and over ten once beside other builds; a run that ends sooner
// is seen at once, so the bound costs nothing but a hung test's time.
const runTimeout = 15 * time.Minute

type env struct {
	*sim.Site
	ctx context.Context
}

// TestE2E runs the scenarios on one node, in seven lanes side by side: each lane is a site of
// its own (namespace, application apiserver, BPA controller, machines, failure injection;
// sim.Base.NewSite) and runs its scenarios one after another. A step is mostly waiting
// (for a pod, for Argo, for SSH), so lanes share the node's two cores well. Each scenario
// uses its own clusters and hosts, so none depends on another's leftovers.
//
// What sites share is cluster-scoped: BPAPolicy default. Scenarios only add to it (their
// artifact servers), with a retry on conflict, and take back only what they added.
func TestE2E(t *testing.T) {
	base := sim.Start(t, sim.Options{})
	// Every site's day-2 runs take a verified etcd snapshot first, stored here: a `bpa serve`
	// that keeps them in a real S3 service (versitygw), as --backup-s3-endpoint does.
	store := base.StartS3BackupServer(t)
	type scenario struct {
		name string
		run  func(*env, *testing.T)
	}
	// The first lane is the first site, on node.HostNet, where the examples' hosts are.
	lanes := [][]scenario{
		{
			{"a/examples-provision", (*env).scenarioExamples},
			{"c/kubespray-fails-then-argo-retry", (*env).scenarioRetry},
			{"e/controller-killed-mid-run", (*env).scenarioControllerRestart},
			{"f/deleted-mid-run", (*env).scenarioDeleteMidRun},
			{"u/argo-web-ui", (*env).scenarioArgoUI},
		},
		{
			{"j/day-2-workers", (*env).scenarioDay2Workers},
		},
		{
			{"o/day-2-control-plane", (*env).scenarioDay2ControlPlane},
			{"b/lease-appears-later", (*env).scenarioLateLease},
		},
		{
			{"h/software-updates-and-new-nodes", (*env).scenarioSoftware},
			{"i/claims-are-consumerRefs", (*env).scenarioConsumerRef},
			{"k/offline", (*env).scenarioOffline},
			{"d/argo-submit-from-template", (*env).scenarioSubmitFrom},
		},
		{
			{"l/chained-upgrade", (*env).scenarioChain},
			{"m/preflight-and-safe-stop", (*env).scenarioPreflight},
			{"n/latest-package-versions", (*env).scenarioLatest},
		},
		{
			{"p/etcd-backups-and-restore", func(e *env, t *testing.T) { e.scenarioBackup(t, store) }},
			{"r/remediation-held-restart-reboot", (*env).scenarioRemediation},
		},
		{
			{"g/one-provisioning-per-cluster", (*env).scenarioClusterMutex},
			{"s/replace-dead-worker", (*env).scenarioReplace},
		},
	}
	// Goroutines, not t.Parallel: that would run only GOMAXPROCS lanes at once (2 here),
	// and the lanes wait far more than they compute.
	t.Run("lanes", func(t *testing.T) {
		var envs []*env
		for range lanes {
			envs = append(envs, newSiteEnv(t, base)) // in order: the first gets node.HostNet
		}
		var wg sync.WaitGroup
		for i, lane := range lanes {
			wg.Go(func() {
				t.Run(strconv.Itoa(i+1), func(t *testing.T) {
					for _, sc := range lane {
						t.Run(sc.name, func(t *testing.T) { sc.run(envs[i], t) })
					}
				})
			})
		}
		wg.Wait()
	})
}

// newSiteEnv starts a site on base for t, with a context that ends with t, and shows the
// controller's log when t fails.
func newSiteEnv(t *testing.T, base *sim.Base) *env {
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Minute)
	t.Cleanup(cancel)
	site := base.NewSite(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("controller log (tail):\n" + tail(site.ControllerLog(), 60))
		}
	})
	return &env{Site: site, ctx: ctx}
}

// ---- scenario a: every provisioning example reaches Succeeded ----

func (e *env) scenarioExamples(t *testing.T) {
	e.addExampleHosts(t)
	files, err := filepath.Glob("../../examples/provisioning-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			p := loadProvisioning(t, f)
			runsBefore := e.kubesprayRuns(t)
			e.create(t, p)
			got := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
			e.assertProvisioned(t, got)
			e.assertPlanIsWhatRan(t, got, e.kubesprayRuns(t)[len(runsBefore):])
			if strings.Contains(f, "mac-and-resources") {
				e.softwareOnExample(t, got)
			}
			e.deleteAndCheckCleanup(t, got)
		})
	}
}

// kubesprayRuns lists the runs the SIMULATED kubespray recorded, in order.
func (e *env) kubesprayRuns(t *testing.T) []string {
	entries, err := os.ReadDir(e.KubesprayRuns)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	// NN-<operation>, numbered on past 99: ordered by number, not by name.
	number := map[string]int{}
	var runs []string
	for _, d := range entries {
		n, err := strconv.Atoi(strings.SplitN(d.Name(), "-", 2)[0])
		if err == nil && d.IsDir() {
			path := filepath.Join(e.KubesprayRuns, d.Name())
			number[path] = n
			runs = append(runs, path)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return number[runs[i]] < number[runs[j]] })
	return runs
}

// assertPlanIsWhatRan: `bpa plan --output-dir` on the stored CR and the site's BareMetalHosts writes
// the argv, inventory and vars that run-kubespray handed ansible-playbook in the run, file
// for file and operation for operation.
func (e *env) assertPlanIsWhatRan(t *testing.T, p *bpav1.Provisioning, ran []string) {
	t.Helper()
	dir := t.TempDir()
	cr := &bpav1.Provisioning{TypeMeta: metav1.TypeMeta{APIVersion: bpav1.GroupVersion.String(), Kind: "Provisioning"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, Generation: p.Generation}, Spec: p.Spec}
	data, err := json.Marshal(cr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cr.json"), data, 0o644))
	e.writeBareMetalHosts(t, filepath.Join(dir, "bmh.json"))
	out := filepath.Join(dir, "plan")
	cmd := exec.CommandContext(e.ctx, e.BPA, "plan", "-f", filepath.Join(dir, "cr.json"), "--bmh", filepath.Join(dir, "bmh.json"), "--output-dir", out)
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "bpa plan: %s", msg)
	planned, err := filepath.Glob(filepath.Join(out, "[0-9][0-9]-*"))
	require.NoError(t, err)
	require.Equal(t, len(planned), len(ran), "one recorded run per planned operation: %v %v", planned, ran)
	for i := range planned {
		assert.Equal(t, strings.SplitN(filepath.Base(planned[i]), "-", 2)[1], strings.SplitN(filepath.Base(ran[i]), "-", 2)[1], "operation %d", i+1)
		for _, f := range []string{"argv.json", "hosts.ini", "vars.yaml"} {
			want, err := os.ReadFile(filepath.Join(planned[i], f))
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(ran[i], f))
			require.NoError(t, err)
			if f != "argv.json" {
				// The files crossed an Argo output parameter, which Argo trims.
				want = bytes.TrimRight(want, "\n")
			}
			assert.Equal(t, string(want), string(got), "%s of operation %d: bpa plan and the run differ", f, i+1)
		}
	}
}

// writeBareMetalHosts writes the site's BareMetalHosts as one List, the form `bpa plan --bmh`
// reads (what `kubectl get bmh -o yaml` prints).
func (e *env) writeBareMetalHosts(t *testing.T, path string) {
	var bmhs metal3v1.BareMetalHostList
	require.NoError(t, e.Client.List(e.ctx, &bmhs, client.InNamespace(e.Namespace)))
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{}}
	for _, h := range bmhs.Items {
		h.APIVersion, h.Kind, h.ManagedFields = "metal3.io/v1alpha1", "BareMetalHost", nil
		list["items"] = append(list["items"].([]any), h)
	}
	data, err := json.Marshal(list)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func (e *env) addExampleHosts(t *testing.T) {
	files, err := filepath.Glob("../../examples/bmh/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files, "examples/bmh holds the example BareMetalHosts")
	var hosts []metal3v1.BareMetalHost
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		objs, err := validation.ReadDocuments(data)
		require.NoError(t, err)
		for _, u := range objs {
			hosts = append(hosts, toBMHs(t, u)...)
		}
	}
	// Examples share machines (one MAC in two samples): create each host once.
	seen := map[string]bool{}
	unique := hosts[:0]
	for _, h := range hosts {
		if !seen[h.Name] {
			seen[h.Name] = true
			unique = append(unique, h)
		}
	}
	e.AddHosts(e.ctx, unique)
}

func toBMHs(t *testing.T, u *unstructured.Unstructured) []metal3v1.BareMetalHost {
	if u.IsList() {
		var out []metal3v1.BareMetalHost
		list, err := u.ToList()
		require.NoError(t, err)
		for i := range list.Items {
			out = append(out, toBMHs(t, &list.Items[i])...)
		}
		return out
	}
	if u.GetKind() != "BareMetalHost" {
		return nil
	}
	var h metal3v1.BareMetalHost
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &h))
	return []metal3v1.BareMetalHost{h}
}

func (e *env) assertProvisioned(t *testing.T, p *bpav1.Provisioning) {
	cluster := p.Labels["cluster"]
	want := 6
	if len(p.Status.Steps) > 3 && p.Status.Steps[3].Name == translator.StepBackupEtcd {
		want = 7 // a day-2 run (an ad-hoc rerun): its verified etcd snapshot first
	}
	require.Len(t, p.Status.Steps, want)
	for _, s := range p.Status.Steps {
		assert.Equal(t, "Succeeded", s.Phase, s.Name)
	}
	assert.Equal(t, fmt.Sprintf("%d/%d", want, want), p.Status.Progress)
	require.NotEmpty(t, p.Status.Hosts)
	for _, h := range p.Status.Hosts {
		assert.NotEmpty(t, h.IP, h.Name)
		assert.NotEmpty(t, h.BareMetalHost, h.Name)
	}
	assert.Equal(t, kubeconfig.PublishedSecretName(cluster), p.Status.KubeconfigSecretName)
	assert.True(t, isTrue(p.Status.Conditions, bpav1.ConditionReady))

	sec := &corev1.Secret{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: kubeconfig.PublishedSecretName(cluster)}, sec))
	cfg, err := clientcmd.Load(sec.Data["value"])
	require.NoError(t, err, "the published kubeconfig parses")
	master := firstMaster(p)
	for _, c := range cfg.Clusters {
		assert.Contains(t, c.Server, "https://"+master.IP+":", "the kubeconfig points at the first master")
	}
	cm := &corev1.ConfigMap{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: kubeconfig.AddressConfigMapName(cluster)}, cm))
	for _, h := range p.Status.Hosts {
		for _, r := range h.Roles {
			assert.Equal(t, h.IP, cm.Data[strings.ToUpper(r)+"_"+h.Name], "%s %s", r, h.Name)
		}
	}
	e.assertProvisioningLogs(t, p)
	e.assertNoSecretOutsideSecrets(t, cfg)
}

// assertNoSecretOutsideSecrets looks for the SSH private key and the published kubeconfig's
// credentials, as text or base64, everywhere but in Secrets: the Workflows (spec, and every
// node's inputs, outputs and message), the step results Argo keeps, the BPA CRs' status,
// the ConfigMaps and the Events of the namespace, and the logs of every container of every
// pod there (what kubectl logs, argo logs and the UI show).
func (e *env) assertNoSecretOutsideSecrets(t *testing.T, kubeconfig *clientcmdapi.Config) {
	t.Helper()
	needles := e.secretNeedles(t, kubeconfig)
	lists := []client.ObjectList{&wfv1.WorkflowList{}, &wfv1.WorkflowTaskResultList{}, &bpav1.ProvisioningList{},
		&bpav1.SoftwareList{}, &corev1.ConfigMapList{}, &corev1.EventList{}}
	for _, list := range lists {
		require.NoError(t, e.Client.List(e.ctx, list, client.InNamespace(e.Namespace)))
		data, err := json.Marshal(list)
		require.NoError(t, err)
		for _, n := range needles {
			assert.NotContains(t, string(data), n, "a secret in a %T", list)
		}
	}
	logs := e.stepLogs(t)
	require.Contains(t, logs, "PLAY RECAP", "the scan reads the steps' logs")
	for _, n := range needles {
		assert.NotContains(t, logs, n, "a secret in a step's log")
	}
}

// secretNeedles are distinctive pieces of the SSH private key and of the published
// kubeconfig's credentials, as text and as base64.
func (e *env) secretNeedles(t *testing.T, kubeconfig *clientcmdapi.Config) []string {
	t.Helper()
	key, err := os.ReadFile(e.SSH.ClientKeyPath())
	require.NoError(t, err)
	secrets := map[string][]byte{"the SSH private key": key}
	for name, a := range kubeconfig.AuthInfos {
		if a.Token != "" {
			secrets["kubeconfig token of "+name] = []byte(a.Token)
		}
		if len(a.ClientKeyData) > 0 {
			secrets["kubeconfig client key of "+name] = a.ClientKeyData
		}
	}
	require.Greater(t, len(secrets), 1, "the published kubeconfig carries a credential to look for")
	var needles []string
	for what, secret := range secrets {
		for _, form := range []string{secretCore(string(secret)), secretCore(base64.StdEncoding.EncodeToString(secret))} {
			require.GreaterOrEqual(t, len(form), 16, what)
			needles = append(needles, form)
		}
	}
	return needles
}

// secretCore is a distinctive piece of a secret's text: the middle of its longest line,
// so that it matches a copy however that copy breaks or escapes its lines.
func secretCore(s string) string {
	longest := ""
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); len(line) > len(longest) {
			longest = line
		}
	}
	if len(longest) > 40 {
		return longest[len(longest)/2-20 : len(longest)/2+20]
	}
	return longest
}

func firstMaster(p *bpav1.Provisioning) bpav1.HostStatus {
	var masters []bpav1.HostStatus
	for _, h := range p.Status.Hosts {
		for _, r := range h.Roles {
			if r == "master" {
				masters = append(masters, h)
			}
		}
	}
	sort.Slice(masters, func(i, j int) bool { return masters[i].Name < masters[j].Name })
	return masters[0]
}

// softwareOnExample applies the example Software to the cluster just built and checks the
// per-host versions in its status.
func (e *env) softwareOnExample(t *testing.T, p *bpav1.Provisioning) {
	data, err := os.ReadFile("../../examples/software.yaml")
	require.NoError(t, err)
	docs, problems := validation.ValidateFile(e.ctx, "software.yaml", data)
	require.Empty(t, problems)
	s := docs[0].Object.(*bpav1.Software)
	require.Equal(t, p.Labels["cluster"], s.Labels["cluster"])
	s.Namespace = e.Namespace
	s.Spec.SSH = &bpav1.SSHConfig{Port: int32(e.SSH.Port)}
	require.NoError(t, e.Client.Create(e.ctx, s))
	got := &bpav1.Software{}
	e.waitFor(t, got, s.Name, func() bool { return got.Status.Phase == bpav1.PhaseSucceeded }, "Software Succeeded")
	e.checkDescribe(t, p, got)
	e.assertFanOutNames(t, got)
	require.Len(t, got.Status.HostSoftware, len(p.Status.Hosts))
	for _, h := range got.Status.HostSoftware {
		assert.Equal(t, "Succeeded", h.Phase, h.Name)
		for _, pkg := range h.Packages {
			assert.NotEmpty(t, pkg.Installed, "%s %s", h.Name, pkg.Name)
			if pkg.Name == "jq" && strings.HasPrefix(h.Name, "master") {
				assert.Equal(t, "1.5+dfsg-1ubuntu0.1", pkg.Installed, h.Name)
			}
		}
	}
	require.NoError(t, e.Client.Delete(e.ctx, got))
}

func (e *env) deleteAndCheckCleanup(t *testing.T, p *bpav1.Provisioning) {
	cluster := p.Labels["cluster"]
	claimed := e.claimedBy(t, p)
	require.NoError(t, e.Client.Delete(e.ctx, p))
	e.waitGone(t, p)
	assert.Empty(t, e.workflowsOf(t, bpav1.ProvisioningNameLabel, p.Name), "Workflows are deleted")
	for _, o := range []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}} {
		name := kubeconfig.PublishedSecretName(cluster)
		if _, ok := o.(*corev1.ConfigMap); ok {
			name = kubeconfig.AddressConfigMapName(cluster)
		}
		err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, o)
		assert.True(t, apierrors.IsNotFound(err), "%s is deleted: %v", name, err)
	}
	hosts := &metal3v1.BareMetalHostList{}
	require.NoError(t, e.Client.List(e.ctx, hosts, client.InNamespace(e.Namespace), client.MatchingLabels{bpav1.HostClaimLabel: cluster}))
	assert.Empty(t, hosts.Items, "host claims are released")
	e.assertReleased(t, p, claimed)
	e.Reprovision(e.ctx, claimed...) // metal3 cleans them, the admin provisions them again
}

// claimedBy names the BareMetalHosts whose claim carries p's uid.
func (e *env) claimedBy(t *testing.T, p *bpav1.Provisioning) []string {
	t.Helper()
	hosts := &metal3v1.BareMetalHostList{}
	require.NoError(t, e.Client.List(e.ctx, hosts, client.InNamespace(e.Namespace)))
	var out []string
	for _, h := range hosts.Items {
		if ref := h.Spec.ConsumerRef; ref != nil && ref.UID == p.UID {
			out = append(out, h.Name)
		}
	}
	return out
}

// assertReleased checks that BPA released each named host for p as the site's hostRelease,
// Deprovision, says: marked as released by p and without its image, so that metal3 cleans
// it before any other tenant can claim it. Power is never touched. (Retain, which keeps the
// image, is test/integration's TestReleasedHostIsNotHandedToAnotherTenant.)
func (e *env) assertReleased(t *testing.T, p *bpav1.Provisioning, names []string) {
	t.Helper()
	for _, name := range names {
		h := &metal3v1.BareMetalHost{}
		require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, h))
		assert.Nil(t, h.Spec.ConsumerRef, "%s: released", name)
		assert.Equal(t, p.Namespace+"/"+p.Name, h.Annotations[bpav1.HostReleasedFromAnnotation], "%s: released-from", name)
		assert.True(t, h.Spec.Online, "%s: power is never touched", name)
		assert.Nil(t, h.Spec.Image, "%s: the release removes the image, so metal3 deprovisions it", name)
	}
}

// ---- scenario b: a lease that appears later ----

func (e *env) scenarioLateLease(t *testing.T) {
	p := e.newCluster(t, "late-lease", 110, 1, 1)
	// Certificates that expire in 10 days, within the 30 days' warning.
	e.shortCertificates(t, 10*24*time.Hour)
	p.Spec.Certificates = &bpav1.CertificatesConfig{ExpiryWarningDays: 30}
	late := &metal3v1.BareMetalHost{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: "late-lease-w1"}, late))
	ip := late.Status.HardwareDetails.NIC[0].IP
	late.Status.HardwareDetails.NIC[0].IP = ""
	require.NoError(t, e.Client.Status().Update(e.ctx, late))
	reader, stranger := e.metricsReaderToken(t)
	before := e.controllerMetrics(t, reader)

	e.create(t, p)
	// Wait until resolve-leases has failed at least once for want of the lease.
	e.waitWorkflow(t, p.Name, "resolve-leases to fail once", func(wf *wfv1.Workflow) bool {
		for _, n := range wf.Status.Nodes {
			if strings.HasPrefix(n.DisplayName, "resolve-leases(") && n.Phase == wfv1.NodeFailed {
				return true
			}
		}
		return false
	})
	// DHCP answers: the host's NIC gets its address.
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(late), late))
	late.Status.HardwareDetails.NIC[0].IP = ip
	require.NoError(t, e.Client.Status().Update(e.ctx, late))
	got := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	e.assertProvisioned(t, got)
	e.assertCertificates(t, got, 10*24*time.Hour)
	e.assertRunMetrics(t, got, before, reader, stranger)
}

// ---- scenario c: kubespray fails, then `argo retry` ----

func (e *env) scenarioRetry(t *testing.T) {
	p := e.newCluster(t, "retry", 120, 1, 1)
	require.NoError(t, os.WriteFile(e.FailFile, nil, 0o644))
	e.create(t, p)
	failed := e.waitPhase(t, p.Name, bpav1.PhaseFailed)
	assert.Contains(t, failed.Status.Message, "step run-kubespray failed")
	assert.Contains(t, failed.Status.Message, "injected failure")
	assert.True(t, isTrue(failed.Status.Conditions, bpav1.ConditionStalled))
	// The failed step's log, where a user looks first, shows the failing Ansible task.
	assertLogLines(t, e.argoLogs(t, failed.Status.Workflow.Name), "run-kubespray",
		`TASK \[sim : SIMULATED injected failure in kubernetes/control-plane : kubeadm init\]`, `fatal: \[\S+\]: FAILED! => .*injected failure`, "PLAY RECAP")
	// Argo did not retry it: its retry is for a pod the node lost, and what kubespray said
	// (a non-zero exit: Failed) is for a person to read first.
	wf := &wfv1.Workflow{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: failed.Status.Workflow.Name}, wf))
	var attempts []wfv1.NodeStatus
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePod && strings.HasPrefix(n.DisplayName, translator.StepCreate+"(") {
			attempts = append(attempts, n)
		}
	}
	require.Len(t, attempts, 1, "one attempt of %s: %v", translator.StepCreate, failedNodes(wf))
	assert.Equal(t, wfv1.NodeFailed, attempts[0].Phase)
	assert.Contains(t, attempts[0].Message, "Error (exit code ", "kubespray exited non-zero")

	require.NoError(t, os.Remove(e.FailFile))
	out, err := e.Argo(e.ctx, "retry", failed.Status.Workflow.Name)
	require.NoError(t, err, out)
	e.waitPhase(t, p.Name, bpav1.PhaseRunning)
	got := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	assert.Equal(t, failed.Status.Workflow.Name, got.Status.Workflow.Name, "retried in place")
	e.assertProvisioned(t, got)
}

// ---- scenario d: `argo submit --from workflowtemplate/bpa-provision` is mirrored ----

func (e *env) scenarioSubmitFrom(t *testing.T) {
	p := e.newCluster(t, "adhoc", 130, 1, 1)
	e.create(t, p)
	first := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)

	out, err := e.Argo(e.ctx, "submit", "--from", "workflowtemplate/bpa-provision", "-p", "provisioning="+p.Name, "-o", "name")
	require.NoError(t, err, out)
	name := strings.TrimSpace(out)
	require.NotEqual(t, first.Status.Workflow.Name, name)
	got := &bpav1.Provisioning{}
	e.waitFor(t, got, p.Name, func() bool {
		return got.Status.Workflow != nil && got.Status.Workflow.Name == name && got.Status.Phase == bpav1.PhaseSucceeded
	}, "the ad-hoc run mirrored and Succeeded")
	e.assertProvisioned(t, got)
	assert.Len(t, e.workflowsOf(t, bpav1.ProvisioningNameLabel, p.Name), 2, "the ad-hoc run starts no controller run")
	e.adHocDay2(t, got)
}

// ---- scenario e: the controller dies mid-run ----

func (e *env) scenarioControllerRestart(t *testing.T) {
	p := e.newCluster(t, "restart", 140, 1, 2)
	e.create(t, p)
	e.waitWorkflow(t, p.Name, "the run to start", func(wf *wfv1.Workflow) bool {
		return wf.Status.Phase == wfv1.WorkflowRunning
	})
	e.StopController(true)
	time.Sleep(2 * time.Second) // let the run move on while nobody mirrors it
	e.StartController()
	got := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	e.assertProvisioned(t, got)
	assert.Len(t, e.workflowsOf(t, bpav1.ProvisioningNameLabel, p.Name), 1, "no duplicate Workflow")
}

// ---- scenario f: the CR is deleted mid-run ----

func (e *env) scenarioDeleteMidRun(t *testing.T) {
	p := e.newCluster(t, "delete", 150, 1, 1)
	e.create(t, p)
	e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)
	// Start a second run and delete the CR while it is going: the published objects of the
	// first run, the Workflows and the claims must all go.
	got := &bpav1.Provisioning{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(p), got))
	got.Annotations = map[string]string{bpav1.RerunAnnotation: "1"}
	require.NoError(t, e.Client.Update(e.ctx, got))
	e.waitWorkflow(t, p.Name, "the rerun to start", func(wf *wfv1.Workflow) bool {
		return wf.Annotations[bpav1.RerunAnnotation] == "1" && wf.Status.Phase == wfv1.WorkflowRunning
	})
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(p), got))
	e.deleteAndCheckCleanup(t, got)
}

// ---- scenario g: two CRs of one cluster never run at once ----

func (e *env) scenarioClusterMutex(t *testing.T) {
	// Two CRs naming the same cluster and hosts, as ICN's samples do for cluster-xyz: the
	// older one holds the cluster; the other is Stalled, names the holder and touches
	// nothing (no Workflow, no claim) until the holder is deleted, then takes over once
	// metal3 has cleaned the hosts (the site's hostRelease, Deprovision).
	a := e.newCluster(t, "shared", 160, 1, 1)
	b := a.DeepCopy()
	b.Name = "shared-b"
	e.create(t, a)
	e.assertProvisioned(t, e.waitPhase(t, a.Name, bpav1.PhaseSucceeded))
	e.create(t, b)
	stalled := &bpav1.Provisioning{}
	e.waitFor(t, stalled, b.Name, func() bool {
		c := meta.FindStatusCondition(stalled.Status.Conditions, bpav1.ConditionStalled)
		return c != nil && c.Reason == bpav1.ReasonClusterHeldByOther
	}, "the second Provisioning of the cluster to stall")
	assert.Contains(t, stalled.Status.Message, "cluster shared is held by Provisioning shared")
	assert.Empty(t, e.workflowsOf(t, bpav1.ProvisioningNameLabel, b.Name), "the second one starts no run")

	// Runs of one cluster never overlap, whoever starts them: the holder's rerun and an
	// ad-hoc run of the same cluster queue on the cluster's mutex.
	held := &bpav1.Provisioning{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: a.Name}, held))
	held.Annotations = map[string]string{bpav1.RerunAnnotation: "1"}
	require.NoError(t, e.Client.Update(e.ctx, held))
	out, err := e.Argo(e.ctx, "submit", "-n", e.Namespace, "--from", "workflowtemplate/bpa-provision", "-p", "provisioning="+a.Name)
	require.NoError(t, err, out)
	deadline := time.Now().Add(2 * runTimeout) // the rerun and the ad-hoc run, one after the other
	for {
		// From the cache: ten reads a second cost the apiserver nothing.
		wfs := e.cachedWorkflowsOf(t, bpav1.ProvisioningNameLabel, a.Name)
		// An ad-hoc run looks its CR up before it takes the cluster's mutex: what must
		// never overlap is the steps that act on the cluster.
		running, done := 0, 0
		for _, wf := range wfs {
			if wf.Status.Fulfilled() {
				done++
			}
			for _, n := range wf.Status.Nodes {
				if n.Type == wfv1.NodeTypePod && n.Phase == wfv1.NodeRunning && !strings.HasPrefix(n.DisplayName, "lookup") {
					running++
					break
				}
			}
		}
		require.LessOrEqual(t, running, 1, "two Workflows of one cluster are acting on it at once")
		if done == 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "every run should finish")
		time.Sleep(100 * time.Millisecond)
	}

	claimed := e.claimedBy(t, held)
	require.NotEmpty(t, claimed)
	require.NoError(t, e.Client.Delete(e.ctx, held))
	e.waitGone(t, held)
	e.assertReleased(t, held, claimed)
	e.Reprovision(e.ctx, claimed...) // metal3 cleans them, the admin provisions them again
	e.assertProvisioned(t, e.waitPhase(t, b.Name, bpav1.PhaseSucceeded))
	for _, name := range claimed {
		h := &metal3v1.BareMetalHost{}
		require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, h))
		assert.Equal(t, b.Name, h.Spec.ConsumerRef.Name, "%s: taken over by the second CR", name)
	}
}

// editPolicy applies edit to the site's BPAPolicy, again on a conflict: the sites on the
// node share it, and each edits only what is its own (an artifact server of its, say).
func (e *env) editPolicy(t *testing.T, edit func(*bpav1.BPAPolicy)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pol := &bpav1.BPAPolicy{}
		if err := e.Client.Get(e.ctx, client.ObjectKey{Name: bpav1.PolicyName}, pol); err != nil {
			return err
		}
		edit(pol)
		return e.Client.Update(e.ctx, pol)
	}))
}

// editArtifactServer applies edit to the site policy's artifact server at url.
func (e *env) editArtifactServer(t *testing.T, url string, edit func(*bpav1.ArtifactServer)) {
	t.Helper()
	e.editPolicy(t, func(pol *bpav1.BPAPolicy) {
		for i := range pol.Spec.ArtifactServers {
			if pol.Spec.ArtifactServers[i].URL == url {
				edit(&pol.Spec.ArtifactServers[i])
			}
		}
	})
}

// addArtifactServer lists server in the site policy for the rest of t.
func (e *env) addArtifactServer(t *testing.T, server bpav1.ArtifactServer) {
	t.Helper()
	e.editPolicy(t, func(pol *bpav1.BPAPolicy) { pol.Spec.ArtifactServers = append(pol.Spec.ArtifactServers, server) })
	t.Cleanup(func() {
		e.editPolicy(t, func(pol *bpav1.BPAPolicy) {
			pol.Spec.ArtifactServers = slices.DeleteFunc(pol.Spec.ArtifactServers, func(s bpav1.ArtifactServer) bool { return s.URL == server.URL })
		})
	})
}

// ---- scenario i: claims are metal3's spec.consumerRef ----

// A host another consumer (Cluster API's Metal3 provider) holds is never taken and the CR
// names it; two Provisionings racing for one host never both get it; deleting one releases
// only its own claims; `kubectl get bmh` shows the consumer.
func (e *env) scenarioConsumerRef(t *testing.T) {
	taken := e.newCluster(t, "capm3-host", 200, 1, 0)
	host := &metal3v1.BareMetalHost{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: "capm3-host-m1"}, host))
	capm3 := &corev1.ObjectReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "Metal3Machine", Namespace: e.Namespace, Name: "workload-cp-0"}
	host.Spec.ConsumerRef = capm3
	require.NoError(t, e.Client.Update(e.ctx, host))

	// Two clusters want the one free host of a rack (by resources, through a selector).
	racers := e.newCluster(t, "race-host", 210, 1, 0)
	rack := &metal3v1.BareMetalHost{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: "race-host-m1"}, rack))
	rack.Labels = map[string]string{"rack": "race"}
	require.NoError(t, e.Client.Update(e.ctx, rack))
	var race []*bpav1.Provisioning
	for _, name := range []string{"race-a", "race-b"} {
		p := racers.DeepCopy()
		p.Name, p.Labels = name, map[string]string{"cluster": name}
		p.Spec.Masters = []bpav1.NodeEntry{{"m1": {CPU: ptrInt32(4)}}}
		p.Spec.MasterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "race"}}
		race = append(race, p)
	}
	e.create(t, taken)
	for _, p := range race {
		e.create(t, p)
	}

	failed := e.waitPhase(t, taken.Name, bpav1.PhaseFailed)
	assert.Contains(t, failed.Status.Message, "BareMetalHost capm3-host-m1 is used by Metal3Machine "+e.Namespace+"/workload-cp-0")
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(host), host))
	assert.Equal(t, capm3, host.Spec.ConsumerRef, "another consumer's host is left alone")

	var winner, loser *bpav1.Provisioning
	for _, p := range race {
		got := &bpav1.Provisioning{}
		e.waitFor(t, got, p.Name, func() bool { return got.Status.Phase == bpav1.PhaseSucceeded || got.Status.Phase == bpav1.PhaseFailed }, "the race to end")
		if got.Status.Phase == bpav1.PhaseSucceeded {
			require.Nil(t, winner, "both Provisionings got the one host")
			winner = got
		} else {
			loser = got
		}
	}
	require.NotNil(t, winner, "one of the two gets the host")
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(rack), rack))
	require.NotNil(t, rack.Spec.ConsumerRef)
	assert.Equal(t, winner.UID, rack.Spec.ConsumerRef.UID, "the host names the winner")
	assert.Equal(t, winner.Name, rack.Spec.ConsumerRef.Name)
	assert.Contains(t, loser.Status.Message, "used by another consumer", "the loser finds the host taken")

	out, err := exec.CommandContext(e.ctx, "kubectl", "--kubeconfig", e.Rig.Kubeconfig, "-n", e.Namespace, "get", "bmh", rack.Name).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Regexp(t, `CONSUMER`, string(out))
	assert.Regexp(t, rack.Name+`\s+.*\b`+winner.Name+`\b`, string(out), "kubectl get bmh shows the consumer")

	// The loser's deletion releases nothing of the winner's; the winner's releases its own.
	require.NoError(t, e.Client.Delete(e.ctx, loser))
	e.waitGone(t, loser)
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(rack), rack))
	assert.Equal(t, winner.UID, rack.Spec.ConsumerRef.UID)
	for _, p := range []*bpav1.Provisioning{winner, failed} {
		require.NoError(t, e.Client.Delete(e.ctx, p))
		e.waitGone(t, p)
	}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(rack), rack))
	assert.Nil(t, rack.Spec.ConsumerRef, "released")
	assert.Empty(t, rack.Labels[bpav1.HostClaimLabel])
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(host), host))
	assert.Equal(t, capm3, host.Spec.ConsumerRef, "never released by BPA")
}

func ptrInt32(v int32) *int32 { return &v }

// ---- scenario h: Software edits touch only the hosts that differ; new nodes get it ----

func (e *env) scenarioSoftware(t *testing.T) {
	p := e.newCluster(t, "sw", 180, 1, 2)
	e.create(t, p)
	prov := e.waitPhase(t, p.Name, bpav1.PhaseSucceeded)

	sw := &bpav1.Software{
		ObjectMeta: metav1.ObjectMeta{Name: "sw", Namespace: e.Namespace, Labels: map[string]string{"cluster": "sw"}},
		Spec: bpav1.SoftwareSpec{
			MasterSoftware: []bpav1.SoftwareItem{{Name: "curl"}, {Name: "jq", Version: "1.6-2.1"}},
			WorkerSoftware: []bpav1.SoftwareItem{{Name: "jq", Version: "1.6-2.1"}, {Name: "tmux"}},
			SSH:            &bpav1.SSHConfig{Port: int32(e.SSH.Port)},
		},
	}
	require.NoError(t, e.Client.Create(e.ctx, sw))
	cl := &bpav1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "sw", Namespace: e.Namespace, Labels: map[string]string{"cluster": "sw"}},
		Spec: bpav1.ClusterSpec{ProvisioningCR: p.Name, SoftwareCR: sw.Name}}
	require.NoError(t, e.Client.Create(e.ctx, cl))
	got := e.waitSoftware(t, sw.Name, 1, "")
	require.Len(t, got.Status.HostSoftware, 3)
	for _, h := range got.Status.HostSoftware {
		assert.True(t, h.Changed, "first run installs on %s", h.Name)
	}
	gotCluster := &bpav1.Cluster{}
	e.waitFor(t, gotCluster, cl.Name, func() bool { return isTrue(gotCluster.Status.Conditions, bpav1.ConditionReady) }, "Cluster Ready")

	// A version change for workers: only the workers run apt-get install.
	machines := map[string]*simhost.Host{}
	for _, h := range prov.Status.Hosts {
		m := e.Machine(h.IP)
		m.ResetCalls()
		machines[h.Name] = m
	}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKeyFromObject(sw), got))
	got.Spec.WorkerSoftware[0].Version = "1.7.1-3"
	require.NoError(t, e.Client.Update(e.ctx, got))
	got = e.waitSoftware(t, sw.Name, 2, "")
	for name, m := range machines {
		installs := installCalls(m)
		if strings.HasPrefix(name, "w") {
			require.Len(t, installs, 1, name)
			assert.Contains(t, installs[0].Args, "jq=1.7.1-3", name)
		} else {
			assert.Empty(t, installs, "%s already has what it needs", name)
		}
		m.ResetCalls()
	}

	// A node joins: a new key in sw-configmap. Only it gets the packages, unasked.
	newMachine := e.StartMachine("sw-w3", e.HostIP(189))
	e.CreateSSHSecret(e.ctx, "sw") // its host key, as an operator adds a new host's key
	cm := &corev1.ConfigMap{}
	require.NoError(t, e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: "sw-configmap"}, cm))
	cm.Data["WORKER_w3"] = e.HostIP(189)
	require.NoError(t, e.Client.Update(e.ctx, cm))
	got = e.waitSoftware(t, sw.Name, 2, got.Status.NodesHash)
	require.Len(t, got.Status.HostSoftware, 4)
	installs := installCalls(newMachine)
	require.Len(t, installs, 1)
	assert.Contains(t, installs[0].Args, "jq=1.7.1-3")
	for name, m := range machines {
		assert.Empty(t, installCalls(m), "%s is not touched when another node joins", name)
	}
}

// waitSoftware waits for a Succeeded run of generation gen whose node set is not oldHash.
func (e *env) waitSoftware(t *testing.T, name string, gen int64, oldHash string) *bpav1.Software {
	t.Helper()
	got := &bpav1.Software{}
	e.waitFor(t, got, name, func() bool {
		if got.Status.Phase == bpav1.PhaseFailed || got.Status.Phase == bpav1.PhaseError {
			t.Fatalf("Software %s: %s", got.Status.Phase, got.Status.Message)
		}
		return got.Status.ObservedGeneration == gen && got.Status.NodesHash != oldHash && got.Status.Phase == bpav1.PhaseSucceeded
	}, fmt.Sprintf("Software generation %d Succeeded", gen))
	return got
}

func installCalls(m *simhost.Host) []simhost.Call {
	var out []simhost.Call
	for _, c := range m.CallsTo("apt-get") {
		if len(c.Args) > 0 && slices.Contains(c.Args, "install") {
			out = append(out, c)
		}
	}
	return out
}

// ---- helpers ----

func loadProvisioning(t *testing.T, path string) *bpav1.Provisioning {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	docs, problems := validation.ValidateFile(context.Background(), path, data)
	require.Empty(t, problems)
	require.NotEmpty(t, docs)
	return docs[0].Object.(*bpav1.Provisioning)
}

// create applies a Provisioning the way an operator would (sim.Site.Apply).
func (e *env) create(t *testing.T, p *bpav1.Provisioning) {
	require.NoError(t, e.Apply(e.ctx, p))
}

// newCluster makes BareMetalHosts, machines and a Provisioning (not yet applied) for a
// cluster of its own: masters m1.., workers w1.., at e.HostIP(base)... (sim.Site.NewCluster).
func (e *env) newCluster(t *testing.T, name string, base, masters, workers int) *bpav1.Provisioning {
	t.Helper()
	return e.NewCluster(e.ctx, name, "", base, masters, workers)
}

func (e *env) waitFor(t *testing.T, obj client.Object, name string, cond func() bool, what string) {
	t.Helper()
	e.waitWithin(t, runTimeout, obj, name, cond, what)
}

// waitWithin is waitFor with a timeout of its own.
func (e *env) waitWithin(t *testing.T, timeout time.Duration, obj client.Object, name string, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		// From the cache (Base.Reader): a state it shows is one the object had.
		err := e.Reader.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, obj)
		if err == nil && cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s of %s (last error %v); object: %+v%s", what, name, err, obj, e.podsOfRun(obj))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podsOfRun lists the pods of the Workflow a Provisioning's status names, each with its
// phase and message (a retried step's failed attempts among them), for a failure's report.
func (e *env) podsOfRun(obj client.Object) string {
	p, ok := obj.(*bpav1.Provisioning)
	if !ok || p.Status.Workflow == nil {
		return ""
	}
	wf := &wfv1.Workflow{}
	if err := e.Client.Get(e.ctx, client.ObjectKey{Namespace: e.Namespace, Name: p.Status.Workflow.Name}, wf); err != nil {
		return "\nWorkflow " + p.Status.Workflow.Name + ": " + err.Error()
	}
	var lines []string
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypePod {
			lines = append(lines, fmt.Sprintf("  %s %s %s: %s", n.StartedAt.Format(time.TimeOnly), n.DisplayName, n.Phase, n.Message))
		}
	}
	sort.Strings(lines)
	return "\nWorkflow " + wf.Name + "'s pods:\n" + strings.Join(lines, "\n")
}

func (e *env) waitPhase(t *testing.T, name string, phase bpav1.RunPhase) *bpav1.Provisioning {
	t.Helper()
	p := &bpav1.Provisioning{}
	e.waitFor(t, p, name, func() bool {
		if phase == bpav1.PhaseSucceeded && (p.Status.Phase == bpav1.PhaseFailed || p.Status.Phase == bpav1.PhaseError) {
			t.Fatalf("%s %s, waiting for Succeeded: %s", name, p.Status.Phase, p.Status.Message)
		}
		return p.Status.Phase == phase
	}, "phase "+string(phase))
	return p
}

// waitGone waits for obj's deletion, which removes finalizers only: a minute is plenty.
func (e *env) waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	e.waitGoneWithin(t, obj, time.Minute)
}

// waitGoneWithin waits up to bound for obj's deletion: a deletion that runs a Workflow first
// (deletionPolicy: Reset) is a run, bounded by runTimeout.
func (e *env) waitGoneWithin(t *testing.T, obj client.Object, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		// The cache first, then the apiserver: a cache may not have seen the object yet.
		err := e.Reader.Get(e.ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			err = e.Client.Get(e.ctx, client.ObjectKeyFromObject(obj), obj)
		}
		if apierrors.IsNotFound(err) {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s was not deleted: finalizers %v", obj.GetName(), obj.GetFinalizers())
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *env) workflowsOf(t *testing.T, label, name string) []wfv1.Workflow {
	return e.workflowsFrom(t, e.Client, label, name)
}

// cachedWorkflowsOf is workflowsOf from the cache (Base.Reader), for what polls: never for
// asserting that a Workflow is absent.
func (e *env) cachedWorkflowsOf(t *testing.T, label, name string) []wfv1.Workflow {
	return e.workflowsFrom(t, e.Reader, label, name)
}

func (e *env) workflowsFrom(t *testing.T, r client.Reader, label, name string) []wfv1.Workflow {
	list := &wfv1.WorkflowList{}
	require.NoError(t, r.List(e.ctx, list, client.InNamespace(e.Namespace), client.MatchingLabels{label: name}))
	return list.Items
}

// waitWorkflow waits until a Workflow of the Provisioning name meets cond.
func (e *env) waitWorkflow(t *testing.T, name, what string, cond func(*wfv1.Workflow) bool) {
	t.Helper()
	deadline := time.Now().Add(runTimeout)
	for time.Now().Before(deadline) {
		for _, wf := range e.cachedWorkflowsOf(t, bpav1.ProvisioningNameLabel, name) {
			if cond(&wf) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func isTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The secret scan must find a secret that did leak, as text in a JSON string or as base64.
func TestSecretCoreFindsLeakedCopies(t *testing.T) {
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\n" + strings.Repeat("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n", 5) +
		"AAAEC9x0QmYh1nL5Zr2w==\n-----END OPENSSH PRIVATE KEY-----\n"
	asText, err := json.Marshal(corev1.ConfigMap{Data: map[string]string{"k": key}})
	require.NoError(t, err)
	assert.Contains(t, string(asText), secretCore(key))
	asData, err := json.Marshal(corev1.Secret{Data: map[string][]byte{"k": []byte(key)}})
	require.NoError(t, err)
	assert.Contains(t, string(asData), secretCore(base64.StdEncoding.EncodeToString([]byte(key))))
	assert.NotContains(t, string(asText), secretCore("an unrelated secret of some length"))
}
