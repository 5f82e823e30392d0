// Package inventory renders the Ansible inventory (hosts.ini) and the extra-vars file that
// the run-kubespray step hands to ansible-playbook.
//
// The inventory comes from a text/template with the sprig functions: a built-in template
// per flavour (embedded), or one the user supplies through a ConfigMap. Every host name,
// IP and role is validated before rendering, so whatever the template does with them
// nothing but an RFC 1123 name or a canonical IP address can reach the file.
package inventory

import (
	"bytes"
	"embed"
	"fmt"
	"net"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"k8s.io/apimachinery/pkg/util/validation"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/hostmatch"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
	"github.com/akraino-edge-stack/bpa/pkg/leases"
)

//go:embed templates/*.ini.tmpl
var builtin embed.FS

// Host is one inventory host as templates see it.
type Host struct {
	Name          string
	IP            string
	MAC           string
	BareMetalHost string
	Roles         []string
	Master        bool
	Worker        bool
	// Etcd: a master that runs an etcd member.
	Etcd bool
}

// Data is what an inventory template is executed with. Every list is sorted by name, so
// the first master (kubespray's first control-plane node) is stable across runs.
type Data struct {
	// Flavor is the flavour asked for ("kubespray" or "kud"), for templates serving both.
	Flavor string
	// Hosts are all the hosts; Masters and Workers those with that role (a host with both
	// roles is in both); Etcd the masters that run etcd (HostStatus.Etcd, chosen by
	// discover-hosts: an odd number, as kubespray requires).
	Hosts   []Host
	Masters []Host
	Workers []Host
	Etcd    []Host
}

// Groups is d as kubespray's rules see it (kubespray.Inventory), whichever the flavour,
// with the group names of g.
func (d Data) Groups(g kubespray.Groups) kubespray.Inventory {
	names := func(hs []Host) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	return g.Of(names(d.Hosts), names(d.Masters), names(d.Etcd), names(d.Workers))
}

// Options choose the template.
type Options struct {
	// Flavor picks the built-in template; empty means kubespray.
	Flavor bpav1.InventoryFlavor
	// Template, if set, replaces the built-in template; TemplateName names where it came
	// from in errors (e.g. "ConfigMap my-inventory key hosts.ini.tmpl").
	Template     string
	TemplateName string
}

// DefaultTemplate returns the built-in template of a flavour.
func DefaultTemplate(flavor bpav1.InventoryFlavor) (string, error) {
	if flavor == "" {
		flavor = bpav1.InventoryFlavorKubespray
	}
	switch flavor {
	case bpav1.InventoryFlavorKubespray, bpav1.InventoryFlavorKUD:
	default:
		return "", fmt.Errorf("unknown inventory flavor %q: want kubespray or kud", flavor)
	}
	b, err := builtin.ReadFile("templates/" + string(flavor) + ".ini.tmpl")
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// funcs are sprig's text functions without env and expandenv: an inventory template from
// a ConfigMap has no business reading the step pod's environment.
func funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	return f
}

// Render validates hosts and renders the inventory. Warnings are things that work but are
// probably not what the user wants, such as an even number of etcd members.
func Render(hosts []bpav1.HostStatus, o Options) (ini []byte, warnings []string, err error) {
	data, err := NewData(hosts, o.Flavor)
	if err != nil {
		return nil, nil, err
	}
	text, name := o.Template, o.TemplateName
	if text == "" {
		if text, err = DefaultTemplate(o.Flavor); err != nil {
			return nil, nil, err
		}
		name = "built-in " + data.Flavor + " template"
	} else if name == "" {
		name = "inventory template"
	}
	t, err := template.New(name).Funcs(funcs()).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	// A template can write anything: check what it wrote, not what it was given.
	if err := CheckInventory(buf.Bytes(), data.Hosts); err != nil {
		return nil, nil, fmt.Errorf("%s: rendered inventory: %w", name, err)
	}
	return buf.Bytes(), Warnings(data), nil
}

// Warnings reports what is legal but unwise in the cluster's shape.
func Warnings(d Data) []string {
	var w []string
	if len(d.Workers) == 0 {
		w = append(w, "no host has the worker role: the cluster can run no workloads")
	}
	return w
}

