package sshexec

import (
	"context"
	"fmt"
	"sync"
)

// Target is a host to run on: its inventory name and address.
type Target struct{ Name, Addr string }

// Parallel bounds the SSH sessions a step opens at once: a thousand hosts must not open a
// thousand.
const Parallel = 32

// OnEach dials every target with cfg and runs fn on it, at most Parallel at once, and
// returns each target's output and error in the targets' order. A dial error is the
// target's error (IsNetworkFailure tells an unreachable host).
func OnEach(ctx context.Context, targets []Target, cfg Config, fn func(context.Context, *Client) (string, error)) ([]string, []error) {
	return OnEachTarget(ctx, targets, cfg, func(ctx context.Context, c *Client, _ Target) (string, error) { return fn(ctx, c) })
}

// OnEachTarget is OnEach for a command that depends on the host: fn is also given the
// target it runs on.
func OnEachTarget(ctx context.Context, targets []Target, cfg Config, fn func(context.Context, *Client, Target) (string, error)) ([]string, []error) {
	out, errs := make([]string, len(targets)), make([]error, len(targets))
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := Dial(ctx, t.Addr, cfg)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			out[i], errs[i] = fn(ctx, c, t)
		})
	}
	wg.Wait()
	return out, errs
}

// Failures describes each target whose error is set as "name (addr): error", the ones that
// could not be reached (IsNetworkFailure) apart from the ones whose command failed.
func Failures(targets []Target, errs []error) (unreachable, failed []string) {
	for i, t := range targets {
		switch {
		case errs[i] == nil:
		case IsNetworkFailure(errs[i]):
			unreachable = append(unreachable, fmt.Sprintf("%s (%s): %v", t.Name, t.Addr, errs[i]))
		default:
			failed = append(failed, fmt.Sprintf("%s (%s): %v", t.Name, t.Addr, errs[i]))
		}
	}
	return unreachable, failed
}
