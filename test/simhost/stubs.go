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
//	available  name<TAB>version: the repository's candidate for an unpinned install
//	held       one name per line: apt-get "succeeds" but leaves these alone
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
	if awk -F'\t' -v n="$1" '$1 == n { f = 1 } END { exit !f }' "$D/available" "$D/packages"; then
		return 0
	fi
	awk -F'\t' -v re="$1" '$1 ~ re { print $1 }' "$D/available"
}

status_of() { awk -F'\t' -v n="$1" '$1 == n { s = $3 } END { print s }' "$D/packages"; }

# bpa_source reads BPA's apt source, if the host has one, as apt reads a signed flat
# repository: InRelease fetched with the host's curl and trust store, its signature checked
# by gpgv against the Signed-By key (apt refuses an unsigned or mis-signed repository with
# exit 100), Packages fetched and checked against InRelease's SHA256, and its packages made
# available. Other sources are the host's "available" file.
bpa_source() {
	src=/etc/apt/sources.list.d/bpa-artifacts.sources
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
		echo "W: GPG error: ${uri} ./ InRelease: $(tail -1 "$tmp/err")" >&2
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
	awk -F'\t' 'NR == FNR { n[$1] = 1; next } !($1 in n)' "$tmp/new" "$D/available" >"$tmp/old"
	cat "$tmp/old" "$tmp/new" >"$D/available"
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
// apt's own messages. Like apt 2.6, it installs every available package matching an
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
		*) ver=$(awk -F'\t' -v n="$name" '$1 == n { print $2; exit }' "$D/available") ;;
		esac
		if [ -z "$ver" ] && [ "$(status_of "$name")" != ii ] && [ -z "$(matches "$a")" ]; then
			echo "E: Unable to locate package $name" >&2
			exit 100
		fi
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
	*) ver=$(awk -F'\t' -v n="$name" '$1 == n { print $2; exit }' "$D/available") ;;
	esac
	[ -n "$ver" ] || ver=$old
	if [ -z "$ver" ]; then
		for m in $(matches "$a"); do
			echo "Note, selecting '$m' for regex '$a'"
			v=$(awk -F'\t' -v n="$m" '$1 == n { print $2; exit }' "$D/available")
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
	recs=$(awk -F'\t' -v n="$a" '$1 == n { printf "Package: %s\nVersion: %s\nDescription: simulated\n\n", $1, $2; exit }' "$D/available")
	[ -n "$recs" ] || recs=$(awk -F'\t' -v n="$a" '$1 == n && $3 == "ii" { printf "Package: %s\nVersion: %s\nDescription: simulated\n\n", $1, $2; exit }' "$D/packages")
	case "$a" in
	*.*) [ -n "$recs" ] || recs=$(awk -F'\t' -v re="$a" '$1 ~ re { printf "Package: %s\nVersion: %s\nDescription: simulated\n\n", $1, $2 }' "$D/available") ;;
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
