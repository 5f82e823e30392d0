package artifacts

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestXZReader reads what the machine's xz writes, with every check type and with several
// blocks, the padding and check after each one skipped exactly.
func TestXZReader(t *testing.T) {
	raw := make([]byte, 300<<10)
	_, _ = rand.Read(raw[:100<<10])
	copy(raw[200<<10:], hex.EncodeToString(raw[:50<<10])) // some of it compressible
	for _, args := range [][]string{
		{"--check=none"}, {"--check=crc32"}, {"--check=crc64"}, {"--check=sha256"},
		{"--check=crc32", "--block-size=70001"}, {"--check=sha256", "--block-size=4096", "-9"},
	} {
		cmd := exec.Command("xz", append([]string{"--stdout", "--threads=1"}, args...)...)
		cmd.Stdin = bytes.NewReader(raw)
		compressed, err := cmd.Output()
		require.NoError(t, err, args)
		r, err := newXZReader(bytes.NewReader(compressed))
		require.NoError(t, err, args)
		got, err := io.ReadAll(r)
		require.NoError(t, err, args)
		assert.True(t, bytes.Equal(raw, got), "%v: %d bytes read back", args, len(got))
	}
}
