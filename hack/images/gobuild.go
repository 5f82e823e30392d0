package images

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// GoBuild builds the package pkg of the repository at root into out as a static binary
// (no cgo), without paths or VCS stamps of the build machine, so the same sources give the
// same bytes. go build relinks only when an input changed.
func GoBuild(root, pkg, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// staticELF fails unless p is an ELF executable without an interpreter: an image without
// a libc can run only those.
func staticELF(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer func() { _ = f.Close() }()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: the image has no libc", p)
		}
	}
	return nil
}