// NewData validates hosts and arranges them for a template.
func NewData(hosts []bpav1.HostStatus, flavor bpav1.InventoryFlavor) (Data, error) {
	if flavor == "" {
		flavor = bpav1.InventoryFlavorKubespray
	}
	d := Data{Flavor: string(flavor)}
	names, ips := map[string]bool{}, map[string]string{}
	for i, hs := range hosts {
		h, err := validHost(hs)
		if err != nil {
			return Data{}, fmt.Errorf("hosts[%d]: %w", i, err)
		}
		if names[h.Name] {
			return Data{}, fmt.Errorf("hosts[%d]: host %s is listed twice", i, h.Name)
		}
		names[h.Name] = true
		if other, dup := ips[h.IP]; dup {
			return Data{}, fmt.Errorf("hosts %s and %s have the same IP %s", other, h.Name, h.IP)
		}
		ips[h.IP] = h.Name
		d.Hosts = append(d.Hosts, h)
	}
	sort.Slice(d.Hosts, func(i, j int) bool { return d.Hosts[i].Name < d.Hosts[j].Name })
	for _, h := range d.Hosts {
		if h.Master {
			d.Masters = append(d.Masters, h)
		}
		if h.Worker {
			d.Workers = append(d.Workers, h)
		}
	}
	if len(d.Masters) == 0 {
		return Data{}, fmt.Errorf("no host has the master role")
	}
	for _, h := range d.Masters {
		if h.Etcd {
			d.Etcd = append(d.Etcd, h)
		}
	}
	if d.Etcd == nil {
		// Hosts from before HostStatus said who runs etcd: the largest odd number of masters.
		n := len(d.Masters) - (1 - len(d.Masters)%2)
		d.Etcd = d.Masters[:n]
		for i := range d.Etcd {
			d.Etcd[i].Etcd = true
		}
	}
	if len(d.Etcd)%2 == 0 {
		return Data{}, fmt.Errorf("%d hosts run etcd: kubespray refuses an even number of etcd hosts", len(d.Etcd))
	}
	return d, nil
}

func validHost(hs bpav1.HostStatus) (Host, error) {
	h := Host{Name: hs.Name, BareMetalHost: hs.BareMetalHost}
	if errs := validation.IsDNS1123Label(hs.Name); len(errs) > 0 {
		return h, fmt.Errorf("name %q: %s", hs.Name, errs[0])
	}
	ip := net.ParseIP(strings.TrimSpace(hs.IP))
	if ip == nil {
		if hs.IP == "" {
			return h, fmt.Errorf("host %s has no IP address", hs.Name)
		}
		return h, fmt.Errorf("host %s: %q is not an IP address", hs.Name, hs.IP)
	}
	h.IP = ip.String() // canonical: no zone, no leading zeros, no spaces
	if hs.MAC != "" {
		mac, ok := leases.NormalizeMAC(hs.MAC)
		if !ok {
			return h, fmt.Errorf("host %s: %q is not a MAC address", hs.Name, hs.MAC)
		}
		h.MAC = mac
	}
	if hs.BareMetalHost != "" {
		if errs := validation.IsDNS1123Subdomain(hs.BareMetalHost); len(errs) > 0 {
			return h, fmt.Errorf("host %s: bareMetalHost %q: %s", hs.Name, hs.BareMetalHost, errs[0])
		}
	}
	for _, r := range hs.Roles {
		switch {
		case r == hostmatch.RoleMaster && !h.Master:
			h.Master = true
		case r == hostmatch.RoleWorker && !h.Worker:
			h.Worker = true
		default:
			return h, fmt.Errorf("host %s: role %q: want master or worker, each at most once", hs.Name, r)
		}
	}
	if !h.Master && !h.Worker {
		return h, fmt.Errorf("host %s has no role", hs.Name)
	}
	if hs.Etcd && !h.Master {
		return h, fmt.Errorf("host %s: only a master can run etcd", hs.Name)
	}
	h.Etcd = hs.Etcd
	if h.Master {
		h.Roles = append(h.Roles, hostmatch.RoleMaster)
	}
	if h.Worker {
		h.Roles = append(h.Roles, hostmatch.RoleWorker)
	}
	return h, nil
}
