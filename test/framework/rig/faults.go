package rig

import (
	"context"
	"errors"
	"syscall"
)

// A chaos test (test/soak) kills the rig's own processes as a crash would, SIGKILL and
// nothing else, and starts them again as their unit would: the same flags, ports, data and
// certificates. Each start after the first logs to a file of its own ("etcd-2.log", ...).

// Kill sends SIGKILL to the process alone (kill -9, as the OOM killer or a crash ends it;
// not its group: a containerd's shims outlive it, as with systemd's KillMode=process) and
// waits for it to be reaped.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// kill kills the running process, if any (Process.Kill).
func (r *restartable) kill() error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil || p.Exited() {
		return errors.New(r.name + " is not running")
	}
	p.Kill()
	return nil
}

// etcdRun is the rig's own etcd: its spec keeps the ports the first start chose.
type etcdRun struct {
	restartable
	spec etcdSpec
}

// runEtcd starts the rig's etcd on its spec (the first time on free ports) and waits for its
// /health.
func (r *Rig) runEtcd(ctx context.Context) error {
	return r.etcd.start(func(name string) (p *Process, err error) {
		_, err = runEtcd(ctx, &r.etcd.spec, func(args []string) (*Process, error) {
			p, err = r.Spawn(name, nil, "etcd", args...)
			return p, err
		})
		return p, err
	})
}

// KillEtcd kills the rig's etcd (SIGKILL); RestartEtcd starts it again on the same data dir
// and ports.
func (r *Rig) KillEtcd() error { return r.etcd.kill() }

// RestartEtcd starts the rig's etcd after KillEtcd and waits for its /health.
func (r *Rig) RestartEtcd(ctx context.Context) error { return r.runEtcd(ctx) }

// KillAPIServer kills the rig's main kube-apiserver (SIGKILL).
func (r *Rig) KillAPIServer() error { return r.main.run.kill() }

// RestartAPIServer starts the main kube-apiserver after KillAPIServer with the same flags
// (port, etcd, certificates, tokens) and waits for its /readyz.
func (r *Rig) RestartAPIServer(ctx context.Context) error { return r.main.Start(ctx) }

// KillWorkflowController kills Argo's workflow-controller (SIGKILL).
func (r *Rig) KillWorkflowController() error { return r.wfc.kill() }

// RestartWorkflowController starts Argo's workflow-controller after KillWorkflowController
// and waits until it has loaded its configuration.
func (r *Rig) RestartWorkflowController(ctx context.Context) error {
	return r.runWorkflowController(ctx)
}
