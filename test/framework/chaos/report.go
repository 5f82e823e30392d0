package chaos

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report is what a soak prints at its end.
type Report struct {
	Plan Plan
	// Faults are the faults injected.
	Faults []Injected
	// Runs counts the Workflows seen, by the phase they were last seen in: a run whose CR
	// the workload deletes right after it ended may be last seen Running.
	Runs map[string]int
	// Ops is how many operations of the workload were carried out.
	Ops        int
	Wall       time.Duration
	Violations []Violation
	// Accepted are the CRs Stalled by a fault (Converged).
	Accepted []string
}

// Survived counts the faults whose target came back. With a violation, no fault counts as
// survived: which one caused it is not known.
func (r *Report) Survived() int {
	if len(r.Violations) > 0 {
		return 0
	}
	n := 0
	for _, f := range r.Faults {
		if f.Err == nil {
			n++
		}
	}
	return n
}

// Replay is the command that runs the same plan again.
func (r *Report) Replay() string {
	return fmt.Sprintf("make soak SEED=%d FAULTS=%d", r.Plan.Seed, r.Plan.Config.Faults)
}

// Write prints the report: faults injected by kind, survived, runs, wall time, and on any
// violation each one and the replay command.
func (r *Report) Write(w io.Writer) {
	byKind := map[Kind]int{}
	var failed []string
	for _, f := range r.Faults {
		byKind[f.Kind]++
		if f.Err != nil {
			failed = append(failed, fmt.Sprintf("%s of %s: %v", f.Kind, f.Target, f.Err))
		}
	}
	var kinds []string
	for _, k := range Kinds {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	runs := 0
	var phases []string
	for _, p := range sortedKeys(r.Runs) {
		runs += r.Runs[p]
		phases = append(phases, fmt.Sprintf("%s %d", p, r.Runs[p]))
	}
	fmt.Fprintf(w, "soak seed %d: %d faults injected (%s), %d survived; %d operations, %d runs (last seen: %s); wall %s\n",
		r.Plan.Seed, len(r.Faults), strings.Join(kinds, ", "), r.Survived(), r.Ops, runs, strings.Join(phases, ", "), r.Wall.Round(time.Second))
	for _, f := range failed {
		fmt.Fprintf(w, "  recovery failed: %s\n", f)
	}
	for _, a := range r.Accepted {
		fmt.Fprintf(w, "  accepted: %s\n", a)
	}
	if len(r.Violations) == 0 {
		return
	}
	fmt.Fprintf(w, "%d invariant violations:\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
	fmt.Fprintf(w, "replay: %s\n", r.Replay())
}
