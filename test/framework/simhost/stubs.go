package simhost

// The stand-in commands a simulated host puts first in the SSH session's PATH. They are
// POSIX sh (plus awk and od, which every Debian has), so the harness needs no build step.
//
// Every invocation is appended to calls.log as one line: the tool, then DEBIAN_FRONTEND, then
// each argument, tab-separated and hex-encoded so that arguments holding tabs, newlines or
// quotes (the injection tests send such things) are recorded exactly.
//
// State lives in the host's directory:
//
//	packages   name<TAB>version<TAB>status, status "ii" (installed) or "rc" (removed,
//	           config files left, as apt-get remove leaves them)
//	available  name<TAB>version: the OS repository's candidate for an unpinned install
//	bpa-available  name<TAB>version: every version BPA's signed repository offers this
//	           host, as apt-get update last read it (bpa_source): all of them, but only
//	           of the names its apt preferences let through
//	held       one name per line: apt-get "succeeds" but leaves these alone
//	free-kb    if present, the KiB df reports available on every filesystem (SetFreeDisk)
//	fail.TOOL  if present, TOOL prints its content to stderr and exits non-zero

// stubLib is sourced by every stub; @DIR@ is replaced by the host directory, single-quoted.
const stubLib = `D=@DIR@

hex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }

record() {
	line="$1	$(hex "${DEBIAN_FRONTEND-}")"
	shift
	for a in "$@"; do line="$line	$(hex "$a")"; done
	printf '%s\n' "$line" >>"$D/calls.log"
}

fail_if_asked() { # tool exit-code
	if [ -f "$D/fail.$1" ]; then
		cat "$D/fail.$1" >&2
		exit "$2"
	fi
}

# matches NAME: the available packages NAME matches when apt reads it as a regular
# expression, which it does for a name it has no package of that holds a '.'.
matches() {
	case "$1" in
	*.*) ;;
	*) return 0 ;;
	esac
	if awk -F'\t' -v n="$1" '$1 == n { f = 1 } END { exit !f }' "$D/available" "$D/bpa-available" "$D/packages"; then
		return 0
	fi
	awk -F'\t' -v re="$1" '$1 ~ re { print $1 }' "$D/available" "$D/bpa-available" | sort -u
}

# candidate NAME: the version apt-get installs for an unpinned NAME: the highest, by dpkg's
# order (the real dpkg --compare-versions, which only reads), of the OS repository's and
# BPA's repository's versions; empty if neither has it.
candidate() {
	best=
	for v in $(awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$D/available" "$D/bpa-available"); do
		if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best=$v; fi
	done
	printf '%s' "$best"
}

# from_bpa NAME: whether BPA's repository offers NAME to this host.
from_bpa() { awk -F'\t' -v n="$1" '$1 == n { f = 1 } END { exit !f }' "$D/bpa-available"; }

# offered NAME VERSION: whether a repository has that version of NAME.
offered() { awk -F'\t' -v n="$1" -v v="$2" '$1 == n && $2 == v { f = 1 } END { exit !f }' "$D/available" "$D/bpa-available"; }

status_of() { awk -F'\t' -v n="$1" '$1 == n { s = $3 } END { print s }' "$D/packages"; }

# bpa_source reads BPA's apt source, if the host has one, as apt reads a signed flat
# repository: InRelease fetched with the host's curl and trust store, its signature checked
# by gpgv against the Signed-By key (apt refuses an unsigned or mis-signed repository with
# exit 100), Packages fetched and checked against InRelease's SHA256, and its packages made
# available, every version of each, but only those of the names BPA's apt preferences
# (/etc/apt/preferences.d/bpa-artifacts.pref) give a priority of 0 or more: -1 means never,
# as apt reads it. Other sources are the host's "available" file.
bpa_source() {
	src=/etc/apt/sources.list.d/bpa-artifacts.sources
	: >"$D/bpa-available"
	[ -f "$src" ] || return 0
	uri=$(sed -n 's/^URIs: //p' "$src")
	key=$(sed -n 's/^Signed-By: //p' "$src")
	tmp=$(mktemp -d)
	if ! curl -fsS --max-time 30 -o "$tmp/InRelease" "${uri}InRelease" 2>"$tmp/err"; then
		echo "E: Failed to fetch ${uri}InRelease  $(cat "$tmp/err")" >&2
		exit 100
	fi
	# gpg --dearmor with coreutils: the armor's headers, checksum and end line dropped.
	sed -e '1,/^[[:space:]]*$/d' -e '/^=/d' -e '/^-----END/d' "$key" | base64 -d >"$tmp/key.gpg"
	if ! gpgv --homedir "$tmp" --keyring "$tmp/key.gpg" "$tmp/InRelease" 2>"$tmp/err"; then
		# apt prints gpgv's last line; the rest, and what was fetched, say why.
		echo "W: GPG error: ${uri} ./ InRelease: $(tail -1 "$tmp/err")" >&2
		echo "N: gpgv said: $(tr '\n' ' ' <"$tmp/err"); InRelease: $(wc -c <"$tmp/InRelease") bytes, first line: $(head -1 "$tmp/InRelease"); keyring: $(wc -c <"$tmp/key.gpg") bytes" >&2
		echo "E: The repository '${uri} ./ InRelease' is not signed." >&2
		exit 100
	fi
	curl -fsS --max-time 30 -o "$tmp/Packages" "${uri}Packages"
	want=$(awk '/^SHA256:/ { f = 1; next } /^[^ ]/ { f = 0 } f && $3 == "Packages" { print $1 }' "$tmp/InRelease")
	if [ "$want" != "$(sha256sum "$tmp/Packages" | cut -d' ' -f1)" ]; then
		echo "E: Failed to fetch ${uri}Packages  Hash Sum mismatch" >&2
		exit 100
	fi
	awk '/^Package:/ { p = $2 } /^Version:/ { v = $2 } /^$/ { if (p != "") print p "\t" v; p = "" } END { if (p != "") print p "\t" v }' \
		"$tmp/Packages" >"$tmp/new"
	pref=/etc/apt/preferences.d/bpa-artifacts.pref
	if [ -f "$pref" ]; then
		# Each stanza: Package (names or *), Pin (release o=BPA), Pin-Priority. A name is let
		# through by a stanza naming it with priority >= 0, or by * with priority >= 0.
		awk 'function flush() { if (pkgs != "" && pin == "release o=BPA" && prio >= 0) { n = split(pkgs, a, " "); for (i = 1; i <= n; i++) print a[i] } pkgs = ""; pin = ""; prio = -1 }
			/^Package:/ { pkgs = substr($0, 10) } /^Pin:/ { pin = substr($0, 6) } /^Pin-Priority:/ { prio = $2 + 0 } /^$/ { flush() } END { flush() }' "$pref" >"$tmp/allowed"
		awk -F'\t' 'NR == FNR { ok[$1] = 1; next } ("*" in ok) || ($1 in ok)' "$tmp/allowed" "$tmp/new" >"$D/bpa-available"
	else
		cp "$tmp/new" "$D/bpa-available"
	fi
	rm -rf "$tmp"
}

set_pkg() { # name version status
	awk -F'\t' -v n="$1" -v v="$2" -v s="$3" 'BEGIN { OFS = "\t" } $1 != n { print } END { print n, v, s }' \
		"$D/packages" >"$D/packages.tmp" && mv "$D/packages.tmp" "$D/packages"
}
`

