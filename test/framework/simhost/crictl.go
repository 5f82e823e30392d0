package simhost

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/akraino-edge-stack/bpa/test/framework/simhost/systemctl"
)

// Pod is a pod sandbox of a simulated host as its crictl stand-in lists and removes it: a
// static pod the kubelet runs from a manifest. There is no container runtime on a simulated
// host: the stand-in asks the test process over the host's socket (as systemctl does), which
// answers from these.
type Pod struct {
	Namespace, Name string
	// Container is the name of the pod's one container (a kubeadm static pod's is its
	// component: kube-apiserver), which `crictl ps` lists while the pod runs.
	Container string
	// Running reports whether the kubelet runs the pod now (its manifest is there, say).
	Running func() bool
	// Removed is called when `crictl rmp -f` removes the sandbox; it returns at once, and
	// the kubelet's starting the static pod anew is the test's to simulate.
	Removed func()
}

// pod is a Pod with its sandbox generation: each removal makes the next sandbox a new ID.
type pod struct {
	Pod
	generation int
}

func (p *pod) id() string {
	sum := sha256.Sum256([]byte(p.Namespace + "/" + p.Name + "/" + strconv.Itoa(p.generation)))
	return hex.EncodeToString(sum[:])[:13]
}

// containerID is the ID of the pod's container in its current sandbox.
func (p *pod) containerID() string {
	sum := sha256.Sum256([]byte(p.id() + "/" + p.Container))
	return hex.EncodeToString(sum[:])[:13]
}

// AddPod gives the host the pod p.
func (h *Host) AddPod(p Pod) {
	h.unitsMu.Lock()
	defer h.unitsMu.Unlock()
	h.pods = append(h.pods, &pod{Pod: p})
}

// crictl answers `crictl args...` run by uid as crictl 1.31 does for the two forms
// kubespray's k8s-certs-renew.sh runs, `crictl pods [--namespace N] [--name RE] [-q]` and
// `crictl rmp -f ID...`, and for `crictl ps [--name RE] [-q]` (the running containers, as
// BPA's restore waits for the control plane to stop). Anything else fails as not simulated. crictl needs root (the
// runtime's socket is root's).
func (h *Host) crictl(uid int, args []string) systemctl.Answer {
	fail := func(format string, a ...any) systemctl.Answer {
		return systemctl.Answer{Stderr: fmt.Sprintf(format, a...) + "\n", Code: 1}
	}
	if uid != 0 {
		return fail(`validate service connection: validate CRI v1 runtime API for endpoint "unix:///run/containerd/containerd.sock": permission denied`)
	}
	if len(args) == 0 {
		return fail("crictl (simhost): give pods or rmp")
	}
	switch args[0] {
	case "pods":
		return h.crictlPods(args[1:])
	case "rmp":
		return h.crictlRmp(args[1:])
	case "ps":
		return h.crictlPs(args[1:])
	}
	return fail("crictl (simhost): %s is not simulated (pods, rmp, ps)", args[0])
}

// listFlags are the flags of crictl's listing commands that the stand-in simulates.
type listFlags struct {
	quiet     bool
	namespace string
	name      *regexp.Regexp // crictl filters names by regular expression (unanchored)
}

// parseList reads the flags of `crictl cmd`; valued names the flags with a value it takes.
func parseList(cmd string, args []string, valued ...string) (listFlags, *systemctl.Answer) {
	var f listFlags
	var name string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-q" || a == "--quiet":
			f.quiet = true
		case slices.Contains(valued, a) && i+1 < len(args):
			if a == "--namespace" {
				f.namespace = args[i+1]
			} else {
				name = args[i+1]
			}
			i++
		default:
			return f, &systemctl.Answer{Stderr: fmt.Sprintf("crictl (simhost): %s %s is not simulated\n", cmd, a), Code: 1}
		}
	}
	re, err := regexp.Compile(name)
	if err != nil {
		return f, &systemctl.Answer{Stderr: fmt.Sprintf("invalid --name %q: %v\n", name, err), Code: 1}
	}
	f.name = re
	return f, nil
}

func (h *Host) crictlPods(args []string) systemctl.Answer {
	f, fail := parseList("pods", args, "--namespace", "--name")
	if fail != nil {
		return *fail
	}
	namespace, re, quiet := f.namespace, f.name, f.quiet
	var out strings.Builder
	if !quiet {
		out.WriteString("POD ID          NAME    NAMESPACE\n")
	}
	h.unitsMu.Lock()
	defer h.unitsMu.Unlock()
	for _, p := range h.pods {
		if !p.Running() || (namespace != "" && p.Namespace != namespace) || !re.MatchString(p.Name) {
			continue
		}
		if quiet {
			fmt.Fprintln(&out, p.id())
		} else {
			fmt.Fprintf(&out, "%s   %s   %s\n", p.id(), p.Name, p.Namespace)
		}
	}
	return systemctl.Answer{Stdout: out.String()}
}

// crictlPs lists the running containers, as `crictl ps` does without -a: a pod's container
// while the pod runs, filtered by name as crictl filters (an unanchored regular expression).
func (h *Host) crictlPs(args []string) systemctl.Answer {
	f, fail := parseList("ps", args, "--name")
	if fail != nil {
		return *fail
	}
	re, quiet := f.name, f.quiet
	var out strings.Builder
	if !quiet {
		out.WriteString("CONTAINER       STATE     NAME    POD ID          POD\n")
	}
	h.unitsMu.Lock()
	defer h.unitsMu.Unlock()
	for _, p := range h.pods {
		if p.Container == "" || !p.Running() || !re.MatchString(p.Container) {
			continue
		}
		id := p.containerID()
		if quiet {
			fmt.Fprintln(&out, id)
		} else {
			fmt.Fprintf(&out, "%s   Running   %s   %s   %s\n", id, p.Container, p.id(), p.Name)
		}
	}
	return systemctl.Answer{Stdout: out.String()}
}

func (h *Host) crictlRmp(args []string) systemctl.Answer {
	force := false
	var ids []string
	for _, a := range args {
		switch {
		case a == "-f" || a == "--force":
			force = true
		case strings.HasPrefix(a, "-"):
			return systemctl.Answer{Stderr: fmt.Sprintf("crictl (simhost): rmp %s is not simulated\n", a), Code: 1}
		default:
			ids = append(ids, a)
		}
	}
	if len(ids) == 0 {
		return systemctl.Answer{Stderr: "ID cannot be empty\n", Code: 1}
	}
	var out, errs strings.Builder
	var removed []*pod
	h.unitsMu.Lock()
	for _, id := range ids {
		p := h.podByID(id)
		switch {
		case p == nil:
			fmt.Fprintf(&errs, "removing the pod sandbox %q: rpc error: code = NotFound desc = an error occurred when try to find sandbox %q: not found\n", id, id)
		case !force:
			fmt.Fprintf(&errs, "pod sandbox %q is running, please stop it first\n", id)
		default:
			p.generation++
			removed = append(removed, p)
			fmt.Fprintf(&out, "Removed sandbox %s\n", id)
		}
	}
	h.unitsMu.Unlock()
	for _, p := range removed {
		p.Removed()
	}
	a := systemctl.Answer{Stdout: out.String(), Stderr: errs.String()}
	if errs.Len() > 0 {
		a.Code = 1
	}
	return a
}

// podByID is the running pod whose sandbox is id; h.unitsMu is held.
func (h *Host) podByID(id string) *pod {
	for _, p := range h.pods {
		if p.Running() && p.id() == id {
			return p
		}
	}
	return nil
}
