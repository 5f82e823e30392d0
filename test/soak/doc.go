// Package soak is the chaos soak (docs/soak.md): a seeded random mix of day-1 and day-2
// operations and Software changes on several clusters in two sites of one real node, while
// the BPA controllers, Argo's workflow-controller, the kube-apiserver, etcd, the node's
// kubelet and containerd are killed (kill -9) and restarted, and simulated hosts frozen or
// cut off, at seeded moments; then the invariants of test/framework/chaos are checked.
//
// `go test ./test/soak` runs the short version (10 faults, every kind at least once);
// `make soak` the long one (BPA_SOAK_FAULTS, default 100; BPA_SOAK_SEED, default random).
package soak
