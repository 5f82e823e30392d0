// Package framework holds what the simulators under test/framework share: the small T they
// report to. A test passes its *testing.T or *testing.B; the demo program (cmd/bpa-demo)
// passes its own, so it needs no testing import.
package framework

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// T is the part of testing.TB the simulators call. Fatalf must not return: testing.TB stops
// the goroutine, the demo ends the program.
type T interface {
	Helper()
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Failed() bool
}

// Build builds the Go package pkg ("./cmd/bpa", a path in the repository at root) into
// root/bin/<name>-<hash of root>, and returns that path. Test binaries of two packages
// (go test -p 2) may build it at once: each writes its own file and renames it into place,
// so neither runs the other's half-written one. The name carries the checkout's path, so two
// checkouts sharing a bin/ never swap builds. Callers build once per process (sync.Once).
func Build(root, pkg, name string) (string, error) {
	sum := sha256.Sum256([]byte(root))
	path := filepath.Join(root, "bin", name+"-"+hex.EncodeToString(sum[:4]))
	tmp := fmt.Sprintf("%s.%d", path, os.Getpid())
	if err := BuildTo(root, pkg, tmp); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// BuildTo builds the Go package pkg (a path in the repository at root) into out, with env
// (such as CGO_ENABLED=0) added to go's environment.
func BuildTo(root, pkg, out string, env ...string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}
