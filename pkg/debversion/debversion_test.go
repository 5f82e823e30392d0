package debversion

import (
	"os/exec"
	"testing"
)

// versions are compared pairwise with Compare and with the real dpkg --compare-versions;
// they cover epochs, revisions, '~' (before anything, even the end), letters before other
// characters, leading zeros and numbers longer than a machine word.
var versions = []string{
	"1.0", "1.0-1", "1.0-2", "1.0~rc1", "1.0~rc1-1", "1.0~~", "1.0~", "1.0+b1", "1.0.1", "1.0a", "1.0-1ubuntu0.1",
	"1:0.9", "2:0.1", "0:1.0", "3.2.2-2", "3.2.2-3", "3.2.2-10", "3.2.10-1", "3.2.2+dfsg-1", "3.2.2-2+deb12u1",
	"7.88.1-10+deb12u5", "7.88.1-10", "01.0", "1.00", "1.0-0", "1.0-a", "1.0-+", "1.0.", "1.0+", "1.0-1.",
	"99999999999999999999.1", "99999999999999999998.1", "1.2-3-4", "1.2-3-5", "a", "2.7.18-3", "5.45.4-2+b1",
}

func TestCompareAgreesWithDpkg(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatalf("this test compares with the real dpkg: %v", err)
	}
	for _, a := range versions {
		for _, b := range versions {
			want := dpkgCompare(t, a, b)
			if got := Compare(a, b); got != want {
				t.Errorf("Compare(%q, %q) = %d, dpkg says %d", a, b, got, want)
			}
		}
	}
}

// dpkgCompare asks dpkg: lt, then eq.
func dpkgCompare(t *testing.T, a, b string) int {
	t.Helper()
	ask := func(op string) bool {
		err := exec.Command("dpkg", "--compare-versions", a, op, b).Run()
		if _, exit := err.(*exec.ExitError); err != nil && !exit {
			t.Fatal(err)
		}
		return err == nil
	}
	switch {
	case ask("lt"):
		return -1
	case ask("eq"):
		return 0
	}
	return 1
}

func TestNewer(t *testing.T) {
	if !Newer("3.2.2-3", "3.2.2-2") || Newer("3.2.2-2", "3.2.2-3") || Newer("1.0", "1.0") {
		t.Fatal("Newer disagrees with Compare")
	}
}
