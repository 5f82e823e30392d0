package kubespray

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The kubespray files a Violation's Role names (testdata/tasks/<tag>.txt lists their tasks,
// extracted by hack/kubespray-data).
var roleFile = map[string]string{
	"validate_inventory":    "roles/validate_inventory/tasks/main.yml",
	"kubernetes/preinstall": "roles/kubernetes/preinstall/tasks/0040-verify-settings.yml",
	"remove_node.yml":       "playbooks/remove_node.yml",
	"reset.yml":             "playbooks/reset.yml",
}

// readSections reads a file of "[section]" headers, each followed by lines; "#" lines and
// blank lines are skipped. Indented lines are returned as a note of the line before.
func readSections(t testing.TB, path string) (order []string, lines map[string][]string, notes map[string]map[string]string) {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	lines, notes = map[string][]string{}, map[string]map[string]string{}
	section, last := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			order = append(order, section)
			notes[section] = map[string]string{}
		case strings.HasPrefix(l, " "):
			require.NotEmpty(t, last, "%s: a note before any line", path)
			notes[section][last] = strings.TrimSpace(l)
		default:
			require.NotEmpty(t, section, "%s: %q before any [section]", path, l)
			lines[section] = append(lines[section], l)
			last = l
		}
	}
	require.NoError(t, sc.Err())
	return order, lines, notes
}

// taskLists reads testdata/tasks/<tag>.txt: the inventory-check file (the first section) and
// every file's task names.
func taskLists(t testing.TB, tag string) (checks string, tasks map[string][]string) {
	order, tasks, _ := readSections(t, filepath.Join("testdata", "tasks", tag+".txt"))
	require.NotEmpty(t, order, tag)
	return order[0], tasks
}

// modelled lists, per tag, the tasks some case of TestRules or TestPlaybookRules shows a
// rule failing with, by the file their Role names; and fails the test on any citation of a
// task that file does not have at that tag.
func modelled(t *testing.T) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	record := func(release string, errs []error) {
		_, tasks := taskLists(t, release)
		for _, e := range errs {
			v, ok := e.(Violation)
			require.True(t, ok, "%T", e)
			if v.Role == PolicyRole {
				assert.Empty(t, v.Task, "BPA's own rule cites no kubespray task")
				continue
			}
			file, ok := roleFile[v.Role]
			require.True(t, ok, "role %q names no file of roleFile", v.Role)
			assert.Contains(t, tasks[file], v.Task, "kubespray %s's %s has no task %q", release, file, v.Task)
			if out[release] == nil {
				out[release] = map[string][]string{}
			}
			out[release][file] = append(out[release][file], v.Task)
		}
	}
	for _, tc := range ruleCases() {
		for _, release := range patchesOf(t, tc.release) {
			p, patch, _ := ProfileFor(release)
			record(release, p.CheckInventory(tc.inv, tc.vars, patch))
		}
	}
	for _, tc := range playbookCases() {
		for _, release := range patchesOf(t, tc.release) {
			p, patch, _ := ProfileFor(release)
			record(release, p.CheckPlaybook(tc.op, playbookInv, nil, patch, tc.cached))
		}
	}
	return out
}

// TestCitations: every Violation the rules produce names a task that exists, at the
// release's tag, in the file its Role names.
func TestCitations(t *testing.T) {
	got := modelled(t)
	assert.Len(t, got, len(Versions()), "every release has cases")
}

// TestCitedTaskLiterals: every task name written in this package's rules (a literal first
// argument of fail, or the Task of a Violation literal) is a task of kubespray's lists at
// some supported tag, whether or not a test case reaches it.
func TestCitedTaskLiterals(t *testing.T) {
	known := map[string]bool{}
	for _, tag := range Versions() {
		_, tasks := taskLists(t, tag)
		for _, l := range tasks {
			for _, n := range l {
				known[n] = true
			}
		}
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(node ast.Node) bool {
			var lit ast.Expr
			switch x := node.(type) {
			case *ast.CallExpr:
				if id, ok := x.Fun.(*ast.Ident); ok && id.Name == "fail" && len(x.Args) == 2 {
					lit = x.Args[0]
				}
			case *ast.CompositeLit:
				if id, ok := x.Type.(*ast.Ident); ok && id.Name == "Violation" && len(x.Elts) == 3 {
					lit = x.Elts[1]
				}
			}
			if b, ok := lit.(*ast.BasicLit); ok && b.Kind == token.STRING {
				s, err := strconv.Unquote(b.Value)
				require.NoError(t, err)
				n++
				assert.True(t, known[s], "%s: %q is no task of kubespray's lists at any supported tag", fset.Position(b.Pos()), s)
			}
			return true
		})
	}
	assert.Greater(t, n, 30, "the rules' task names were found")
}

// TestEveryTaskAccountedFor: every task of each tag's inventory checks
// (roles/validate_inventory/tasks/main.yml from v2.28, kubernetes/preinstall's
// 0040-verify-settings.yml before) is a rule some test case shows failing, or is listed with
// its reason in testdata/tasks/not-modelled.txt; nothing is both, and the list names no task
// that is in neither release.
func TestEveryTaskAccountedFor(t *testing.T) {
	_, listed, reasons := readSections(t, filepath.Join("testdata", "tasks", "not-modelled.txt"))
	got := modelled(t)
	seen := map[string]map[string]bool{}
	for _, tag := range Versions() {
		checks, tasks := taskLists(t, tag)
		require.NotEmpty(t, tasks[checks], tag)
		if seen[checks] == nil {
			seen[checks] = map[string]bool{}
		}
		for _, task := range tasks[checks] {
			seen[checks][task] = true
			isModelled := slices.Contains(got[tag][checks], task)
			isListed := slices.Contains(listed[checks], task)
			assert.True(t, isModelled || isListed, "kubespray %s: task %q of %s is neither modelled (with a test case) nor listed in testdata/tasks/not-modelled.txt", tag, task, checks)
			assert.False(t, isModelled && isListed, "kubespray %s: task %q is modelled and listed as not modelled", tag, task)
		}
		t.Logf("kubespray %s, %s: %d tasks, %d not modelled", tag, checks, len(tasks[checks]), countListed(tasks[checks], listed[checks]))
	}
	for file, names := range listed {
		for _, n := range names {
			assert.True(t, seen[file][n], "not-modelled.txt lists %q of %s, which no supported tag has", n, file)
			assert.NotEmpty(t, reasons[file][n], "not-modelled.txt: %q has no reason", n)
		}
	}
}

func countListed(tasks, listed []string) int {
	n := 0
	for _, t := range tasks {
		if slices.Contains(listed, t) {
			n++
		}
	}
	return n
}
