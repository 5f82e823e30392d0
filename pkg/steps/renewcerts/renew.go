package renewcerts

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/akraino-edge-stack/bpa/pkg/sshexec"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// outputTail is how much of the script's output is logged: its end says how it went.
const outputTail = 2048

// renew runs step 2 of the package's doc: master by master, the script, the wait for the
// renewed certificate, the checks. It returns what it renewed, also on failure.
func (o *options) renew(ctx context.Context, hs *hostSet) (stepio.Renewal, error) {
	var r stepio.Renewal
	for i, m := range hs.masters {
		done, err := o.renewOne(ctx, hs, m)
		if err != nil {
			return r, failed("%s", stopped(m.Name, err, r.Masters, hs.masters[i+1:]))
		}
		r.Masters = append(r.Masters, done)
		o.logf("%s: certificate renewed: the API server serves one until %s (was %s), away %.1fs; the cluster is healthy",
			m.Name, done.NotAfterAfter.Format(time.RFC3339), done.NotAfterBefore.Format(time.RFC3339), done.AwaySeconds)
	}
	return r, nil
}

// stopped says where the renewal stopped, what it renewed before, and what it left.
func stopped(at string, err error, renewed []stepio.MasterRenewal, untouched []*master) string {
	before, after := "none before it", "no other master was left"
	if len(renewed) > 0 {
		before = "renewed before it: " + names(renewed, func(r stepio.MasterRenewal) string { return r.Name })
	}
	if len(untouched) > 0 {
		after = "not touched: " + names(untouched, func(m *master) string { return m.Name })
	}
	return fmt.Sprintf("stopped at master %s: %v; %s; %s", at, err, before, after)
}

func names[T any](list []T, name func(T) string) string {
	var out []string
	for _, x := range list {
		out = append(out, name(x))
	}
	return strings.Join(out, ", ")
}

// renewOne renews master m and checks the cluster after it.
func (o *options) renewOne(ctx context.Context, hs *hostSet, m *master) (stepio.MasterRenewal, error) {
	before, err := m.readyz(ctx)
	if err != nil {
		return stepio.MasterRenewal{}, err
	}
	o.logf("%s: running %s; its API server serves a certificate until %s", m.Name, Script, before.Format(time.RFC3339))
	probe := o.watch(ctx, m)
	sctx, cancel := context.WithTimeout(ctx, o.scriptTimeout)
	stdout, stderr, code, err := m.conn.Run(sctx, []string{Script})
	cancel()
	o.logf("%s: %s said: %s", m.Name, Script, sshexec.Tail(append(stdout, stderr...), outputTail))
	if err == nil && code != 0 {
		err = fmt.Errorf("%s exited with status %d: %s", Script, code, sshexec.Tail(stderr, 512))
	}
	if err != nil {
		probe.stop()
		return stepio.MasterRenewal{}, err
	}
	after, err := o.awaitRenewed(ctx, m, before)
	away := probe.stop()
	if err != nil {
		return stepio.MasterRenewal{}, err
	}
	if err := o.healthy(ctx, hs); err != nil {
		return stepio.MasterRenewal{}, fmt.Errorf("after its renewal the cluster is not healthy: %v", err)
	}
	return stepio.MasterRenewal{Name: m.Name, NotAfterBefore: before, NotAfterAfter: after,
		AwaySeconds: away.Round(100 * time.Millisecond).Seconds(), RenewedAt: o.clock().UTC().Truncate(time.Second)}, nil
}

// awaitRenewed waits, up to apiserverWait, until m's API server answers /readyz with a
// certificate that expires after before.
func (o *options) awaitRenewed(ctx context.Context, m *master, before time.Time) (time.Time, error) {
	deadline := time.Now().Add(o.apiserverWait)
	for {
		after, err := m.readyz(ctx)
		if err == nil && after.After(before) {
			return after, nil
		}
		if err == nil {
			err = fmt.Errorf("its API server answers, but with a certificate until %s, not later than before the script: it was not renewed", after.Format(time.RFC3339))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("after %s waiting: %v", o.apiserverWait, err)
		}
		time.Sleep(o.poll)
	}
}

// probe asks a master's API server /readyz every poll interval while its script runs and
// after, and measures how long it did not answer.
type probe struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	away   time.Duration
	lost   time.Time // when it stopped answering; zero while it answers
}

func (o *options) watch(ctx context.Context, m *master) *probe {
	ctx, cancel := context.WithCancel(ctx)
	p := &probe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil {
			_, err := m.readyz(ctx)
			p.saw(err == nil, ctx.Err() != nil)
			select {
			case <-ctx.Done():
			case <-time.After(o.poll):
			}
		}
	}()
	return p
}

// saw records one answer, or none (unless the probe was ending, which is no outage).
func (p *probe) saw(answered, ending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch now := time.Now(); {
	case !answered && !ending && p.lost.IsZero():
		p.lost = now
	case answered && !p.lost.IsZero():
		p.away += now.Sub(p.lost)
		p.lost = time.Time{}
	}
}

// stop ends the probe and returns how long the API server did not answer; it is called
// once the API server answers again, which ends an absence the probe saw begin.
func (p *probe) stop() time.Duration {
	p.cancel()
	<-p.done
	p.saw(true, false)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.away
}
