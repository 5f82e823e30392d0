//go:build demo

// Package demo is `make demo`: BPA's main job, on an embedded control plane, live.
//
// It is a test binary so that it can reuse the test rig (real etcd, kube-apiserver, Argo
// workflow-controller, sshd) and its cleanup; the build tag keeps it out of `go test ./...`.
package demo

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/validation"
	"github.com/akraino-edge-stack/bpa/test/rig"
	"github.com/akraino-edge-stack/bpa/test/sim"
)

const (
	provisioningExample = "examples/provisioning-mac-and-resources.yaml"
	hostsExample        = "examples/bmh/provisioning-mac-and-resources.yaml"
	softwareExample     = "examples/software.yaml"
	clusterExample      = "examples/cluster.yaml"
	demoTimeout         = 5 * time.Minute
)

func TestMain(m *testing.M) {
	sim.MaybeRunKubespray()
	os.Exit(m.Run())
}

func say(format string, args ...any) {
	fmt.Printf("%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func TestDemo(t *testing.T) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := rig.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	oneshot := os.Getenv("DEMO_ONESHOT") != ""

	say("BPA demo: real etcd, kube-apiserver, Argo workflow-controller, BPA controller and sshd.")
	say("SIMULATED: the bare-metal nodes (sshd on 127.0.1.x, a stand-in kubelet running step pods")
	say("as local processes) and kubespray's own run. Every BPA step runs its real code.")
	say("starting the embedded control plane and simulated site...")
	site := sim.New(t, sim.Options{})
	say("control plane up: apiserver %s, namespace %s", site.Rig.URL, site.Namespace)

	kubeconfig := filepath.Join(root, "bin", "demo.kubeconfig")
	data, err := os.ReadFile(site.Rig.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(kubeconfig) })
	say("kubectl and argo work against the demo: export KUBECONFIG=%s ARGO_NAMESPACE=%s", kubeconfig, site.Namespace)

	hosts := readHosts(t, filepath.Join(root, hostsExample))
	site.AddHosts(ctx, hosts)
	say("created %d BareMetalHosts from %s, each a simulated machine with a real sshd", len(hosts), hostsExample)

	objs := readCRs(t, filepath.Join(root, provisioningExample), filepath.Join(root, softwareExample), filepath.Join(root, clusterExample))
	prov := objs[0].(*bpav1.Provisioning)
	site.CreateSSHSecret(ctx, prov.Labels["cluster"])
	say("created Secret %s-ssh (SSH key and known_hosts)", prov.Labels["cluster"])
	for _, o := range objs {
		o.SetNamespace(site.Namespace)
		switch cr := o.(type) {
		case *bpav1.Provisioning:
			cr.Spec.SSH = &bpav1.SSHConfig{Port: int32(site.SSH.Port)}
		case *bpav1.Software:
			cr.Spec.SSH = &bpav1.SSHConfig{Port: int32(site.SSH.Port)}
		}
		if err := site.Client.Create(ctx, o); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
		say("applied %T %s", o, o.GetName())
	}

	if err := watch(ctx, site, prov.Name, objs[1].GetName()); err != nil {
		t.Fatal(err)
	}
	if oneshot {
		say("DEMO_ONESHOT: the examples succeeded; stopping everything.")
		return
	}
	say("running until Ctrl-C (then everything the demo started stops)")
	<-ctx.Done()
	say("stopping...")
}

// watch prints each step as it changes, until both CRs succeed.
func watch(ctx context.Context, site *sim.Site, provName, swName string) error {
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()
	seen := map[string]string{}
	report := func(kind, name string, st *bpav1.RunStatus) {
		key := kind + "/" + name
		if line := fmt.Sprintf("%s %s", st.Phase, st.Progress); seen[key] != line && st.Phase != "" {
			seen[key] = line
			wf := "-"
			if st.Workflow != nil {
				wf = st.Workflow.Name
			}
			say("%-12s %-24s %-9s %-5s workflow %s", kind, name, st.Phase, st.Progress, wf)
		}
		for _, s := range st.Steps {
			k := key + "/" + s.Name
			if seen[k] != s.Phase && s.Phase != "Pending" {
				seen[k] = s.Phase
				msg := ""
				if s.Message != "" {
					msg = ": " + s.Message
				}
				say("    %-20s %s%s", s.Name, s.Phase, msg)
			}
		}
	}
	for {
		p, sw := &bpav1.Provisioning{}, &bpav1.Software{}
		key := func(n string) client.ObjectKey { return client.ObjectKey{Namespace: site.Namespace, Name: n} }
		if err := site.Client.Get(ctx, key(provName), p); err != nil {
			return err
		}
		if err := site.Client.Get(ctx, key(swName), sw); err != nil {
			return err
		}
		report("Provisioning", p.Name, &p.Status.RunStatus)
		report("Software", sw.Name, &sw.Status.RunStatus)
		for _, st := range []*bpav1.RunStatus{&p.Status.RunStatus, &sw.Status.RunStatus} {
			if st.Phase == bpav1.PhaseFailed || st.Phase == bpav1.PhaseError {
				return fmt.Errorf("run failed: %s", st.Message)
			}
		}
		if p.Status.Phase == bpav1.PhaseSucceeded && sw.Status.Phase == bpav1.PhaseSucceeded {
			say("Provisioning %s Succeeded: Workflow %s, kubeconfig in Secret %s (key value)", p.Name, p.Status.Workflow.Name, p.Status.KubeconfigSecretName)
			for _, h := range p.Status.Hosts {
				say("    host %-10s %-15s %-17s BareMetalHost %s roles %s", h.Name, h.IP, h.MAC, h.BareMetalHost, strings.Join(h.Roles, ","))
			}
			say("Software %s Succeeded: Workflow %s", sw.Name, sw.Status.Workflow.Name)
			for _, h := range sw.Status.HostSoftware {
				var pkgs []string
				for _, pk := range h.Packages {
					pkgs = append(pkgs, pk.Name+"="+pk.Installed)
				}
				sort.Strings(pkgs)
				say("    host %-10s %s", h.Name, strings.Join(pkgs, " "))
			}
			c := &bpav1.Cluster{}
			list := &bpav1.ClusterList{}
			if err := site.Client.List(ctx, list, client.InNamespace(site.Namespace)); err == nil && len(list.Items) > 0 {
				c = &list.Items[0]
				say("Cluster %s: %s (provisioning %s, software %s)", c.Name, c.Status.Phase, c.Status.ProvisioningPhase, c.Status.SoftwarePhase)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the examples did not succeed in time: %w", ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func readHosts(t *testing.T, path string) []metal3v1.BareMetalHost {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := validation.ReadDocuments(data)
	if err != nil {
		t.Fatal(err)
	}
	var out []metal3v1.BareMetalHost
	for _, u := range objs {
		items := []map[string]any{u.Object}
		if u.IsList() {
			items = nil
			l, _ := u.ToList()
			for _, i := range l.Items {
				items = append(items, i.Object)
			}
		}
		for _, i := range items {
			var h metal3v1.BareMetalHost
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(i, &h); err != nil {
				t.Fatal(err)
			}
			out = append(out, h)
		}
	}
	return out
}

func readCRs(t *testing.T, paths ...string) []client.Object {
	var out []client.Object
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs, problems := validation.ValidateFile(context.Background(), p, data)
		if len(problems) > 0 {
			t.Fatalf("%v", problems)
		}
		for _, d := range docs {
			out = append(out, d.Object.(client.Object))
		}
	}
	return out
}
