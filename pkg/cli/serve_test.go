package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// config/serve mounts --apt-signing-key from an optional Secret: without the Secret the file
// is missing and /apt/ is off, said on stderr; any other state of the file is left for
// artifacts.NewServer to judge, so a broken key stops the server rather than hiding.
func TestAptSigningKey(t *testing.T) {
	dir := t.TempDir()
	present := filepath.Join(dir, "key.asc")
	require.NoError(t, os.WriteFile(present, []byte("not even a key"), 0o600))
	for _, c := range []struct {
		name, path, want, said string
	}{
		{name: "no flag", path: "", want: ""},
		{name: "the Secret is absent", path: filepath.Join(dir, "missing.asc"), want: "",
			said: "bpa serve: " + filepath.Join(dir, "missing.asc") + " does not exist, the apt repository is off\n"},
		{name: "the file is there", path: present, want: present},
		{name: "the path cannot be a file (not a directory on the way): kept, for NewServer to refuse", path: filepath.Join(present, "key.asc"), want: filepath.Join(present, "key.asc")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			assert.Equal(t, c.want, aptSigningKey(c.path, &stderr))
			assert.Equal(t, c.said, stderr.String())
		})
	}
}
