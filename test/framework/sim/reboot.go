package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/akraino-edge-stack/bpa/test/framework"
	"github.com/akraino-edge-stack/bpa/test/framework/simhost"
)

// The baremetal-operator cannot run here (issue 29), so the site plays its handling of
// metal3's reboot annotation, as strictly as the baremetal-operator v0.10 does in
// controllers/metal3.io/baremetalhost_controller.go, manageHostPower (with hasRebootAnnotation
// and the webhook's validateRebootAnnotation in apis/metal3.io/v1alpha1/baremetalhost_validation.go):
//   - the desired power state is spec.online, but off while a reboot annotation is set on a
//     host that is provisioned or externally provisioned; any other state leaves the host
//     alone (a force:true annotation, which powers off others, is not simulated);
//   - a host that is on and should be off is powered off (status.poweredOn false): the
//     machine loses power, its units with it, and its network link;
//   - a host that is off loses its suffixless reboot.metal3.io annotation (an Update of the
//     host), and only then, at the next reconcile, is powered on as spec.online says: it
//     boots, and its enabled units (kubelet, containerd) start, faults that lived only in
//     memory gone (BreakUntilReboot);
//   - an annotation value the webhook refuses (not JSON, or a mode other than hard, soft or
//     empty) never reaches metal3; the stand-in cannot refuse the write, so it ignores the
//     host as if it had not been written;
//   - a suffixed reboot.metal3.io/<key>, which keeps a host off until its client removes it,
//     is not simulated: the host is left alone.
//
// Only hosts the stand-in powered off are powered on again by it, so the other scenarios'
// hosts (their status set by the tests) are never touched.

// rebootPoll is how often the stand-in reconciles the hosts: the baremetal-operator acts on
// a watch, within a second or so.
const rebootPoll = time.Second

// bootTime is how long a simulated machine takes from power on to its units running.
const bootTime = 2 * time.Second

// rebooter is the stand-in for one namespace's hosts.
type rebooter struct {
	c client.Client
	// r is a cache: the hosts to act on are found there and read again from the apiserver
	// before acting (a cache may be behind the stand-in's own last write).
	r         client.Reader
	namespace string
	machineOf func(*metal3v1.BareMetalHost) *simhost.Host
	logf      func(string, ...any)
	off       map[string]bool // the hosts it powered off, by name
}

// startRebooter runs the stand-in on namespace's BareMetalHosts until t ends; machineOf is
// the simulated machine of a host (nil: none).
func startRebooter(t framework.T, c client.Client, cached client.Reader, namespace string, machineOf func(*metal3v1.BareMetalHost) *simhost.Host) {
	r := &rebooter{c: c, r: cached, namespace: namespace, machineOf: machineOf, logf: t.Logf, off: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for ctx.Err() == nil {
			r.reconcile(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(rebootPoll):
			}
		}
	})
}

// reconcile takes one step for each host, as one reconcile of the baremetal-operator does;
// a failed write waits for the next round.
func (r *rebooter) reconcile(ctx context.Context) {
	list := &metal3v1.BareMetalHostList{}
	if err := r.r.List(ctx, list, client.InNamespace(r.namespace)); err != nil {
		return
	}
	for i := range list.Items {
		h := &list.Items[i]
		if _, requested := h.Annotations[metal3v1.RebootAnnotationPrefix]; !requested && !r.off[h.Name] {
			continue // nothing to do, however far behind the cache is
		}
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(h), h); err != nil {
			continue
		}
		if err := r.step(ctx, h); err != nil && ctx.Err() == nil {
			r.logf("sim metal3: BareMetalHost %s: %v", h.Name, err)
		}
	}
}

func (r *rebooter) step(ctx context.Context, h *metal3v1.BareMetalHost) error {
	value, requested := h.Annotations[metal3v1.RebootAnnotationPrefix]
	switch {
	case requested && !validRebootValue(value):
		return nil // the webhook would have refused it
	case requested && !h.Status.PoweredOn:
		// Off: the request is done (manageHostPower removes the suffixless annotation of a
		// host that is off, before it powers it on).
		delete(h.Annotations, metal3v1.RebootAnnotationPrefix)
		return r.c.Update(ctx, h)
	case requested && provisioned(h):
		return r.power(ctx, h, false)
	case !requested && !h.Status.PoweredOn && h.Spec.Online && r.off[h.Name]:
		return r.power(ctx, h, true)
	}
	return nil
}

// power turns h's machine off or on, then records it in status.poweredOn.
func (r *rebooter) power(ctx context.Context, h *metal3v1.BareMetalHost, on bool) error {
	m := r.machineOf(h)
	if m == nil {
		return errors.New("no simulated machine")
	}
	if on {
		if err := bootMachine(m); err != nil {
			return err
		}
	} else if err := powerOffMachine(m); err != nil {
		return err
	}
	h.Status.PoweredOn = on
	if err := r.c.Status().Update(ctx, h); err != nil {
		return err
	}
	if on {
		delete(r.off, h.Name)
	} else {
		r.off[h.Name] = true
	}
	r.logf("sim metal3: BareMetalHost %s powered %s", h.Name, map[bool]string{true: "on", false: "off"}[on])
	return nil
}

// validRebootValue is what the baremetal-operator's webhook admits (validateRebootAnnotation).
func validRebootValue(v string) bool {
	if v == "" {
		return true
	}
	var args metal3v1.RebootAnnotationArguments
	if err := json.Unmarshal([]byte(v), &args); err != nil {
		return false
	}
	return slices.Contains([]metal3v1.RebootMode{metal3v1.RebootModeHard, metal3v1.RebootModeSoft, ""}, args.Mode)
}

func provisioned(h *metal3v1.BareMetalHost) bool {
	s := h.Status.Provisioning.State
	return s == metal3v1.StateProvisioned || s == metal3v1.StateExternallyProvisioned
}

// powerOffMachine takes m's power away: its units stop and its link goes down.
func powerOffMachine(m *simhost.Host) error {
	k, ok := machineKubelets.Load(m)
	if !ok {
		return fmt.Errorf("machine %s has no units", m.Name)
	}
	k.(*kubeletUnits).powerOff()
	return m.CutNetwork()
}

// bootMachine powers m on: its link comes up and, after bootTime, its units run, with no
// fault BreakUntilReboot left.
func bootMachine(m *simhost.Host) error {
	k, ok := machineKubelets.Load(m)
	if !ok {
		return fmt.Errorf("machine %s has no units", m.Name)
	}
	if err := m.RestoreNetwork(); err != nil {
		return err
	}
	time.Sleep(bootTime)
	k.(*kubeletUnits).boot()
	return nil
}

// BreakUntilReboot stops unit (KubeletUnit or ContainerdUnit) on machine m and makes every
// start of it fail until the machine reboots, as a unit whose state in memory (a hung
// mount, a wedged driver) only a reboot clears: restarting it does not help.
func BreakUntilReboot(m *simhost.Host, unit string) error {
	k, ok := machineKubelets.Load(m)
	if !ok {
		return fmt.Errorf("machine %s has no units", m.Name)
	}
	k.(*kubeletUnits).breakUntilReboot(unit)
	return nil
}
