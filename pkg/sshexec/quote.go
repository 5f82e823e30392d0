package sshexec

import (
	"errors"
	"fmt"
	"strings"
)

// Quote returns s as one word of a POSIX shell command line, in single quotes.
//
// Inside single quotes a POSIX shell gives no character a special meaning, so the only thing
// to handle is the single quote itself: it closes the quote, adds an escaped quote and
// reopens, so it's becomes
//
//	'it'\''s'
//
// Every argument is quoted, even a harmless-looking one: a rule without exceptions is the
// one that cannot be got wrong when a value from a CR turns out to hold `; rm -rf /` or
// `$(id)`.
//
// SSH gives the remote side one string, which the login shell parses; there is no argv on
// the wire. A NUL byte cannot survive that (the shell gets a C string), so Command refuses
// arguments containing one rather than letting them be silently truncated.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// sudoPrefix makes a non-root login run the command as root without ever prompting: -n fails
// at once when a password would be needed (a hung step is worse than a failed one), and --
// ends sudo's options so the command cannot be read as one.
var sudoPrefix = []string{"sudo", "-n", "--"}

// Command builds the remote command line for argv as user: every argument quoted, and
// prefixed with `sudo -n --` unless the user is root.
func Command(user string, argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("empty command")
	}
	if user != "" && user != "root" {
		argv = append(append([]string(nil), sudoPrefix...), argv...)
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %d of %s contains a NUL byte, which cannot be passed to a remote command", i, argv[0])
		}
		words[i] = Quote(a)
	}
	return strings.Join(words, " "), nil
}
