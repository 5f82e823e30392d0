package stepio

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
)

const (
	// InDir is where a step pod's inputs are: the template's input artifacts (raw
	// parameter values written as files) are mounted under it. Outside every volume the
	// templates mount: Argo then mounts each artifact from its own volume, a file the
	// step's user reads. Under one (the pod's /tmp), Argo's init container, as root, would
	// make the folder 0700 inside that volume, and the nonroot step could not read it.
	InDir = "/bpa/in"
	// OutDir is where a step writes its outputs: the template's output parameters read
	// their values (valueFrom.path) from files under it.
	OutDir = "/tmp/bpa/out"
)

// The files steps exchange, by name under InDir or OutDir. A step writes Out(name); the next
// gets it, through an Argo parameter, at In(name).
const (
	// HostsFile is the run's hosts: discover-hosts writes it, resolve-leases adds their
	// addresses, and render-inventory, verify and publish-kubeconfig read it (ReadHosts).
	HostsFile = "hosts.json"
	// InventoryFile and ExtraVarsFile are render-inventory's outputs and run-kubespray's
	// -i and -e @ inputs.
	InventoryFile = "hosts.ini"
	ExtraVarsFile = "extra-vars.yaml"
	// OperationsFile is the kubespray operations of run-kubespray's planned step.
	OperationsFile = "operations.json"
	// ArtifactsCAFile is the site policy's CA for spec.offline's artifact server (PEM).
	ArtifactsCAFile = "artifacts-ca.pem"
	// NodesFile, NamesFile and NodesHashFile are resolve-nodes' outputs: the nodes with
	// their packages, their names (the fan-out), and the node-set hash.
	NodesFile     = "nodes.json"
	NamesFile     = "names.json"
	NodesHashFile = "nodes-hash"
	// ResultFile is one install-software pod's result; ResultsFile is all of them, as Argo
	// aggregates them for verify-software.
	ResultFile  = "result.json"
	ResultsFile = "results.json"
	// BackupFile is backup-etcd's record of the verified snapshot it stored
	// (bpav1.BackupStatus), which the controller adds to status.backups.
	BackupFile = "backup.json"
	// RestoreFile is restore-etcd's record of the restore (what it restored, where the data
	// it replaced was set aside).
	RestoreFile = "restore.json"
	// BackupServerCAFile is the site policy's CA for the etcd backup server (PEM).
	BackupServerCAFile = "backup-server-ca.pem"
	// RenewalFile is renew-certificates' record of the renewal (Renewal): per master, the
	// served certificate's expiry before and after and how long its API server was away.
	RenewalFile = "renewal.json"
	// CertificatesFile is verify's reading of the cluster's certificates (Certificates),
	// which the controller mirrors into status.certificates.
	CertificatesFile = "certificates.json"
	// DriftFile is check-drift's finding (Drift): each field that differs from
	// status.applied, and each Node's Ready condition.
	DriftFile = "drift.json"
)

// ScratchDir is where a step writes what is its own and large (backup-etcd's snapshot and
// scratch etcd): under the pod's /tmp volume, gone with the pod.
const ScratchDir = "/tmp/bpa/scratch"

// Files lists every file name above: the templates may name no other under InDir or OutDir
// (besides lookup's one file per parameter, Out(parameter)).
var Files = []string{HostsFile, InventoryFile, ExtraVarsFile, OperationsFile, ArtifactsCAFile,
	NodesFile, NamesFile, NodesHashFile, ResultFile, ResultsFile, BackupFile, RestoreFile, RenewalFile, BackupServerCAFile, CertificatesFile, DriftFile}

// In is where a step finds its input name.
func In(name string) string { return path.Join(InDir, name) }

// Out is where a step writes its output name (lookup: the parameter of that name).
func Out(name string) string { return path.Join(OutDir, name) }

// WriteOutput writes an output file (an Argo output parameter's value), creating its
// directory.
func WriteOutput(file string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("writing output %s: %w", file, err)
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("writing output %s: %w", file, err)
	}
	return nil
}
