#!/usr/bin/env bash
# logged LABEL LOG CMD...: runs CMD with all its output in LOG, and shows one line:
#   LABEL... done in 41s
# (on a terminal the line counts the seconds while CMD runs). On failure it prints the
# log's path and last lines, and returns CMD's status. `make demo` and hack/build-tools.sh
# use it so that module downloads and compiler chatter stay in files.
#
# Run it (hack/logged.sh LABEL LOG CMD...) or source it and call logged, which can also
# run shell functions. Call it plainly, not as the condition of an `if`, `&&` or `||`:
# bash ignores `set -e` in the function it runs otherwise.
logged() {
	local label=$1 log=$2 start=$SECONDS rc pid
	shift 2
	mkdir -p "$(dirname "$log")"
	# In the background even when not on a terminal: a function run here keeps `set -e`,
	# which bash would ignore inside the `&& ... ||` that takes the status.
	"$@" >"$log" 2>&1 &
	pid=$!
	# Stop the command with us on ^C, not leave it building in the background.
	trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
	if [[ -t 1 ]]; then
		while kill -0 "$pid" 2>/dev/null; do
			printf '\r%s... %ds ' "$label" $((SECONDS - start))
			sleep 1
		done
		printf '\r%s... ' "$label"
	else
		printf '%s... ' "$label"
	fi
	wait "$pid" && rc=0 || rc=$?
	trap - INT TERM
	if ((rc == 0)); then
		echo "done in $((SECONDS - start))s"
		return 0
	fi
	echo "FAILED after $((SECONDS - start))s (exit $rc); last lines of $log:"
	tail -n 25 "$log" | sed 's/^/    /'
	return "$rc"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
	set -uo pipefail
	logged "$@"
fi
