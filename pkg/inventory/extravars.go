package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// Variables BPA sets itself from the spec.
const (
	PodSubnetVar   = "kube_pods_subnet"
	KUDPluginsVar  = "kud_plugins"
	KubeVersionVar = "kube_version"
)

var (
	varName    = regexp.MustCompile(bpav1.ExtraVarNamePattern)
	mapKey     = regexp.MustCompile(bpav1.ExtraVarKeyPattern)
	pluginName = regexp.MustCompile(bpav1.DebianPackageNamePattern)
	// Number literals as JSON writes them; the vars file carries nothing else.
	intLiteral   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	floatLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
)

// templateMarkers are what makes Ansible template a string: Jinja's default delimiters, and
// the header that (ansible-core 2.16 and later) changes the delimiters for that string. The
// vars file tags every string !unsafe, so Ansible never templates them at all; refusing the
// markers too means a CR that relies on templating fails at admission, not in kubespray.
var templateMarkers = []string{"{{", "{%", "{#", "#jinja2:"}

// allowedAnsibleVars are the ansible_* variables a CR may set. The others configure how
// Ansible connects (user, port, key, SSH arguments, host-key checking, become): BPA sets
// those from the CR's ssh settings, and letting extraVars override them would, for one,
// let a CR turn host-key checking off behind insecureIgnoreHostKey's back.
var allowedAnsibleVars = map[string]bool{"ansible_python_interpreter": true}

// CheckExtraVarName checks a top-level key of extraVars (p names it).
func CheckExtraVarName(p *field.Path, k string) *field.Error {
	if len(k) > bpav1.MaxExtraVarNameLength || !varName.MatchString(k) {
		return field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("keys must be Ansible variable names ([A-Za-z_][A-Za-z0-9_]*, at most %d characters)", bpav1.MaxExtraVarNameLength))
	}
	if strings.HasPrefix(strings.ToLower(k), "ansible_") && !allowedAnsibleVars[k] {
		return field.Forbidden(p.Child(k), "BPA sets Ansible's connection variables itself from spec.ssh; of the ansible_* variables only ansible_python_interpreter may be set")
	}
	if task, ok := kubespray.ControllerVars[k]; ok {
		return field.Forbidden(p.Child(k), "it makes kubespray act on the Ansible controller, the run-kubespray container that holds the cluster's SSH key: "+task)
	}
	return nil
}

// CheckExtraVar checks one top-level variable of extraVars (p names extraVars): its name, its
// value, and what it makes Ansible run.
func CheckExtraVar(p *field.Path, k string, v any) *field.Error {
	if err := CheckExtraVarName(p, k); err != nil {
		return err
	}
	return checkExtraVar(p, k, v)
}

// checkExtraVar checks a variable whose name passed CheckExtraVarName.
func checkExtraVar(p *field.Path, k string, v any) *field.Error {
	if err := CheckExtraVarValue(p.Child(k), v); err != nil {
		return err
	}
	if s, ok := v.(string); k == "ansible_python_interpreter" && (!ok || !kubespray.PythonInterpreter.MatchString(s)) {
		return field.Invalid(p.Child(k), field.OmitValueType{}, "want a plain path of a Python 3 interpreter (/usr/bin/python3, /usr/bin/python3.11, "+
			"/usr/local/bin/python3, /usr/libexec/platform-python) or auto, auto_silent, auto_legacy, auto_legacy_silent: Ansible runs this value as a command line, "+
			"on the hosts and on the run-kubespray container alike")
	}
	return nil
}

// CheckExtraVarValue checks one value in its decoded-JSON form (string, bool, a number as
// json.Number, int64 or float64, []any, map[string]any) against the rules of
// config/admission/extravars.yaml, and returns the first problem. p names the value.
func CheckExtraVarValue(p *field.Path, v any) *field.Error {
	return checkValue(p, v, 0)
}

