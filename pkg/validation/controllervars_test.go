package validation

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/akraino-edge-stack/bpa/config"
	"github.com/akraino-edge-stack/bpa/pkg/inventory"
	"github.com/akraino-edge-stack/bpa/pkg/kubespray"
)

// TestAdmissionKnowsTheControllerVars: the admission policy refuses the same variables, and
// allows the same interpreters, as pkg/kubespray says (one list, written twice only because
// CEL cannot read Go).
func TestAdmissionKnowsTheControllerVars(t *testing.T) {
	policy := string(config.AdmissionPolicy())
	names := make([]string, 0, len(kubespray.ControllerVars))
	for k := range kubespray.ControllerVars {
		names = append(names, "'"+k+"'")
	}
	sort.Strings(names)
	assert.Contains(t, policy, "k in ["+strings.Join(names, ", ")+"]")
	assert.Contains(t, policy, ".matches('"+kubespray.PythonInterpreter.String()+"')")
}

// TestControllerVarsRefused is the attack of a CR on the Ansible controller: each variable that
// makes kubespray act on localhost is refused, naming it, and ansible_python_interpreter takes
// interpreters only.
func TestControllerVarsRefused(t *testing.T) {
	p := field.NewPath("spec", "kubespray", "extraVars")
	for k := range kubespray.ControllerVars {
		err := inventory.CheckExtraVar(p, k, true)
		require.Error(t, err, k)
		assert.Contains(t, err.Error(), "spec.kubespray.extraVars."+k+": Forbidden: it makes kubespray act on the Ansible controller")
	}
	for _, bad := range []any{"/bin/sh -c 'id > /tmp/pwned'; /usr/bin/python3", "/tmp/python3", "python3", "/usr/bin/python3 -c x", true} {
		err := inventory.CheckExtraVar(p, "ansible_python_interpreter", bad)
		require.Error(t, err, fmt.Sprint(bad))
		assert.Contains(t, err.Error(), "spec.kubespray.extraVars.ansible_python_interpreter: Invalid value: want a plain path of a Python 3 interpreter")
	}
	for _, good := range []string{"/usr/bin/python3", "/usr/bin/python3.11", "/usr/local/bin/python3", "/usr/libexec/platform-python", "auto_silent"} {
		assert.Nil(t, inventory.CheckExtraVar(p, "ansible_python_interpreter", good), good)
	}
}

// TestJSONNumbersAsTheApiserverReadsThem: a CR written as JSON (as `bpa plan` is given by the
// tests and by kubectl get -o json) reaches the CRD's CEL rules with whole numbers as
// integers, as the apiserver decodes them, not as float64, which an int rule refuses.
func TestJSONNumbersAsTheApiserverReadsThem(t *testing.T) {
	cr := `{"apiVersion":"bpa.akraino.org/v1alpha1","kind":"Provisioning","metadata":{"name":"p","labels":{"cluster":"c"}},` +
		`"spec":{"masters":[{"m1":null}],"workerPools":[{"name":"a","replicas":3}]}}`
	_, problems := ValidateFile(context.Background(), "cr.json", []byte(cr))
	assert.Empty(t, problems)
}
