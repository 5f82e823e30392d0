package workflowtemplates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
)

// Parts of the template files are generated from Go (hack/gen-workflowtemplates, run by
// `make generate`): a region starts with a line "# BEGIN GENERATED <name>" and ends with
// "# END GENERATED <name>". Everything else is written by hand.

// Region returns the lines between a region's markers.
func Region(file []byte, name string) ([]byte, error) {
	begin, end, err := regionBounds(file, name)
	if err != nil {
		return nil, err
	}
	return file[begin:end], nil
}

// Splice replaces the lines between a region's markers by text.
func Splice(file []byte, name string, text []byte) ([]byte, error) {
	begin, end, err := regionBounds(file, name)
	if err != nil {
		return nil, err
	}
	return bytes.Join([][]byte{file[:begin], text, file[end:]}, nil), nil
}

// regionBounds finds the region's lines: from after the BEGIN line to the start of the END
// line.
func regionBounds(file []byte, name string) (int, int, error) {
	begin := regexp.MustCompile(`(?m)^[ \t]*# BEGIN GENERATED ` + regexp.QuoteMeta(name) + `\b.*\n`).FindIndex(file)
	end := regexp.MustCompile(`(?m)^[ \t]*# END GENERATED ` + regexp.QuoteMeta(name) + `\b.*$`).FindIndex(file)
	if begin == nil || end == nil || end[0] < begin[1] {
		return 0, 0, fmt.Errorf("no region %q (# BEGIN GENERATED %s ... # END GENERATED %s)", name, name, name)
	}
	return begin[1], end[0], nil
}

// simpleName is a parameter or task name written without quotes.
var simpleName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// yamlWriter writes the YAML of the generated regions: block style for templates and tasks,
// one flow-style line per parameter, every value quoted as JSON (valid YAML) so that no
// character of it means anything to YAML.
type yamlWriter struct {
	buf    bytes.Buffer
	indent string
	err    error
}

func (w *yamlWriter) line(depth int, format string, args ...any) {
	fmt.Fprintf(&w.buf, "%s%s%s\n", w.indent, strings.Repeat("  ", depth), fmt.Sprintf(format, args...))
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // && stays &&
	_ = enc.Encode(s)        // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

func (w *yamlWriter) name(s string) string {
	if !simpleName.MatchString(s) {
		w.err = fmt.Errorf("name %q: want lower-case letters, digits and -", s)
	}
	return s
}

// RenderDAGTemplates writes DAG templates as items of a `templates:` list whose dashes are
// indented by indent spaces. A template may have a name, a mutex, named inputs and a DAG of
// tasks with a name, a local template, depends, when, parameters and raw artifacts;
// anything else is an error.
func RenderDAGTemplates(ts []wfv1.Template, indent int) ([]byte, error) {
	w := &yamlWriter{indent: strings.Repeat(" ", indent)}
	for _, t := range ts {
		if err := renderable(t); err != nil {
			return nil, fmt.Errorf("template %s: %w", t.Name, err)
		}
		w.line(0, "- name: %s", w.name(t.Name))
		if t.Synchronization != nil {
			w.line(1, "synchronization:")
			w.line(2, "mutexes:")
			for _, m := range t.Synchronization.Mutexes {
				w.line(3, "- name: %s", quote(m.Name))
			}
		}
		if len(t.Inputs.Parameters) > 0 {
			w.line(1, "inputs:")
			w.line(2, "parameters:")
			for _, p := range t.Inputs.Parameters {
				w.line(3, "- name: %s", w.name(p.Name))
			}
		}
		w.line(1, "dag:")
		w.line(2, "tasks:")
		for _, task := range t.DAG.Tasks {
			w.task(task)
		}
	}
	return w.buf.Bytes(), w.err
}

func (w *yamlWriter) task(t wfv1.DAGTask) {
	w.line(3, "- name: %s", w.name(t.Name))
	w.line(4, "template: %s", w.name(t.Template))
	if t.Depends != "" {
		w.line(4, "depends: %s", quote(t.Depends))
	}
	if t.When != "" {
		w.line(4, "when: %s", quote(t.When))
	}
	if len(t.Arguments.Parameters) == 0 && len(t.Arguments.Artifacts) == 0 {
		return
	}
	w.line(4, "arguments:")
	if len(t.Arguments.Parameters) > 0 {
		w.line(5, "parameters:")
	}
	for _, p := range t.Arguments.Parameters {
		w.line(6, "- {name: %s, value: %s}", w.name(p.Name), quote(p.Value.String()))
	}
	if len(t.Arguments.Artifacts) > 0 {
		w.line(5, "artifacts:")
	}
	for _, a := range t.Arguments.Artifacts {
		w.line(6, "- {name: %s, raw: {data: %s}}", w.name(a.Name), quote(a.Raw.Data))
	}
}

// renderable refuses what RenderDAGTemplates does not write.
func renderable(t wfv1.Template) error {
	if t.DAG == nil {
		return fmt.Errorf("not a DAG")
	}
	bare := t.DeepCopy()
	bare.Name, bare.DAG = "", nil
	if s := bare.Synchronization; s != nil && s.Semaphore == nil && s.Mutex == nil && len(s.Semaphores) == 0 &&
		!slices.ContainsFunc(s.Mutexes, func(m *wfv1.Mutex) bool { return !sameJSON(wfv1.Mutex{Name: m.Name}, *m) }) {
		bare.Synchronization = nil
	}
	if !slices.ContainsFunc(bare.Inputs.Parameters, func(p wfv1.Parameter) bool { return !sameJSON(wfv1.Parameter{Name: p.Name}, p) }) {
		bare.Inputs.Parameters = nil
	}
	if !sameJSON(wfv1.Template{}, *bare) {
		return fmt.Errorf("only a name, mutexes, input names and a DAG are written")
	}
	for _, task := range t.DAG.Tasks {
		bareTask := task
		bareTask.Name, bareTask.Template, bareTask.Depends, bareTask.When, bareTask.Arguments = "", "", "", "", wfv1.Arguments{}
		if !sameJSON(wfv1.DAGTask{}, bareTask) {
			return fmt.Errorf("task %s: only a name, a template, depends, when, parameters and artifacts are written", task.Name)
		}
		for _, p := range task.Arguments.Parameters {
			if !sameJSON(wfv1.Parameter{Name: p.Name, Value: p.Value}, p) || p.Value == nil {
				return fmt.Errorf("task %s: parameter %s: only a value is written", task.Name, p.Name)
			}
		}
		for _, a := range task.Arguments.Artifacts {
			if a.Raw == nil || !sameJSON(wfv1.Artifact{Name: a.Name, ArtifactLocation: wfv1.ArtifactLocation{Raw: a.Raw}}, a) {
				return fmt.Errorf("task %s: artifact %s: only raw data is written", task.Name, a.Name)
			}
		}
	}
	return nil
}

// sameJSON says whether want and got are the same, as JSON.
func sameJSON[T any](want, got T) bool {
	a, errA := json.Marshal(want)
	b, errB := json.Marshal(got)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// RenderOutputs writes the output parameters of a step that writes one file per parameter
// into dir, as items of an `outputs.parameters:` list whose dashes are indented by indent
// spaces.
func RenderOutputs(names []string, dir string, indent int) ([]byte, error) {
	w := &yamlWriter{indent: strings.Repeat(" ", indent)}
	for _, n := range names {
		w.line(0, "- {name: %s, valueFrom: {path: %s}}", w.name(n), quote(dir+"/"+n))
	}
	return w.buf.Bytes(), w.err
}