// stubDpkgQuery knows only the query BPA makes (-W with the Package/Version/Status-Abbrev
// format) and answers it for every package the host knows, sorted, as `dpkg-query -W`
// without names does.
const stubDpkgQuery = `#!/bin/sh
set -eu
. @LIB@
record dpkg-query "$@"
fail_if_asked dpkg-query 2
awk -F'\t' 'NF >= 3 { printf "%s\t%s\t%s \n", $1, $2, $3 }' "$D/packages" | LC_ALL=C sort
`

// stubAptGet handles update, install (name or name=version) and remove like apt-get does
// for the purpose of the tests: it checks every package before changing any, and fails with
// apt's own messages. An unpinned install takes the highest version offered and never
// downgrades; a pin below the installed version needs --allow-downgrades; a pinned version
// of a package BPA's repository offers must be one it has. Like apt 2.6, it installs every available package matching an
// unpinned name it has no package of that holds a '.', read as a regular expression.
const stubAptGet = `#!/bin/sh
set -eu
. @LIB@
record apt-get "$@"
fail_if_asked apt-get 100
if [ "$(id -u)" != 0 ]; then
	echo "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)" >&2
	exit 100
fi
op=
downgrades=
for a in "$@"; do
	case "$a" in
	--allow-downgrades) downgrades=1 ;;
	esac
done
for a in "$@"; do
	case "$a" in
	-*) ;;
	*) op=$a; break ;;
	esac
done
case "$op" in
update)
	bpa_source
	echo "Reading package lists... Done"
	exit 0
	;;
install | remove) ;;
*)
	echo "E: Invalid operation $op" >&2
	exit 100
	;;
esac
seen=
for a in "$@"; do
	case "$a" in
	-*) continue ;;
	esac
	if [ -z "$seen" ]; then seen=1; continue; fi # the operation itself
	name=${a%%=*}
	if [ "$op" = install ]; then
		case "$a" in
		*=*) ver=${a#*=} ;;
		*) ver=$(candidate "$name") ;;
		esac
		if [ -z "$ver" ] && [ "$(status_of "$name")" != ii ] && [ -z "$(matches "$a")" ]; then
			echo "E: Unable to locate package $name" >&2
			exit 100
		fi
		old=$(awk -F'\t' -v n="$name" '$1 == n && $3 == "ii" { v = $2 } END { print v }' "$D/packages")
		case "$a" in
		*=*)
			# The OS repository is simulated by its candidates only, so its pins install as
			# asked; a package BPA's repository offers is held to the versions it has.
			if from_bpa "$name" && ! offered "$name" "$ver" && [ "$old" != "$ver" ]; then
				echo "E: Version '$ver' for '$name' was not found" >&2
				exit 100
			fi
			if [ -n "$old" ] && dpkg --compare-versions "$ver" lt "$old" && [ -z "$downgrades" ]; then
				echo "E: Packages were downgraded and -y was used without --allow-downgrades." >&2
				exit 100
			fi
			;;
		esac
	fi
done
seen=
for a in "$@"; do
	case "$a" in
	-*) continue ;;
	esac
	if [ -z "$seen" ]; then seen=1; continue; fi
	name=${a%%=*}
	if grep -qxF "$name" "$D/held"; then
		echo "$name is held, leaving it alone"
		continue
	fi
	old=$(awk -F'\t' -v n="$name" '$1 == n { v = $2 } END { print v }' "$D/packages")
	if [ "$op" = remove ]; then
		if [ "$(status_of "$name")" = ii ]; then
			set_pkg "$name" "$old" rc
			echo "Removing $name ($old) ..."
		else
			echo "Package '$name' is not installed, so not removed"
		fi
		continue
	fi
	case "$a" in
	*=*) ver=${a#*=} ;;
	*) ver=$(candidate "$name") ;;
	esac
	if [ -n "$old" ] && [ "$(status_of "$name")" = ii ] && [ "$a" = "$name" ] && { [ -z "$ver" ] || ! dpkg --compare-versions "$ver" gt "$old"; }; then
		# Unpinned: apt never downgrades, nor reinstalls what is there.
		echo "$name is already the newest version ($old)."
		continue
	fi
	[ -n "$ver" ] || ver=$old
	if [ -z "$ver" ]; then
		for m in $(matches "$a"); do
			echo "Note, selecting '$m' for regex '$a'"
			v=$(candidate "$m")
			set_pkg "$m" "$v" ii
			echo "Setting up $m ($v) ..."
		done
		continue
	fi
	set_pkg "$name" "$ver" ii
	echo "Setting up $name ($ver) ..."
done
`

