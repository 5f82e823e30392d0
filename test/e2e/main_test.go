// Package e2e runs BPA end to end on real etcd, kube-apiserver, Argo workflow-controller,
// argo CLI and sshd. Only pod execution and what kubespray's roles do to a machine are simulated (test/framework/sim).
package e2e

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	os.Exit(m.Run())
}
