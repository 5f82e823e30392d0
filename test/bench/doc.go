// Package bench holds the controller benchmarks of `make bench` (issue 4, section 6): BPA's
// controller against a real kube-apiserver and etcd (test/framework/rig), without Argo's
// workflow-controller, so that only BPA's own work is measured. BenchmarkNodePodStart runs
// on a real node instead (test/framework/node), and waits for the machine's node lock.
//
//	go test -run '^$' -bench . -benchtime 1x ./test/bench/
//
// Each benchmark starts its own rig and reports its figures with b.ReportMetric; ns/op is
// suppressed because an iteration is dominated by setup that is not measured.
package bench