func checkValue(p *field.Path, v any, depth int) *field.Error {
	switch v := v.(type) {
	case string:
		if utf8.RuneCountInString(v) > bpav1.MaxExtraVarStringLength {
			return field.TooLong(p, field.OmitValueType{}, bpav1.MaxExtraVarStringLength)
		}
		for _, m := range templateMarkers {
			if strings.Contains(v, m) {
				return field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("must not contain %q: Jinja delimiters ({{, {%%, {#) and #jinja2: are refused in every string, because Ansible would run them as a template", m))
			}
		}
		return nil
	case bool, json.Number, int, int64, float64:
		return nil
	case []any, map[string]any:
		if depth == bpav1.MaxExtraVarDepth {
			return field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("lists and maps may nest at most %d deep", bpav1.MaxExtraVarDepth))
		}
	default:
		return field.Invalid(p, field.OmitValueType{}, "must be a string, number, boolean, list or map")
	}
	if l, ok := v.([]any); ok {
		if len(l) > bpav1.MaxExtraVarItems {
			return field.TooMany(p, len(l), bpav1.MaxExtraVarItems)
		}
		for i, e := range l {
			if err := checkValue(p.Index(i), e, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	m := v.(map[string]any)
	if len(m) > bpav1.MaxExtraVarItems {
		return field.TooMany(p, len(m), bpav1.MaxExtraVarItems)
	}
	for _, k := range sortedKeys(m) {
		if len(k) > bpav1.MaxExtraVarKeyLength || !mapKey.MatchString(k) {
			return field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("map keys must be letters, digits and _ . : / - (starting with a letter, digit or _, at most %d characters)", bpav1.MaxExtraVarKeyLength))
		}
		if err := checkValue(p.Key(k), m[k], depth+1); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkVars checks a whole vars map, as the admission policy checks extraVars (plus BPA's
// own variables), naming the offending variable.
func checkVars(vars map[string]any) error {
	root := field.NewPath("extra vars")
	for _, k := range sortedKeys(vars) {
		if err := CheckExtraVarName(root, k); err != nil {
			return err
		}
		if t, ok := vars[k].(Template); ok {
			if !kubespray.IsOfflineDownloadURL(k, string(t)) {
				return field.Forbidden(root.Child(k), "a template BPA did not write: only BPA's own offline *_download_url templates are templated")
			}
			continue
		}
		if err := checkExtraVar(root, k, vars[k]); err != nil {
			return err
		}
	}
	if ps, ok := vars[KUDPluginsVar]; ok {
		l, _ := ps.([]any)
		if len(l) == 0 {
			return fmt.Errorf("extra vars: %s: want a list of KUD plugin names", KUDPluginsVar)
		}
		for _, p := range l {
			s, _ := p.(string)
			if len(s) > bpav1.MaxPackageFieldLength || !pluginName.MatchString(s) {
				return fmt.Errorf("extra vars: %s: %q is not a KUD plugin name", KUDPluginsVar, truncate(fmt.Sprint(p)))
			}
		}
	}
	return nil
}

// truncate keeps error messages short whatever a value holds.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ExtraVars renders the vars file for `ansible-playbook -e @file`: the CR's
// kubespray.extraVars, kube_pods_subnet from PodSubnet, kube_version from kubernetes.version
// and kud_plugins from KUDPlugins.
// A variable both set by BPA and listed in extraVars is an error rather than a silent
// choice. See MarshalVars for the format.
func ExtraVars(spec *bpav1.ProvisioningSpec) ([]byte, error) { return ExtraVarsWithCA(spec, "") }

// ExtraVarsWithCA is ExtraVars for nodes that trust spec.offline's server through the CA
// file at caPath ("" for none), which containerd's mirrors then name (OfflineVars).
func ExtraVarsWithCA(spec *bpav1.ProvisioningSpec, caPath string) ([]byte, error) {
	vars := map[string]any{}
	if spec.Kubespray != nil {
		for k, raw := range spec.Kubespray.ExtraVars {
			dec := json.NewDecoder(bytes.NewReader(raw.Raw))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("kubespray.extraVars.%s: %w", truncate(k), err)
			}
			vars[k] = v
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
	if spec.Kubernetes != nil && spec.Kubernetes.Version != "" {
		release := ""
		if spec.Kubespray != nil {
			release = spec.Kubespray.Version
		}
		// In the chosen release's format: v2.28 refuses a leading v, v2.27 needs it.
		v, err := kubespray.KubeVersionVar(release, spec.Kubernetes.Version)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.version: %w", err)
		}
		if _, dup := vars[KubeVersionVar]; dup {
			return nil, fmt.Errorf("kubespray.extraVars.%s: kubernetes.version already sets it; set only one", KubeVersionVar)
		}
		vars[KubeVersionVar] = v
	}
	if len(spec.KUDPlugins) > 0 {
		if _, dup := vars[KUDPluginsVar]; dup {
			return nil, fmt.Errorf("kubespray.extraVars.%s: KUDPlugins already sets it; set only one", KUDPluginsVar)
		}
		plugins := make([]any, len(spec.KUDPlugins))
		for i, p := range spec.KUDPlugins {
			plugins[i] = string(p)
		}
		vars[KUDPluginsVar] = plugins
	}
	if err := addOffline(spec, caPath, vars); err != nil {
		return nil, err
	}
	if err := checkVars(vars); err != nil {
		return nil, err
	}
	return MarshalVars(vars)
}

// Tags of the vars file's scalars. Every scalar carries its tag explicitly, so Ansible's
// YAML 1.1 loader and yaml.v3 cannot resolve a value to different types ("yes", "1e3").
const (
	unsafeTag = "!unsafe"
	boolTag   = "!!bool"
	intTag    = "!!int"
	floatTag  = "!!float"
	strTag    = "!!str"
	// templateTag marks a Template, which Ansible templates.
	templateTag = "!!str"
)

// MarshalVars writes vars (decoded-JSON form) as a YAML mapping in which every string, at
// any depth, is tagged !unsafe: Ansible then never templates it, whatever it holds. Only a
// Template (BPA's own offline *_download_url) is tagged !!str.
// Booleans and numbers keep their types (kubespray asserts that known booleans are real
// booleans); keys are double-quoted, so "true" or "1" stays a string key. It checks nothing:
// ExtraVars checks first, and CheckExtraVars checks what it reads back.
func MarshalVars(vars map[string]any) ([]byte, error) {
	n, err := varsNode(vars)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("# Written by BPA render-inventory. Every string is !unsafe: Ansible never templates it.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{n}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func varsNode(v any) (*yaml.Node, error) {
	scalar := func(tag, value string, style yaml.Style) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value, Style: style}
	}
	switch v := v.(type) {
	case string:
		return scalar(unsafeTag, v, yaml.TaggedStyle|yaml.DoubleQuotedStyle), nil
	case Template:
		return scalar(templateTag, string(v), yaml.TaggedStyle|yaml.DoubleQuotedStyle), nil
	case bool:
		return scalar(boolTag, fmt.Sprint(v), yaml.TaggedStyle), nil
	case json.Number:
		if intLiteral.MatchString(string(v)) {
			return scalar(intTag, string(v), yaml.TaggedStyle), nil
		}
		return scalar(floatTag, string(v), yaml.TaggedStyle), nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range v {
			c, err := varsNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		return n, nil
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range sortedKeys(v) {
			c, err := varsNode(v[k])
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, scalar(strTag, k, yaml.DoubleQuotedStyle), c)
		}
		return n, nil
	default:
		return nil, fmt.Errorf("extra vars: a %T cannot be written", v)
	}
}

// CheckExtraVars validates a vars file as run-kubespray receives it (it travels through an
// Argo parameter): exactly the YAML MarshalVars writes (one mapping; every string tagged
// !unsafe, every other scalar explicitly tagged bool, int or float, a top-level variable
// tagged !!str only for one of BPA's own templates; no anchors, aliases or other tags) whose variables pass the same checks as extraVars at admission.
func CheckExtraVars(data []byte) error {
	vars, err := ReadVars(data)
	if err != nil {
		return err
	}
	return checkVars(vars)
}

// ReadVars parses a vars file (the YAML MarshalVars writes, and nothing else) into its
// decoded-JSON form.
func ReadVars(data []byte) (map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("extra vars: not YAML: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, fmt.Errorf("extra vars: want one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("extra vars: want a YAML mapping of variables")
	}
	v, err := nodeValue(doc.Content[0], 0)
	if err != nil {
		return nil, fmt.Errorf("extra vars: %w", err)
	}
	return v.(map[string]any), nil
}

// nodeValue turns a node of the vars file into its decoded-JSON form, refusing anything
// MarshalVars does not write. depth bounds the recursion before checkVars sees the value.
func nodeValue(n *yaml.Node, depth int) (any, error) {
	where := fmt.Sprintf("line %d", n.Line)
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return nil, fmt.Errorf("%s: anchors and aliases are not allowed", where)
	}
	if depth > bpav1.MaxExtraVarDepth+1 && n.Kind != yaml.ScalarNode {
		return nil, fmt.Errorf("%s: lists and maps nest too deep", where)
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Style&yaml.TaggedStyle == 0 {
			return nil, fmt.Errorf("%s: a value without an explicit tag (strings must be tagged !unsafe)", where)
		}
		switch {
		case n.Tag == unsafeTag:
			return n.Value, nil
		case n.Tag == templateTag && depth == 1:
			// checkVars accepts only BPA's own templates, by variable name.
			return Template(n.Value), nil
		case n.Tag == boolTag && (n.Value == "true" || n.Value == "false"):
			return n.Value == "true", nil
		case n.Tag == intTag && intLiteral.MatchString(n.Value), n.Tag == floatTag && floatLiteral.MatchString(n.Value):
			return json.Number(n.Value), nil
		}
		return nil, fmt.Errorf("%s: want a !unsafe string, or a !!bool, !!int or !!float in JSON syntax", where)
	case yaml.SequenceNode:
		if n.Tag != "!!seq" || n.Style&yaml.TaggedStyle != 0 {
			return nil, fmt.Errorf("%s: a tagged list", where)
		}
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := nodeValue(c, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.MappingNode:
		if n.Tag != "!!map" || n.Style&yaml.TaggedStyle != 0 {
			return nil, fmt.Errorf("%s: a tagged map", where)
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag != strTag || k.Style != yaml.DoubleQuotedStyle {
				return nil, fmt.Errorf("line %d: want a double-quoted key", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: a key is repeated", k.Line)
			}
			v, err := nodeValue(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s: unexpected YAML", where)
}

// DecodedExtraVars are the variables of the vars file spec renders (ExtraVars), decoded as
// Ansible reads them (ReadVars), for the checks that judge them as kubespray would.
func DecodedExtraVars(spec *bpav1.ProvisioningSpec) (map[string]any, error) {
	data, err := ExtraVars(spec)
	if err != nil {
		return nil, err
	}
	return ReadVars(data)
}
