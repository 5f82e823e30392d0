package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

// Variables BPA sets itself from the spec.
const (
	PodSubnetVar  = "kube_pods_subnet"
	KUDPluginsVar = "kud_plugins"
)

var (
	varName    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	pluginName = regexp.MustCompile(bpav1.DebianPackageNamePattern)
)

// allowedAnsibleVars are the ansible_* variables a CR may set. The others configure how
// Ansible connects (user, port, key, SSH arguments, host-key checking, become): BPA sets
// those from the CR's ssh settings, and letting extraVars override them would, for one,
// let a CR turn host-key checking off behind insecureIgnoreHostKey's back.
var allowedAnsibleVars = map[string]bool{"ansible_python_interpreter": true}

// ExtraVars renders the JSON vars file for `ansible-playbook -e @file`: the CR's
// kubespray.extraVars, kube_pods_subnet from PodSubnet and kud_plugins from KUDPlugins.
// A variable both set by BPA and listed in extraVars is an error rather than a silent
// choice. The keys come out sorted, so the same spec gives the same bytes.
func ExtraVars(spec *bpav1.ProvisioningSpec) ([]byte, error) {
	vars := map[string]any{}
	if spec.Kubespray != nil {
		for k, v := range spec.Kubespray.ExtraVars {
			vars[k] = string(v)
		}
	}
	if spec.PodSubnet != "" {
		ip, n, err := net.ParseCIDR(spec.PodSubnet)
		if err != nil || !ip.Equal(n.IP) {
			return nil, fmt.Errorf("PodSubnet %q: want a CIDR network address such as 10.244.64.0/18", spec.PodSubnet)
		}
		if _, dup := vars[PodSubnetVar]; dup {
			return nil, fmt.Errorf("kubespray.extraVars.%s: PodSubnet already sets it; set only one", PodSubnetVar)
		}
		vars[PodSubnetVar] = n.String()
	}
	if len(spec.KUDPlugins) > 0 {
		if _, dup := vars[KUDPluginsVar]; dup {
			return nil, fmt.Errorf("kubespray.extraVars.%s: KUDPlugins already sets it; set only one", KUDPluginsVar)
		}
		plugins := make([]string, len(spec.KUDPlugins))
		for i, p := range spec.KUDPlugins {
			plugins[i] = string(p)
		}
		vars[KUDPluginsVar] = plugins
	}
	if err := checkVars(vars); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(vars); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CheckExtraVars validates a vars file as run-kubespray receives it (it travels through an
// Argo parameter): a JSON object whose keys are Ansible variable names other than the
// connection settings, and whose values are strings or lists of strings without Jinja
// delimiters, which Ansible would evaluate.
func CheckExtraVars(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var vars map[string]any
	if err := dec.Decode(&vars); err != nil {
		return fmt.Errorf("extra vars: not a JSON object: %w", err)
	}
	if vars == nil {
		return fmt.Errorf("extra vars: not a JSON object")
	}
	if dec.More() {
		return fmt.Errorf("extra vars: trailing data after the JSON object")
	}
	return checkVars(vars)
}

func checkVars(vars map[string]any) error {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) > 128 || !varName.MatchString(k) {
			return fmt.Errorf("extra vars: %q is not an Ansible variable name ([A-Za-z_][A-Za-z0-9_]*)", k)
		}
		if strings.HasPrefix(strings.ToLower(k), "ansible_") && !allowedAnsibleVars[k] {
			return fmt.Errorf("extra vars: %s: BPA sets Ansible's connection variables itself from spec.ssh; of the ansible_* variables only ansible_python_interpreter may be set", k)
		}
		switch v := vars[k].(type) {
		case string:
			if err := checkValue(k, v); err != nil {
				return err
			}
		case []string:
			for _, s := range v {
				if err := checkValue(k, s); err != nil {
					return err
				}
			}
			if k == KUDPluginsVar {
				if err := checkPlugins(v); err != nil {
					return err
				}
			}
		case []any:
			strs := make([]string, len(v))
			for i, e := range v {
				s, ok := e.(string)
				if !ok {
					return fmt.Errorf("extra vars: %s[%d]: want a string", k, i)
				}
				if err := checkValue(k, s); err != nil {
					return err
				}
				strs[i] = s
			}
			if k == KUDPluginsVar {
				if err := checkPlugins(strs); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("extra vars: %s: want a string or a list of strings", k)
		}
	}
	return nil
}

func checkValue(k, v string) error {
	if len(v) > 4096 {
		return fmt.Errorf("extra vars: %s: value longer than 4096 characters", k)
	}
	for _, d := range []string{"{{", "{%", "{#"} {
		if strings.Contains(v, d) {
			return fmt.Errorf("extra vars: %s: the value contains %q; Jinja delimiters are refused because Ansible would evaluate them", k, d)
		}
	}
	return nil
}

func checkPlugins(ps []string) error {
	for _, p := range ps {
		if len(p) > bpav1.MaxPackageFieldLength || !pluginName.MatchString(p) {
			return fmt.Errorf("extra vars: %s: %q is not a KUD plugin name", KUDPluginsVar, p)
		}
	}
	return nil
}
