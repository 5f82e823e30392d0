// Package framework holds what the simulators under test/framework share: the small T they
// report to. A test passes its *testing.T or *testing.B; the demo program (cmd/bpa-demo)
// passes its own, so it needs no testing import.
package framework

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
