package inventory

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzVarsFileRoundTrip: whatever variables pass the checks, the file MarshalVars writes is
// accepted by CheckExtraVars (run-kubespray) and reads back the same values, so no string
// (control characters, quotes, YAML indicators, any Unicode) escapes its !unsafe tag or
// changes on the way.
func FuzzVarsFileRoundTrip(f *testing.F) {
	for _, s := range []string{
		`{"a": "b"}`, `{"a": "x\ny: z\n- w", "b": [true, 1, -2.5e3, {"k": "\u0000\u2028\t'\"\\"}]}`,
		`{"a": "!unsafe", "b": "&x *x", "c": "--- ...", "d": "# c", "e": "\ufeffbom", "f": ""}`,
		`{"n": 123456789012345678901234567890, "m": {"1": "on", "true": "yes", "k:v/w.x-y_z": []}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(in)))
		dec.UseNumber()
		var vars map[string]any
		if dec.Decode(&vars) != nil || vars == nil || checkVars(vars) != nil {
			return
		}
		out, err := MarshalVars(vars)
		require.NoError(t, err)
		require.NoError(t, CheckExtraVars(out), "%s", out)
		back, err := ReadVars(out)
		require.NoError(t, err)
		assert.Equal(t, vars, back, "%s", out)
	})
}
