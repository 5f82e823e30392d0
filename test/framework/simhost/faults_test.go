package simhost

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFreezeAndThaw: a frozen host's sshd accepts no SSH (no banner), a thawed one does;
// a host on loopback has no link to cut.
func TestFreezeAndThaw(t *testing.T) {
	h := NewCluster(t).Start("frozen-1", "127.0.1.31")
	banner := func() string {
		conn, err := net.DialTimeout("tcp", h.Addr(), time.Second)
		if err != nil {
			return ""
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return line
	}
	require.True(t, strings.HasPrefix(banner(), "SSH-2.0"), "sshd answers")
	require.NoError(t, h.Freeze())
	require.Empty(t, banner(), "a frozen sshd sends no banner")
	require.NoError(t, h.Thaw())
	require.True(t, strings.HasPrefix(banner(), "SSH-2.0"), "a thawed sshd answers")
	require.Error(t, h.CutNetwork(), "a host on loopback has no link of its own")
}
