package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/akraino-edge-stack/bpa/pkg/describe"
)

// The formats of -o, the one output flag of every verb that prints objects: text for people
// (the verb's table or tree), yaml and json for programs (the same document in either).
const (
	formatText = "text"
	formatYAML = "yaml"
	formatJSON = "json"
)

// outputFormat is the value of -o. Set refuses a format the verb does not print, so a
// wrong -o fails before the verb does any work.
type outputFormat struct {
	value   string
	allowed []string
}

// addOutputFlag registers -o/--output on cmd; the first format is the default.
func addOutputFlag(cmd *cobra.Command, formats ...string) *outputFormat {
	o := &outputFormat{value: formats[0], allowed: formats}
	cmd.Flags().VarP(o, "output", "o", "output format: "+strings.Join(formats, ", "))
	return o
}

func (o *outputFormat) String() string { return o.value }
func (o *outputFormat) Type() string   { return "format" }
func (o *outputFormat) Set(s string) error {
	if !slices.Contains(o.allowed, s) {
		return fmt.Errorf("want %s", strings.Join(o.allowed, ", "))
	}
	o.value = s
	return nil
}

// print calls text for the verb's own human form, or writes v as YAML or JSON.
func (o *outputFormat) print(w io.Writer, v any, text func(io.Writer) error) error {
	if o.value == formatText {
		return text(w)
	}
	return o.printData(w, v)
}

// printData writes v as YAML or JSON, whichever was asked.
func (o *outputFormat) printData(w io.Writer, v any) error {
	if o.value == formatJSON {
		return printJSON(w, v)
	}
	return printYAML(w, v)
}

// printDocuments writes objects as a stream, the form `kubectl create -f` and `argo submit`
// read: YAML documents each after "---", or JSON documents one after another.
func (o *outputFormat) printDocuments(w io.Writer, objs []any) error {
	for _, obj := range objs {
		if o.value == formatJSON {
			if err := printJSON(w, obj); err != nil {
				return err
			}
			continue
		}
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if err := printYAML(w, obj); err != nil {
			return err
		}
	}
	return nil
}

// printJSON writes v as indented JSON with a final newline.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// printYAML writes v as YAML, through its JSON form (sigs.k8s.io/yaml), so both formats
// name the fields alike.
func printYAML(w io.Writer, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// printTable writes a header and rows aligned in columns. Every cell is escaped as
// describe escapes: names come from files, hosts and uploaders, and none may drive the
// terminal or break a line. An empty cell shows as "-".
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, row := range rows {
		cells := make([]string, len(row))
		for i, c := range row {
			if cells[i] = describe.Clean(c); c == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
