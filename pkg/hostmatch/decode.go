package hostmatch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	metal3v1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// ReadBareMetalHostsFile reads BareMetalHosts from a YAML or JSON file; see
// DecodeBareMetalHosts.
func ReadBareMetalHostsFile(path string) ([]metal3v1.BareMetalHost, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeBareMetalHosts(path, f)
}

// DecodeBareMetalHosts reads a BareMetalHostList, a `kind: List`, or one or more
// BareMetalHost documents (YAML or JSON), as `kubectl get bmh -o yaml` and hand-written
// inventories give them. Documents and list items of other kinds (BMC Secrets, say) are
// skipped.
//
// Decoding is strict: an unknown or duplicate field is an error naming the file, the host
// and the field path, because a field in the wrong place is silently lost otherwise (the
// ICN e2e host had its whole status indented under spec.userData, and a lenient reader
// would have seen a host with no NICs). name is the file name used in errors. The decoder
// never panics on malformed input.
func DecodeBareMetalHosts(name string, r io.Reader) (hosts []metal3v1.BareMetalHost, err error) {
	defer func() {
		// The YAML libraries are third-party code fed untrusted input; a panic in them must
		// become an error about the file rather than a crashed step.
		if p := recover(); p != nil {
			hosts, err = nil, fmt.Errorf("%s: cannot parse: %v", name, p)
		}
	}()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		data, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if isBlank(data) {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			// The YAML library's messages span lines; an error here ends up as a one-line
			// termination message.
			return nil, fmt.Errorf("%s: document %d: %s", name, doc, strings.Join(strings.Fields(err.Error()), " "))
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		got, err := decodeDocument(name, doc, js)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, got...)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no BareMetalHost found", name)
	}
	return hosts, nil
}

// header is the part of any object that says what it is.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func decodeDocument(file string, doc int, js []byte) ([]metal3v1.BareMetalHost, error) {
	var h header
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, fmt.Errorf("%s: document %d: not an object: %w", file, doc, err)
	}
	where := fmt.Sprintf("%s: document %d", file, doc)
	switch h.Kind {
	case "BareMetalHost":
		b, err := decodeHost(file, where, js, h, false)
		if err != nil {
			return nil, err
		}
		return []metal3v1.BareMetalHost{b}, nil
	case "BareMetalHostList", "List":
		var list struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   json.RawMessage   `json:"metadata"`
			Items      []json.RawMessage `json:"items"`
		}
		if err := strict(js, &list); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", where, h.Kind, err)
		}
		var out []metal3v1.BareMetalHost
		for i, item := range list.Items {
			at := fmt.Sprintf("%s: items[%d]", where, i)
			var ih header
			if err := json.Unmarshal(item, &ih); err != nil {
				return nil, fmt.Errorf("%s: not an object: %w", at, err)
			}
			// Items of a BareMetalHostList may leave out their kind; a List names it.
			if ih.Kind != "BareMetalHost" && (h.Kind == "List" || ih.Kind != "") {
				continue
			}
			b, err := decodeHost(file, at, item, ih, h.Kind == "BareMetalHostList")
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return out, nil
	case "":
		return nil, fmt.Errorf("%s: no kind: want BareMetalHost, BareMetalHostList or List", where)
	}
	return nil, nil // another kind, e.g. the hosts' BMC Secrets
}

// decodeHost decodes one host; errors name it by file and host name when it has one, else
// by where it sits in the file.
func decodeHost(file, where string, js []byte, h header, inList bool) (metal3v1.BareMetalHost, error) {
	var b metal3v1.BareMetalHost
	if h.Metadata.Name != "" {
		where = fmt.Sprintf("%s: BareMetalHost %s", file, h.Metadata.Name)
	}
	group, _, _ := strings.Cut(h.APIVersion, "/")
	if !(inList && h.APIVersion == "") && group != metal3v1.GroupVersion.Group {
		return b, fmt.Errorf("%s: apiVersion %q: want %s", where, h.APIVersion, metal3v1.GroupVersion)
	}
	if err := strict(js, &b); err != nil {
		return b, fmt.Errorf("%s: %w", where, err)
	}
	if b.Name == "" {
		return b, fmt.Errorf("%s: BareMetalHost without metadata.name", where)
	}
	return b, nil
}

// strict decodes like the apiserver's strict field validation: unknown and duplicate
// fields are errors with their full path.
func strict(js []byte, v any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(js, v)
	if err != nil {
		return err
	}
	if len(strictErrs) == 0 {
		return nil
	}
	const most = 12 // enough for every field of a misplaced block
	msgs := make([]string, 0, most)
	hint := ""
	for i, e := range strictErrs {
		if i < most {
			msgs = append(msgs, e.Error())
		}
		if strings.HasSuffix(e.Error(), `.status"`) {
			hint = " (status belongs at the top level of the object, next to spec)"
		}
	}
	msg := strings.Join(msgs, ", ")
	if len(strictErrs) > most {
		msg += fmt.Sprintf(" (and %d more)", len(strictErrs)-most)
	}
	return errors.New(msg + hint)
}

// isBlank reports whether a YAML document holds only blanks, comments and markers.
func isBlank(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' || bytes.Equal(t, []byte("---")) || bytes.Equal(t, []byte("...")) {
			continue
		}
		return false
	}
	return true
}
