// Package systemctl is the protocol between a simulated host's systemctl and crictl
// stand-ins (stub/, run on the host) and the test process that acts on the host's units and
// pods (simhost.Unit, simhost.Pod): one Request and one Answer, as JSON, over the host's unix
// socket.
//
// A unix socket, not a request file the test process watches: the call is synchronous (the
// stand-in returns when the unit has started or stopped, as systemctl does), the answer
// carries systemctl's output and exit status, the server learns the caller's uid from the
// kernel (SO_PEERCRED), and when the test process is gone the stand-in fails at once
// instead of waiting. A path in the machine's file system reaches it from every host's
// network namespace.
package systemctl

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
)

// Request is one invocation of a stand-in: the tool (systemctl or crictl) and its
// arguments, as received.
type Request struct {
	Tool string   `json:"tool"`
	Args []string `json:"args"`
}

// Answer is what the tool prints and its exit status.
type Answer struct {
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Code   int    `json:"code"`
}

// Call sends tool's args to the server at socket and returns its answer.
func Call(socket, tool string, args []string) (Answer, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return Answer{}, err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Tool: tool, Args: args}); err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := json.NewDecoder(c).Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return a, nil
}

// Main is the stand-in's main: os.Args[1] is the socket, os.Args[2] the tool, the rest its
// arguments.
func Main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: simhost-systemctl SOCKET systemctl|crictl [ARG...]")
		os.Exit(1)
	}
	a, err := Call(os.Args[1], os.Args[2], os.Args[3:])
	if err != nil {
		// What each says where no systemd, or no container runtime, answers.
		if os.Args[2] == "crictl" {
			fmt.Fprintf(os.Stderr, "validate service connection: validate CRI v1 runtime API for endpoint \"unix:///run/containerd/containerd.sock\": %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "System has not been booted with systemd as init system (PID 1). Can't operate.\nFailed to connect to bus: %v\n", err)
		}
		os.Exit(1)
	}
	_, _ = os.Stdout.WriteString(a.Stdout)
	_, _ = os.Stderr.WriteString(a.Stderr)
	os.Exit(a.Code)
}
