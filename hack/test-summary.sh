#!/usr/bin/env bash
# test-summary.sh LOG...: after a failed `make test`, the names of the failed tests and their
# first messages, printed last. A failing suite logs the tails of its processes (the rig's
# apiserver, controllers, argo server) after the test that failed, so the end of the output,
# which is all a CI log shows, would otherwise name no test. The whole logs stay in the files.
set -u
echo "==== failed tests (whole output: $*) ===="
awk '
	# A test that failed, with its first few messages (file:line, Error:, Messages:).
	/^[[:space:]]*--- FAIL:/ { print; left = 12; next }
	/^[[:space:]]*--- (PASS|SKIP):/ { left = 0; next }
	# go test -timeout: the tests that were running come right after the panic.
	/^panic: test timed out/ { print; timeout = 12; next }
	timeout > 0 { print; timeout--; next }
	/^(FAIL|ok)[[:space:]]/ { if ($1 == "FAIL" && NF > 1) print; left = 0; next }
	left > 0 && /(\.go:[0-9]+:|Error:|Messages:|panic:)/ {
		line = $0; sub(/^[[:space:]]+/, "    ", line)
		print substr(line, 1, 400); left--
	}
' "$@" | head -n 80
