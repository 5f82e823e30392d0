package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openTerminal opens a new pseudo-terminal and returns its terminal side.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { ptmx.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { pts.Close() })
	return pts
}

func TestColorOnlyOnATerminal(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	tty := openTerminal(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer file.Close()

	assert.True(t, colorOK(tty))
	assert.False(t, colorOK(file), "a redirected stdout")
	assert.False(t, colorOK(&bytes.Buffer{}))
	t.Setenv("NO_COLOR", "1")
	assert.False(t, colorOK(tty), "NO_COLOR wins over a terminal")
}
