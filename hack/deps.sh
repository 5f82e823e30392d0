#!/usr/bin/env bash
# Installs the Debian packages `make demo` and `make test` need, when they are missing:
#   openssh-server  each simulated host is a real sshd (/usr/sbin/sshd)
#   ansible-core    ansible-playbook and ansible-inventory, run for real by the steps
#   ca-certificates update-ca-certificates, run for real in each simulated host's own store
#   curl            the simulated hosts fetch offline artifacts with it, as nodes do
# and what the test node (test/framework/node) and its images (hack/images) need:
#   iptables, conntrack  kube-proxy's Service rules, and their cleanup
#   iproute2        the node's bridge (ip link, ip addr)
#   busybox-static  the shell and tools of the test and executor images (a static /bin/busybox)
#   mmdebstrap      builds the stand-in kubespray image's Debian root filesystem
#   libseccomp-dev, pkg-config  runc is built with seccomp (hack/build-tools.sh runc)
# With --ui also what the Argo web UI needs:
#   chromium        the browser test drives Debian's chromium
#   Node.js >= 20   builds the UI; not installable here (Debian bookworm has 18), so it is
#                   only checked, with what to do when it is missing
# As root it runs apt-get; otherwise sudo, when sudo works; otherwise it prints the one
# command to run and fails. apt's output goes to bin/logs/deps.log.
#
#   hack/deps.sh [--ui] [--check]    --check: only report what is missing (exit 1 if any)
#   hack/deps.sh --node              only check Node.js (what the UI build needs)
#
# With BPA_UI_OPTIONAL set (make demo, make test), a missing Node.js is said but not a
# failure: they go on without Argo's web UI.
#
# DEPS_SBIN (default /usr/sbin) is where sshd, update-ca-certificates, iptables and conntrack
# are looked for, and DEPS_FS (default /) is the root the files busybox and seccomp.h are
# looked for under; tests of this script point them, and PATH, at folders without the tools.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG=${DEPS_LOG:-$ROOT/bin/logs/deps.log}
SBIN=${DEPS_SBIN:-/usr/sbin}
FS=${DEPS_FS:-}
NODE_MAJOR=20

ui=false check=false node_only=false
for a in "$@"; do
	case $a in
	--ui) ui=true ;;
	--check) check=true ;;
	--node) ui=true node_only=true ;;
	*)
		echo "usage: hack/deps.sh [--ui] [--check] | --node" >&2
		exit 2
		;;
	esac
done

PACKAGES=(openssh-server ansible-core ca-certificates curl iptables conntrack iproute2 busybox-static mmdebstrap libseccomp-dev pkg-config)
if $ui; then PACKAGES+=(chromium); fi

# has <package>: the programs or files used from that Debian package are there.
has() {
	case $1 in
	openssh-server) [[ -x $SBIN/sshd ]] ;;
	ansible-core) command -v ansible-playbook && command -v ansible-inventory ;;
	ca-certificates) [[ -x $SBIN/update-ca-certificates ]] ;;
	iptables | conntrack) [[ -x $SBIN/$1 ]] ;;
	iproute2) command -v ip ;;
	busybox-static) [[ -x $FS/bin/busybox ]] ;;
	libseccomp-dev) [[ -f $FS/usr/include/seccomp.h ]] ;;
	*) command -v "$1" ;; # curl, pkg-config, chromium
	esac
}

# missing_packages prints the Debian packages whose programs are not there.
missing_packages() {
	local p
	for p in "${PACKAGES[@]}"; do has "$p" >/dev/null || echo "$p"; done
}

# node_problem prints why the node on PATH cannot build the UI, or nothing.
node_problem() {
	local v
	if ! v=$(node --version 2>/dev/null); then
		echo "Node.js is not installed"
		return
	fi
	v=${v#v}
	if ((${v%%.*} < NODE_MAJOR)); then echo "Node.js $v is too old"; fi
}

problems=0
if $ui && [[ -n $(node_problem) ]]; then
	echo "deps: $(node_problem): the Argo UI build needs Node.js >= $NODE_MAJOR (and its npm)."
	echo "      Debian bookworm's nodejs package is 18. Install Node.js $NODE_MAJOR or newer from"
	echo "      nodejs.org (a Linux binary tarball; put its bin/ first in PATH), or use a distribution"
	echo "      that packages it (Debian 13 trixie: apt-get install nodejs npm), then run make again."
	# make demo and make test go on without the UI (hack/build-tools.sh says so again); the
	# UI build itself (--node) still fails.
	if [[ -n ${BPA_UI_OPTIONAL:-} ]] && ! $node_only; then
		echo "      BPA_UI_OPTIONAL is set: going on without Argo's web UI."
	else
		problems=1
	fi
fi
if $node_only; then exit $problems; fi

mapfile -t need < <(missing_packages)
if ((${#need[@]} == 0)); then
	all="${PACKAGES[*]}"
	echo "deps: ${all// /, } present"
	exit $problems
fi
install="apt-get update && apt-get install -y --no-install-recommends ${need[*]}"
if $check; then
	echo "deps: missing ${need[*]} (install: $install)"
	exit 1
fi

if [[ $(id -u) == 0 ]]; then
	as=()
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
	as=(sudo -n)
elif command -v sudo >/dev/null && [[ -t 0 ]]; then
	echo "deps: installing ${need[*]} needs root; sudo will ask for your password"
	as=(sudo)
else
	echo "deps: missing Debian packages ${need[*]}. As root, run:"
	echo "      $install"
	echo "      then run make again."
	exit 1
fi

mkdir -p "$(dirname "$LOG")"
start=$SECONDS
printf 'deps: installing %s with apt-get (log: %s)... ' "${need[*]}" "$LOG"
if ! {
	"${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update &&
		"${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
} >"$LOG" 2>&1; then
	echo "FAILED; last lines of $LOG:"
	tail -n 20 "$LOG" | sed 's/^/    /'
	exit 1
fi
echo "done in $((SECONDS - start))s"
mapfile -t still < <(missing_packages)
if ((${#still[@]})); then
	echo "deps: apt-get installed ${need[*]}, yet the programs of ${still[*]} are still missing (see $LOG)"
	exit 1
fi
exit $problems
