package inventory

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// kudGroups are the groups of the KUD layout (templates/kud.ini.tmpl) beyond kubespray's:
// kubespray's older dashed names, which its boilerplate.yml maps (kubespray.LegacyGroups),
// and KUD's own add-on groups.
var kudGroups = []string{"kube-master", "kube-node", "k8s-cluster", "ovn-central", "ovn-controller", "virtlet"}

// Groups an inventory may hold: Ansible's own, kubespray's (kubespray.InventoryGroups) and
// the KUD layout's. Anything else is a group no play of BPA's targets, or one that changes
// how Ansible connects (kubespray's bastion).
var allowedGroups = func() map[string]bool {
	allowed := map[string]bool{"all": true, "ungrouped": true}
	for _, g := range append(kubespray.InventoryGroups(), kudGroups...) {
		allowed[g] = true
	}
	return allowed
}()

// hostVars are the host variables an inventory may set. ansible_host is where Ansible
// connects, ip the address kubespray binds to and access_ip the one other nodes use: each
// must be the host's own IP. etcd_member_name names the host's etcd member (kubespray's
// etcd docs set it in the inventory). Every other variable is refused: the connection
// variables (ansible_connection=local, ansible_ssh_extra_args=-o ProxyCommand=..., ansible_user,
// ansible_become_*) would run commands or turn checks off, and group vars ([*:vars]) could
// set the same for every host.
var hostVars = map[string]bool{"ansible_host": true, "ip": true, "access_ip": true, "etcd_member_name": true}

// CheckInventory validates a rendered Ansible INI inventory: only the allowed groups, host
// lines of an RFC 1123 host name and the allowed variables, no [*:vars] sections, and no
// template marker anywhere. With hosts (render-inventory has them) every host must be one
// of them and its IP variables its own IP; without (run-kubespray, which receives the file
// through an Argo parameter) any IP address is taken. Errors name the line and what is
// wrong, never the line's content.
func CheckInventory(ini []byte, hosts []Host) error {
	for _, m := range templateMarkers {
		if i := bytes.Index(ini, []byte(m)); i >= 0 {
			return fmt.Errorf("line %d: %q: Jinja delimiters and #jinja2: are refused in the inventory, because Ansible would template them", bytes.Count(ini[:i], []byte("\n"))+1, m)
		}
	}
	known := map[string]string{}
	for _, h := range hosts {
		known[h.Name] = h.IP
	}
	section, children := "", false
	// Lines that name each host, and the hosts given an address: a host without
	// ansible_host would be reached by resolving its name, wherever that leads.
	named, addressed := map[string]int{}, map[string]bool{}
	for i, line := range strings.Split(string(ini), "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			name, ok := strings.CutSuffix(line[1:], "]")
			if !ok {
				return fmt.Errorf("line %d: a section header must be [group] or [group:children]", n)
			}
			name, kind, _ := strings.Cut(name, ":")
			if kind != "" && kind != "children" {
				return fmt.Errorf("line %d: only [group] and [group:children] sections are allowed (no [group:vars]: BPA sets the variables)", n)
			}
			if !allowedGroups[name] {
				return fmt.Errorf("line %d: not a kubespray or KUD group (want one of %s)", n, groupList())
			}
			section, children = name, kind == "children"
			continue
		}
		if section == "" {
			return fmt.Errorf("line %d: a host or group outside any [group] section", n)
		}
		fields := strings.Fields(line)
		if children {
			if len(fields) != 1 || !allowedGroups[fields[0]] {
				return fmt.Errorf("line %d: in [%s:children] each line names one kubespray or KUD group", n, section)
			}
			continue
		}
		name := fields[0]
		if len(validation.IsDNS1123Label(name)) > 0 {
			return fmt.Errorf("line %d: the host name must be an RFC 1123 label", n)
		}
		ip, isKnown := known[name]
		if hosts != nil && !isKnown {
			return fmt.Errorf("line %d: host %s is not one of the cluster's hosts", n, name)
		}
		if _, dup := named[name]; !dup {
			named[name] = n
		}
		seen := map[string]bool{}
		for _, kv := range fields[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || !hostVars[k] {
				return fmt.Errorf("line %d: host %s: only the variables ansible_host, ip, access_ip and etcd_member_name may be set, as name=value", n, name)
			}
			if seen[k] {
				return fmt.Errorf("line %d: host %s: %s is set twice", n, name, k)
			}
			seen[k] = true
			addressed[name] = addressed[name] || k == "ansible_host"
			if k == "etcd_member_name" {
				if len(validation.IsDNS1123Label(v)) > 0 {
					return fmt.Errorf("line %d: host %s: etcd_member_name must be an RFC 1123 label", n, name)
				}
				continue
			}
			addr := net.ParseIP(v)
			if addr == nil || addr.String() != v {
				return fmt.Errorf("line %d: host %s: %s must be an IP address in canonical form", n, name, k)
			}
			if hosts != nil && v != ip {
				return fmt.Errorf("line %d: host %s: %s must be the host's own IP %s", n, name, k, ip)
			}
		}
	}
	for name, n := range named {
		if !addressed[name] {
			return fmt.Errorf("line %d: host %s has no ansible_host", n, name)
		}
	}
	return nil
}

