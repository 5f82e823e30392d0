package rig

import (
	"strings"
	"time"
)

// NodeMonitorGracePeriod is how long the application cluster's node-lifecycle controller
// waits for a Node's heartbeat before it marks the Node's Ready condition Unknown. A real
// cluster waits 40 s (50 s since 1.32); the rig's is short so a test sees a dead kubelet
// within seconds, yet four of the simulated kubelets' 2 s heartbeats long, so a slow one
// is no death.
const NodeMonitorGracePeriod = 8 * time.Second

// StartNodeLifecycle starts the application cluster's real kube-controller-manager with
// only the node-lifecycle controller, so a Node whose kubelet stopped posting its heartbeat
// turns Ready Unknown (and gets the unreachable taints) as in a real cluster: the
// controller decides, not the test. Its log is "<name>-kube-controller-manager"; the rig
// stops it.
func (a *AppAPIServer) StartNodeLifecycle() (*Process, error) {
	name := strings.TrimSuffix(a.run.name, "-apiserver") + "-kube-controller-manager"
	return a.rig.Spawn(name, nil, "kube-controller-manager",
		"--kubeconfig="+a.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		// The names of v1.34 (hack/tools/kubernetes); nodelifecycle was the old alias.
		"--controllers=node-lifecycle-controller",
		"--node-monitor-grace-period="+NodeMonitorGracePeriod.String(),
		"--node-monitor-period=1s")
}
