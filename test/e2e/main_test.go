// Package e2e runs BPA end to end on a real node (kubelet, containerd, runc), etcd,
// kube-apiserver, Argo's workflow-controller, executor and CLI, and sshd, in seven lanes of
// scenarios at once (TestE2E). Only what kubespray's roles do to a machine is simulated
// (test/framework/sim).
package e2e

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
