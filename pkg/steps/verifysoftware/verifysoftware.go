// Package verifysoftware is `bpa step verify-software`: it reads the per-host results that
// Argo aggregated from the install-software fan-out and fails, naming the hosts, when any
// host is not in the wanted state. It runs after failures too, so the Workflow's last word
// says how many hosts failed while each host's own node keeps its own message.
package verifysoftware

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
	"github.com/akraino-edge-stack/bpa/pkg/software"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepcmd"
	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
)

// Command returns `bpa step verify-software`.
func Command() *cobra.Command {
	var resultsFile string
	return stepcmd.Command(stepcmd.Step{
		Name:  "verify-software",
		Short: "Summarise the per-host software results; fail if any host failed",
		Flags: func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&resultsFile, "results-file", stepio.In(stepio.ResultsFile), "JSON list of per-host results")
		},
		Run: func(ctx context.Context) error {
			data, err := os.ReadFile(resultsFile)
			if err != nil {
				return err
			}
			if results, err := ParseResults(data); err == nil {
				for _, r := range results {
					fmt.Println(software.HostLine(r))
				}
			}
			summary, err := Summarise(data)
			if err != nil {
				return err
			}
			fmt.Println(summary)
			return nil
		},
	})
}

// Summarise returns a one-line summary, or an error naming the hosts that failed.
func Summarise(data []byte) (string, error) {
	results, err := ParseResults(data)
	if err != nil {
		return "", err
	}
	var failed []string
	changed := 0
	for _, r := range results {
		if r.Phase != "Succeeded" {
			name := r.Name
			if name == "" {
				name = "<unknown host>"
			}
			if r.Message != "" {
				name += " (" + r.Message + ")"
			}
			failed = append(failed, name)
		}
		if r.Changed {
			changed++
		}
	}
	sort.Strings(failed)
	if len(failed) > 0 {
		return "", fmt.Errorf("%d of %d hosts failed: %s", len(failed), len(results), strings.Join(failed, "; "))
	}
	return fmt.Sprintf("%d hosts in the wanted state, %d changed", len(results), changed), nil
}

// ParseResults reads Argo's aggregation of a fanned-out output parameter: a JSON list whose
// items are the per-host result objects, or strings holding them (Argo's form depends on
// whether the values parse as JSON).
func ParseResults(data []byte) ([]bpav1.HostSoftwareStatus, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("results are not a JSON list: %w", err)
	}
	out := make([]bpav1.HostSoftwareStatus, 0, len(raw))
	for _, r := range raw {
		var s string
		if json.Unmarshal(r, &s) == nil {
			r = json.RawMessage(s)
		}
		var h bpav1.HostSoftwareStatus
		if err := json.Unmarshal(r, &h); err != nil {
			return nil, fmt.Errorf("result %s: %w", r, err)
		}
		out = append(out, h)
	}
	return out, nil
}
