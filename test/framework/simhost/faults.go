package simhost

import (
	"errors"
	"syscall"
)

// A chaos test takes a host away for a while and gives it back: its network cut (the link
// down) or its sshd frozen. Neither loses the host's state, as a machine that drops off the
// network or hangs and comes back keeps its disk.

// CutNetwork sets the host's link on the bridge down: nothing reaches it, nor it anything.
func (h *Host) CutNetwork() error { return h.setLink("down") }

// RestoreNetwork sets the host's link on the bridge up again (CutNetwork).
func (h *Host) RestoreNetwork() error { return h.setLink("up") }

func (h *Host) setLink(state string) error {
	if h.network == nil {
		return errors.New("simhost " + h.Name + ": on loopback, no link of its own")
	}
	return run("ip", "link", "set", h.network.veth(), state)
}

// Freeze stops the host's sshd (SIGSTOP): connections are accepted by the kernel but never
// answered, as with a hung machine; sessions already open go on. Thaw resumes it.
func (h *Host) Freeze() error { return h.signalSSHD(syscall.SIGSTOP) }

// Thaw resumes the sshd Freeze stopped (SIGCONT).
func (h *Host) Thaw() error { return h.signalSSHD(syscall.SIGCONT) }

func (h *Host) signalSSHD(sig syscall.Signal) error {
	if h.cmd == nil || h.cmd.Process == nil || !h.Alive() {
		return errors.New("simhost " + h.Name + ": sshd is not running")
	}
	// The group: unshare and sshd, its child (sshd -D stays in it; each session's sshd
	// starts a session of its own, so open sessions go on).
	return syscall.Kill(-h.cmd.Process.Pid, sig)
}
