#!/usr/bin/env bash
# Regenerates deepcopy, CRDs and RBAC and fails if anything changed, so a stale generated
# file can never land. The working tree is left as it was either way.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=(pkg/apis/bpa/v1alpha1/zz_generated.deepcopy.go config/crd/bases/*.yaml config/rbac/role.yaml workflowtemplates/provision.yaml)
snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
for f in "${files[@]}"; do mkdir -p "$snap/$(dirname "$f")"; cp "$f" "$snap/$f"; done
make --no-print-directory generate manifests >/dev/null
stale=()
for f in "${files[@]}"; do cmp -s "$f" "$snap/$f" || stale+=("$f"); done
if ((${#stale[@]})); then
	for f in "${files[@]}"; do cp "$snap/$f" "$f"; done
	echo "generated files are stale: ${stale[*]}" >&2
	echo "run 'make generate manifests' and commit the result" >&2
	exit 1
fi
echo "generated files are up to date"
