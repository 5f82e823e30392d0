// Package e2e runs BPA end to end on real etcd, kube-apiserver, Argo workflow-controller,
// argo CLI and sshd. Only pod execution and kubespray's own run are simulated (test/sim).
package e2e

import (
	"os"
	"testing"

	"github.com/akraino-edge-stack/bpa/test/sim"
)

func TestMain(m *testing.M) {
	sim.MaybeRunKubespray()
	os.Exit(m.Run())
}
