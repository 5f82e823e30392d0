// Package debversion compares Debian package versions as dpkg does (deb-version(7)), so BPA
// can tell which of two versions is newer without asking a host: which version an artifact
// server's repository holds newest, and whether a host's installed version is older than it.
package debversion

import (
	"regexp"
	"strconv"
	"strings"

	bpav1 "github.com/akraino-edge-stack/bpa/pkg/apis/bpa/v1alpha1"
)

var pattern = regexp.MustCompile(bpav1.DebianVersionPattern)

// Valid reports whether v is a Debian version as BPA accepts one: Debian policy syntax
// (bpav1.DebianVersionPattern), at most bpav1.MaxPackageFieldLength long, not ending in '-'.
// Nothing else ever reaches apt-get as a version, whoever wrote it.
func Valid(v string) bool {
	return len(v) <= bpav1.MaxPackageFieldLength && pattern.MatchString(v) && !strings.HasSuffix(v, "-")
}

// Compare returns -1, 0 or 1 as a is older than, the same as or newer than b, by dpkg's
// rules: the epoch as a number, then the upstream version, then the revision, each compared
// in alternating runs of non-digits (letters before other characters, '~' before anything,
// even the end) and of digits (as numbers). Versions that dpkg would refuse still compare
// (BPA checks syntax separately, before a version reaches any command).
func Compare(a, b string) int {
	ea, ua, ra := split(a)
	eb, ub, rb := split(b)
	if ea != eb {
		return sign(int64(ea) - int64(eb))
	}
	if c := verrevcmp(ua, ub); c != 0 {
		return sign(int64(c))
	}
	return sign(int64(verrevcmp(ra, rb)))
}

// Newer reports whether a is newer than b.
func Newer(a, b string) bool { return Compare(a, b) > 0 }

// split is dpkg's parseversion: an epoch before the first ':', a revision after the last '-'.
func split(v string) (epoch uint64, upstream, revision string) {
	if e, rest, ok := strings.Cut(v, ":"); ok {
		epoch, _ = strconv.ParseUint(e, 10, 32)
		v = rest
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		return epoch, v[:i], v[i+1:]
	}
	return epoch, v, ""
}

// order is the weight of one non-digit character; 0 is the end of the string (or a digit).
func order(s string, i int) int {
	if i >= len(s) {
		return 0
	}
	c := s[i]
	switch {
	case isDigit(c):
		return 0
	case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		return int(c)
	case c == '~':
		return -1
	default:
		return int(c) + 256
	}
}

// verrevcmp is dpkg's comparison of one part (upstream or revision).
func verrevcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		firstDiff := 0
		for (i < len(a) && !isDigit(a[i])) || (j < len(b) && !isDigit(b[j])) {
			if ac, bc := order(a, i), order(b, j); ac != bc {
				return ac - bc
			}
			i, j = i+1, j+1
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		for i < len(a) && j < len(b) && isDigit(a[i]) && isDigit(b[j]) {
			if firstDiff == 0 {
				firstDiff = int(a[i]) - int(b[j])
			}
			i, j = i+1, j+1
		}
		if i < len(a) && isDigit(a[i]) {
			return 1
		}
		if j < len(b) && isDigit(b[j]) {
			return -1
		}
		if firstDiff != 0 {
			return firstDiff
		}
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func sign(n int64) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
