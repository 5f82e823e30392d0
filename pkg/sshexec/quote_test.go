package sshexec

import (
	"bytes"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// hostile are arguments a CR could smuggle in if anything were spliced into a shell unquoted.
var hostile = []string{
	"x; rm -rf /",
	"$(id)",
	"`id`",
	"'",
	`"`,
	`'\''`,
	`\`,
	"a b\tc",
	"line1\nline2",
	"$HOME ${PATH} $0 $@ $* $#",
	"*",
	"~root",
	"a && b || c | d > /tmp/x < /etc/passwd &",
	"-rf",
	"--",
	"",
	" ",
	"!event",
	"\x01\x7f\xff not utf-8",
	"日本語",
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":            `''`,
		"plain":       `'plain'`,
		"it's":        `'it'\''s'`,
		"x; rm -rf /": `'x; rm -rf /'`,
		"$(id)":       `'$(id)'`,
		"''":          `''\'''\'''`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		user string
		argv []string
		want string
	}{
		{"root", []string{"cat", "--", "/etc/kubernetes/admin.conf"}, `'cat' '--' '/etc/kubernetes/admin.conf'`},
		{"", []string{"true"}, `'true'`},
		{"ubuntu", []string{"cat", "--", "/etc/kubernetes/admin.conf"}, `'sudo' '-n' '--' 'cat' '--' '/etc/kubernetes/admin.conf'`},
		{"root", []string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "jq=1.6-2"},
			`'env' 'DEBIAN_FRONTEND=noninteractive' 'apt-get' 'install' '-y' 'jq=1.6-2'`},
		{"root", []string{"echo", "x; rm -rf /"}, `'echo' 'x; rm -rf /'`},
	} {
		got, err := Command(tc.user, tc.argv)
		if err != nil || got != tc.want {
			t.Errorf("Command(%q, %q) = %s, %v; want %s", tc.user, tc.argv, got, err, tc.want)
		}
	}
	if _, err := Command("root", nil); err == nil {
		t.Error("an empty argv must be refused")
	}
	if _, err := Command("root", []string{"echo", "a\x00b"}); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("a NUL byte must be refused, got %v", err)
	}
}

// shells are the shells the round trip is checked with: the remote login shell is usually
// bash, and sh (dash on Debian) is the strictest POSIX one.
func shells(t testing.TB) []string {
	var out []string
	for _, sh := range []string{"sh", "bash"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no shell to test quoting with")
	}
	return out
}

// roundTrip runs the quoted command line in a real shell and returns the arguments the
// command received, NUL-separated by printf.
func roundTrip(t testing.TB, shell string, args []string) []string {
	t.Helper()
	line, err := Command("root", append([]string{"printf", `%s\0`}, args...))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(shell, "-c", line)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s -c %s: %v: %s", shell, line, err, stderr.String())
	}
	got := strings.Split(stdout.String(), "\x00")
	return got[:len(got)-1] // printf ends every argument with a NUL
}

func TestQuoteRoundTripsHostileArguments(t *testing.T) {
	for _, sh := range shells(t) {
		if got := roundTrip(t, sh, hostile); !reflect.DeepEqual(got, hostile) {
			t.Errorf("%s: got %q, want %q", sh, got, hostile)
		}
	}
}

// FuzzQuote proves that whatever an argument holds, `sh -c` hands it to the command
// verbatim: it is never split, expanded or executed.
func FuzzQuote(f *testing.F) {
	for _, s := range hostile {
		f.Add(s, "second")
	}
	f.Add("", "")
	f.Add("'''", `\'`)
	shs := shells(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.ContainsRune(a+b, 0) {
			if _, err := Command("root", []string{a, b}); err == nil {
				t.Fatal("NUL accepted")
			}
			return
		}
		want := []string{a, b}
		for _, sh := range shs {
			if got := roundTrip(t, sh, want); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got %q, want %q", sh, got, want)
			}
		}
	})
}