// stubAptCache answers `apt-cache show [options] [--] NAME...` as apt 2.6 does: a record
// (Package, Version, Description) for each name that is available or installed, "N: Unable
// to locate package" on stderr for the others, and exit status 100 when it found none. A
// name it does not know that holds a '.' is read as a regular expression over the available
// packages, as apt does, so a test can show that such a name is refused, not installed.
const stubAptCache = `#!/bin/sh
set -eu
. @LIB@
record apt-cache "$@"
fail_if_asked apt-cache 100
if [ "${1-}" != show ]; then
	echo "E: (simhost) only apt-cache show is simulated" >&2
	exit 100
fi
shift
found=
for a in "$@"; do
	case "$a" in
	-*) continue ;;
	esac
	recs=$(awk -F'\t' -v n="$a" '$1 == n { printf "Package: %s\nVersion: %s\nDescription: simulated\n\n", $1, $2; exit }' "$D/available" "$D/bpa-available")
	[ -n "$recs" ] || recs=$(awk -F'\t' -v n="$a" '$1 == n && $3 == "ii" { printf "Package: %s\nVersion: %s\nDescription: simulated\n\n", $1, $2; exit }' "$D/packages")
	case "$a" in
	*.*) [ -n "$recs" ] || recs=$(awk -F'\t' -v re="$a" '$1 ~ re && !seen[$1]++ { printf "Package: %s\nVersion: %s\nDescription: simulated\n\n", $1, $2 }' "$D/available" "$D/bpa-available") ;;
	esac
	if [ -z "$recs" ]; then
		echo "N: Unable to locate package $a" >&2
		continue
	fi
	found=1
	printf '%s\n\n' "$recs"
done
if [ -z "$found" ]; then
	echo "E: No packages found" >&2
	exit 100
fi
`

