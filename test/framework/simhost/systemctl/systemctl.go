// Package systemctl is the protocol between a simulated host's systemctl stand-in (stub/,
// run on the host) and the test process that acts on the host's units (simhost.Unit): one
// Request and one Answer, as JSON, over the host's unix socket.
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

// Request is one systemctl invocation: its arguments, as received.
type Request struct {
	Args []string `json:"args"`
}

// Answer is what systemctl prints and its exit status.
type Answer struct {
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	Code   int    `json:"code"`
}

// Call sends args to the server at socket and returns its answer.
func Call(socket string, args []string) (Answer, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return Answer{}, err
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Args: args}); err != nil {
		return Answer{}, err
	}
	var a Answer
	if err := json.NewDecoder(c).Decode(&a); err != nil {
		return Answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return a, nil
}

// Main is the stand-in's main: os.Args[1] is the socket, the rest systemctl's arguments.
func Main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: simhost-systemctl SOCKET [ARG...]")
		os.Exit(1)
	}
	a, err := Call(os.Args[1], os.Args[2:])
	if err != nil {
		// What systemctl says where no systemd answers.
		fmt.Fprintf(os.Stderr, "System has not been booted with systemd as init system (PID 1). Can't operate.\nFailed to connect to bus: %v\n", err)
		os.Exit(1)
	}
	_, _ = os.Stdout.WriteString(a.Stdout)
	_, _ = os.Stderr.WriteString(a.Stderr)
	os.Exit(a.Code)
}
