package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `bpa lint` and `bpa plan` refuse what the chosen kubespray release would refuse of a CR's
// variables (pkg/validation/testdata/bad/kubespray), naming the variable and kubespray's task.
func TestLintAndPlanRefuseWhatKubesprayRefuses(t *testing.T) {
	cases, err := filepath.Glob("../validation/testdata/bad/kubespray/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		t.Run(filepath.Base(c), func(t *testing.T) {
			data, err := os.ReadFile(c)
			require.NoError(t, err)
			first, _, _ := strings.Cut(string(data), "\n")
			field, reason, ok := strings.Cut(strings.TrimPrefix(first, "# want: "), " | ")
			require.True(t, ok, c)
			out, stderr, err := bpa(t, "lint", "-f", c)
			requireExit1(t, err, "")
			assert.Empty(t, out, "problems go to stderr")
			assert.Contains(t, stderr, field+": Invalid value: kubespray would refuse it: "+reason)
			_, stderr, err = bpa(t, "plan", "-f", c, "--bmh", examples+"bmh/provisioning-by-mac.yaml")
			requireExit1(t, err, "problem(s) in "+c)
			assert.Contains(t, stderr, field+": Invalid value: kubespray would refuse it: "+reason)
		})
	}
}
