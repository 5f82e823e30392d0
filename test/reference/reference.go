// Package reference finds the original ICN data BPA was written against, for the extra
// suites that compare BPA with it. That data is not part of the repository (a user's clone
// has none): the project's own testdata covers every shape it has, and these suites run
// only when BPA_REFERENCE_DIR names a copy (CI points it at its copy of the ICN reference data).
package reference

import (
	"os"
	"path/filepath"
	"testing"
)

// Env names the folder holding icn/ and seeds/.
const Env = "BPA_REFERENCE_DIR"

// Dir returns $BPA_REFERENCE_DIR, or skips t with a one-line reason when it is unset. A
// folder that is set but unusable fails t: CI asked for the comparison.
func Dir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(Env)
	if dir == "" {
		t.Skip(Env + " is not set: skipping the comparison with the original ICN data")
	}
	// Tests run in their package's folder, so a relative path would mean a different
	// folder to each of them.
	if !filepath.IsAbs(dir) {
		t.Fatalf("%s=%q: give an absolute path", Env, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "icn")); err != nil {
		t.Fatalf("%s=%q holds no icn/ folder: %v", Env, dir, err)
	}
	return dir
}

// Path is Dir joined with elem.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Dir(t)}, elem...)...)
}

// SampleGlobs are the ICN CR samples BPA must accept unchanged, relative to Dir.
var SampleGlobs = []string{"seeds/*.yaml", "icn/provisioning/*.yaml", "icn/software/*.yaml"}

// Samples returns the ICN CR samples, or skips t when Env is unset. It fails t when the
// folder holds fewer files than the copy CI uses (22), so a moved folder cannot pass
// silently.
func Samples(t testing.TB) []string {
	t.Helper()
	dir := Dir(t)
	var out []string
	for _, g := range SampleGlobs {
		m, err := filepath.Glob(filepath.Join(dir, g))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 22 {
		t.Fatalf("%s: only %d ICN samples (want at least 22)", dir, len(out))
	}
	return out
}
