package software

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Roles, as HostStatus and Node carry them.
const (
	RoleMaster = "master"
	RoleWorker = "worker"
)

// The <cluster>-configmap contract, from ICN: one key per node and role, whose value is the
// node's IP. publish-kubeconfig writes it; resolve-nodes and the controller read it. A node
// with both roles has both keys.
const (
	MasterKeyPrefix = "MASTER_"
	WorkerKeyPrefix = "WORKER_"
)

// Node is one host of resolve-nodes' output and install-software's --host: Argo fans out
// over a JSON list of these, handing each step one object.
type Node struct {
	Name  string   `json:"name"`
	IP    string   `json:"ip"`
	Roles []string `json:"roles"`
	// Packages are the host's wanted items: masterSoftware for a master, workerSoftware for
	// a worker, both for a node with both roles; sorted by name. Items keep the CR's form
	// (`"curl"` or `{"jq": {"version": "1.6-2"}}`).
	Packages []bpav1.SoftwareItem `json:"packages"`
	// Latest are the versions the node's `version: latest` items resolve to for this run
	// (the newest in the artifact server's index when it started), by package name.
	Latest map[string]string `json:"latest,omitempty"`
}

// AddressData builds the ConfigMap's MASTER_/WORKER_ keys from the hosts. Every host needs a
// name, a valid IP and at least one role.
func AddressData(hosts []bpav1.HostStatus) (map[string]string, error) {
	data := map[string]string{}
	for _, h := range hosts {
		if h.Name == "" {
			return nil, fmt.Errorf("a host has no name")
		}
		if net.ParseIP(h.IP) == nil {
			return nil, fmt.Errorf("host %s has no valid IP address (%q)", h.Name, h.IP)
		}
		if len(h.Roles) == 0 {
			return nil, fmt.Errorf("host %s has no role", h.Name)
		}
		for _, r := range h.Roles {
			prefix, err := keyPrefix(r)
			if err != nil {
				return nil, fmt.Errorf("host %s: %w", h.Name, err)
			}
			if old, dup := data[prefix+h.Name]; dup && old != h.IP {
				return nil, fmt.Errorf("host %s is listed twice, with IPs %s and %s", h.Name, old, h.IP)
			}
			data[prefix+h.Name] = h.IP
		}
	}
	return data, nil
}

func keyPrefix(role string) (string, error) {
	switch role {
	case RoleMaster:
		return MasterKeyPrefix, nil
	case RoleWorker:
		return WorkerKeyPrefix, nil
	}
	return "", fmt.Errorf("unknown role %q (want %s or %s)", role, RoleMaster, RoleWorker)
}

// IsAddressKey reports whether a ConfigMap key belongs to the node contract.
func IsAddressKey(k string) bool {
	return strings.HasPrefix(k, MasterKeyPrefix) || strings.HasPrefix(k, WorkerKeyPrefix)
}

// HostsFromAddressData reads the ConfigMap's MASTER_/WORKER_ keys back into hosts, sorted by
// name, a node's two keys merged into one host with both roles. Other keys are ignored.
func HostsFromAddressData(data map[string]string) ([]bpav1.HostStatus, error) {
	byName := map[string]*bpav1.HostStatus{}
	for _, k := range sortedKeys(data) {
		var name, role string
		switch {
		case strings.HasPrefix(k, MasterKeyPrefix):
			name, role = strings.TrimPrefix(k, MasterKeyPrefix), RoleMaster
		case strings.HasPrefix(k, WorkerKeyPrefix):
			name, role = strings.TrimPrefix(k, WorkerKeyPrefix), RoleWorker
		default:
			continue
		}
		ip := strings.TrimSpace(data[k])
		if name == "" {
			return nil, fmt.Errorf("key %s names no node", k)
		}
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("key %s: %q is not an IP address", k, data[k])
		}
		h, ok := byName[name]
		if !ok {
			h = &bpav1.HostStatus{Name: name, IP: ip}
			byName[name] = h
		} else if h.IP != ip {
			return nil, fmt.Errorf("node %s has two IPs: %s and %s", name, h.IP, ip)
		}
		h.Roles = append(h.Roles, role)
	}
	out := make([]bpav1.HostStatus, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		h := byName[name]
		sort.Strings(h.Roles) // "master" < "worker"
		out = append(out, *h)
	}
	return out, nil
}

// Nodes gives each host its wanted items: masterSoftware for a master, workerSoftware for a
// worker, both merged for a node with both roles. The result is sorted by host name and
// each host's items by package name, so the same inputs always give the same output.
func Nodes(spec bpav1.SoftwareSpec, hosts []bpav1.HostStatus) ([]Node, error) {
	out := make([]Node, 0, len(hosts))
	for _, h := range hosts {
		var lists [][]bpav1.SoftwareItem
		roles := append([]string(nil), h.Roles...)
		sort.Strings(roles)
		for _, r := range roles {
			switch r {
			case RoleMaster:
				lists = append(lists, spec.MasterSoftware)
			case RoleWorker:
				lists = append(lists, spec.WorkerSoftware)
			default:
				return nil, fmt.Errorf("host %s: unknown role %q", h.Name, r)
			}
		}
		items, err := Normalize(lists...)
		if err != nil {
			return nil, fmt.Errorf("host %s (%s): %w", h.Name, strings.Join(roles, "+"), err)
		}
		out = append(out, Node{Name: h.Name, IP: h.IP, Roles: roles, Packages: items})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// NodesHash identifies a node set: the first 12 hex digits of the SHA-256 of the sorted
// `KEY=IP` lines of the MASTER_/WORKER_ keys. The controller computes the same from
// <cluster>-configmap, so the value resolve-nodes reports is comparable with it.
func NodesHash(data map[string]string) string {
	h := sha256.New()
	for _, k := range sortedKeys(data) {
		if IsAddressKey(k) {
			fmt.Fprintf(h, "%s=%s\n", k, data[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// HostLine is one host's result for the step's log: "worker-1 (10.0.0.3): Succeeded,
// changed; curl 7.88.1-10, jq 1.6-2.1".
func HostLine(r bpav1.HostSoftwareStatus) string {
	line := r.Name
	if r.IP != "" {
		line += " (" + r.IP + ")"
	}
	line += ": " + r.Phase
	if r.Changed {
		line += ", changed"
	}
	var pkgs []string
	for _, p := range r.Packages {
		installed := p.Installed
		if installed == "" {
			installed = "not installed"
		}
		pkgs = append(pkgs, p.Name+" "+installed)
	}
	if len(pkgs) > 0 {
		line += "; " + strings.Join(pkgs, ", ")
	}
	if r.Message != "" {
		line += "; " + r.Message
	}
	return line
}