func groupList() string {
	names := make([]string, 0, len(allowedGroups))
	for g := range allowedGroups {
		names = append(names, g)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// hostLines calls f with the fields of each host line of ini (a line of a [group] section,
// not of a [group:children] one) and its index among the lines.
func hostLines(ini []byte, f func(i int, fields []string)) {
	children := false
	for i, line := range strings.Split(string(ini), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			children = strings.HasSuffix(line, ":children]")
		case !children:
			f(i, strings.Fields(line))
		}
	}
}

// Without returns ini without every line that names one of hosts, in any section: the
// inventory of a kubespray run after an earlier run removed those nodes
// (docs/operations/nodes.md: remove the node from the inventory afterwards). The result is
// checked again with CheckInventory.
func Without(ini []byte, hosts []string) ([]byte, error) {
	drop := map[int]bool{}
	hostLines(ini, func(i int, fields []string) { drop[i] = slices.Contains(hosts, fields[0]) })
	var kept []string
	for i, line := range strings.Split(string(ini), "\n") {
		if !drop[i] {
			kept = append(kept, line)
		}
	}
	out := []byte(strings.Join(kept, "\n"))
	if err := CheckInventory(out, nil); err != nil {
		return nil, fmt.Errorf("the inventory without %s: %w", strings.Join(hosts, ", "), err)
	}
	return out, nil
}

// Addresses maps each host of an inventory CheckInventory accepted to its ansible_host,
// where Ansible connects to it.
func Addresses(ini []byte) map[string]string {
	out := map[string]string{}
	hostLines(ini, func(_ int, fields []string) {
		for _, kv := range fields[1:] {
			if v, ok := strings.CutPrefix(kv, "ansible_host="); ok {
				out[fields[0]] = v
			}
		}
	})
	return out
}

// Groups maps each group of an inventory CheckInventory accepted to its hosts, children
// resolved and kubespray's legacy names mapped to today's (as its boilerplate.yml does), and
// "all" to every host in the order they first appear: what a --limit of host and group
// names selects (kubespray.Inventory.Hosts).
func Groups(ini []byte) kubespray.Inventory {
	direct, children := map[string][]string{}, map[string][]string{}
	var all []string
	section, isChildren := "", false
	for _, line := range strings.Split(string(ini), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			var kind string
			section, kind, _ = strings.Cut(strings.TrimSuffix(line[1:], "]"), ":")
			isChildren = kind == "children"
		case isChildren:
			children[section] = append(children[section], strings.Fields(line)[0])
		default:
			h := strings.Fields(line)[0]
			direct[section] = append(direct[section], h)
			if !slices.Contains(all, h) {
				all = append(all, h)
			}
		}
	}
	var resolve func(g string, depth int) []string
	resolve = func(g string, depth int) []string {
		hosts := slices.Clone(direct[g])
		for _, c := range children[g] {
			if depth < 8 {
				hosts = append(hosts, resolve(c, depth+1)...)
			}
		}
		return hosts
	}
	inv := kubespray.Inventory{}
	for _, groups := range []map[string][]string{direct, children} {
		for g := range groups {
			name := g
			if to, legacy := kubespray.LegacyGroups[g]; legacy {
				name = to
			}
			hosts := slices.Concat(inv[name], resolve(g, 0))
			sort.Strings(hosts)
			inv[name] = slices.Compact(hosts)
		}
	}
	inv["all"] = all
	return inv
}