// stubSudo accepts the options BPA uses (-n, --) and those of Ansible's become (-H -S -n
// -u root), and runs the command; the host's user is always allowed, as with NOPASSWD. Only
// root can be become: the host's sshd runs as root.
const stubSudo = `#!/bin/sh
set -eu
. @LIB@
record sudo "$@"
while [ $# -gt 0 ]; do
	case "$1" in
	-n | -H | -S) shift ;;
	-u)
		[ "${2-}" = root ] || { echo "sudo (simhost): only root can be become, not ${2-}" >&2; exit 1; }
		shift 2 ;;
	--) shift; break ;;
	-*) echo "sudo (simhost): unsupported option $1" >&2; exit 1 ;;
	*) break ;;
	esac
done
exec "$@"
`

// stubUname answers `uname -m` with the machine the test gave the host (SetMachine), so one
// machine can stand in for hosts of other architectures; anything else is the real uname.
// It records nothing: it only reads.
const stubUname = `#!/bin/sh
. @LIB@
if [ "$*" = -m ] && [ -s "$D/machine" ]; then
	cat "$D/machine"
	exit 0
fi
exec /bin/uname "$@"
`

// stubDf answers df as the real one does, except that a host the test gave a free space
// (SetFreeDisk) reports it, in KiB, as the available space of every filesystem asked about:
// POSIX format (-P) with 1 KiB blocks (-k), the only form BPA reads. It records each call.
const stubDf = `#!/bin/sh
. @LIB@
record df "$@"
if [ ! -s "$D/free-kb" ]; then
	exec /bin/df "$@"
fi
free=$(cat "$D/free-kb")
echo "Filesystem     1024-blocks      Used Available Capacity Mounted on"
for a in "$@"; do
	case "$a" in
	-*) ;;
	*) printf 'simhost %d %d %d 99%% %s\n' $((free * 4)) $((free * 3)) "$free" "$a" ;;
	esac
done
`

// stubSystemctl records the call and runs the systemctl stand-in (@STUB@, systemctl/stub)
// with the host's socket (@SOCK@): the test process answers (Unit).
const stubSystemctl = `#!/bin/sh
. @LIB@
record systemctl "$@"
exec @STUB@ @SOCK@ systemctl "$@"
`

// stubCrictl records the call and asks the test process as stubSystemctl does (Pod); it
// fails as asked (Fail) before that.
const stubCrictl = `#!/bin/sh
. @LIB@
record crictl "$@"
fail_if_asked crictl 1
exec @STUB@ @SOCK@ crictl "$@"
`
