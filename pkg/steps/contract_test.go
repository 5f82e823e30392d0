package steps_test

import (
	"encoding/json"
	"go/build"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/akraino-edge-stack/bpa/pkg/steps/stepio"
	"github.com/akraino-edge-stack/bpa/workflowtemplates"
)

// stepPath is a path of the templates under stepio's directories.
var stepPath = regexp.MustCompile(`/tmp/bpa(?:/[A-Za-z0-9._-]+)*`)

// Every /tmp/bpa path the WorkflowTemplates name is one stepio defines: the directories, a
// file of stepio.Files in either, or one of lookup's outputs (a file per parameter). A path
// typed differently in a template and in a step's flag would fail every run, in a pod.
func TestTemplatePathsAreStepio(t *testing.T) {
	wfts, err := workflowtemplates.All()
	require.NoError(t, err)
	allowed := map[string]bool{stepio.InDir: true, stepio.OutDir: true}
	for _, f := range stepio.Files {
		allowed[stepio.In(f)], allowed[stepio.Out(f)] = true, true
	}
	for _, wft := range wfts {
		for _, tmpl := range wft.Spec.Templates {
			if tmpl.Container != nil && slices.Equal(tmpl.Container.Args[:min(2, len(tmpl.Container.Args))], []string{"step", "lookup"}) {
				for _, p := range tmpl.Outputs.Parameters {
					allowed[stepio.Out(p.Name)] = true
				}
			}
		}
	}
	seen := 0
	for _, wft := range wfts {
		data, err := json.Marshal(wft)
		require.NoError(t, err)
		for _, p := range stepPath.FindAllString(string(data), -1) {
			seen++
			assert.True(t, allowed[p], "%s names %s, which pkg/steps/stepio does not define", wft.Name, p)
		}
	}
	assert.Greater(t, seen, 50, "the templates pass files between steps")
}

// Steps import stepio and stepcmd, never each other: what one step writes and the next reads
// is stepio's. Only this package, which lists the steps, imports them all.
func TestStepsImportNoOtherStep(t *testing.T) {
	const prefix = "github.com/akraino-edge-stack/bpa/pkg/"
	shared := []string{prefix + "steps", prefix + "steps/stepio", prefix + "steps/stepcmd"}
	checked := 0
	err := filepath.WalkDir("..", func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		pkg, err := build.ImportDir(dir, build.ImportComment)
		if _, none := err.(*build.NoGoError); none {
			return nil
		}
		require.NoError(t, err, dir)
		checked++
		self := prefix + filepath.ToSlash(strings.TrimPrefix(dir, "../"))
		for _, imp := range slices.Concat(pkg.Imports, pkg.TestImports, pkg.XTestImports) {
			if strings.HasPrefix(imp, prefix+"steps/") && !slices.Contains(shared, imp) && self != prefix+"steps" && imp != self {
				t.Errorf("%s imports the step %s: share through pkg/steps/stepio instead", self, imp)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Greater(t, checked, 20)
}
