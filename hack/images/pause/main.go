// Command pause is the sandbox container of the images hack/images builds: it holds a
// pod's namespaces, sleeping until SIGTERM or SIGINT, and, as PID 1 of a pod that shares
// its process namespace, reaps the children re-parented to it, as Kubernetes' pause does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (bpa hack/images)")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", s)
			os.Exit(0)
		}
		reap()
	}
}

// reap waits for every child that has exited, without blocking on those still running.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
