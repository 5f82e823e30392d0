#!/usr/bin/env bash
# Builds the real components the test rig (test/rig) runs: etcd, kube-apiserver,
# Argo's workflow-controller and argo CLI, plus Argo's CRDs, into bin/.
#
#   hack/build-tools.sh                 # everything missing or out of date
#   hack/build-tools.sh etcd argo-crds  # only these (names: etcd kube-apiserver
#                                       #   workflow-controller argo argo-crds kustomize)
#
# Each tool is pinned by its own module under hack/tools/<module>/ (go.mod and
# go.sum committed), so the builds are reproducible and never touch the
# project's go.mod. A tool is rebuilt only when bin/.stamps/<tool> differs from
# the pin (that is, on first use, after a version bump or a STAMP_REV bump).
# Cold times on 2 cores, module cache filled: etcd 40 s, kube-apiserver 4 min,
# workflow-controller 3 min, argo 1 min (it reuses the controller's packages),
# kustomize 20 s (builds config/ in test/integration).
# Builds run one after another: on a 2-core machine parallel links only thrash.
# Each tool prints one line (what, why, how long); module downloads and compiler output
# go to bin/logs/build-<tool>.log, shown only when a build fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/hack/tools"
BIN="$ROOT/bin"
STAMPS="$BIN/.stamps"
LOGS="$BIN/logs"
mkdir -p "$STAMPS" "$LOGS"
# shellcheck source=hack/logged.sh
source "$ROOT/hack/logged.sh"
# bin/ holds build outputs only; keep it out of git even without a root rule.
[[ -f $BIN/.gitignore ]] || echo '*' >"$BIN/.gitignore"

# The tool modules resolve against their own committed go.sum (readonly: a
# missing entry fails loudly instead of being fetched and trusted), never
# against a workspace. To bump a pin: edit go.mod, run `go mod tidy` in that
# module, commit both files.
export GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0
BUILD_FLAGS=(-trimpath "-ldflags=-s -w")

# module version as pinned in a tool module's go.mod (the stamp also covers
# the replace lines, so a bump of any of them triggers a rebuild).
pin() { # <module dir> <module path>
	(cd "$TOOLS/$1" && go list -m -f '{{.Version}}' "$2")
}
# STAMP_REV: bump when a build recipe below changes, to rebuild everything.
STAMP_REV=2
stamp_of() { # <module dir>: digest of the pinned module graph and recipe
	{ cat "$TOOLS/$1/go.mod" "$TOOLS/$1/go.sum"; echo "$STAMP_REV"; } | sha256sum | cut -c1-16
}

up_to_date() { # <tool> <stamp> <outputs...>
	local tool=$1 want=$2
	shift 2
	for f in "$@"; do [[ -e $f ]] || return 1; done
	[[ -f $STAMPS/$tool && $(cat "$STAMPS/$tool") == "$want" ]]
}

# build <tool> <version> <estimate> <stamp> CMD...: runs CMD (a command or a function of
# this script) through logged, in one line saying why (missing, a new version, a changed
# recipe), then records the stamp.
build() {
	local tool=$1 v=$2 estimate=$3 stamp=$4 why old
	shift 4
	why="missing"
	if [[ -f $STAMPS/$tool ]]; then
		old=$(cut -d' ' -f1 "$STAMPS/$tool")
		why="pin or recipe changed"
		[[ $old == "$v" ]] || why="new version, was $old"
	fi
	logged "$tool $v: building ($why, ~$estimate; log ${LOGS#"$ROOT/"}/build-$tool.log)" "$LOGS/build-$tool.log" "$@"
	echo "$stamp" >"$STAMPS/$tool"
}

# build_module_tool <tool> <pinned module> <main package> <estimate>: builds bin/<tool>
# from hack/tools/<tool>, unless its stamp says it is up to date.
build_module_tool() {
	local tool=$1 module=$2 pkg=$3 estimate=$4 v s
	v=$(pin "$tool" "$module")
	s="$v $(stamp_of "$tool")"
	if up_to_date "$tool" "$s" "$BIN/$tool"; then echo "$tool $v: up to date"; return; fi
	build "$tool" "$v" "$estimate" "$s" go -C "$TOOLS/$tool" build "${BUILD_FLAGS[@]}" -o "$BIN/$tool" "$pkg"
}

build_etcd() { build_module_tool etcd go.etcd.io/etcd/server/v3 go.etcd.io/etcd/server/v3 "40 s"; }
build_kube_apiserver() { build_module_tool kube-apiserver k8s.io/kubernetes k8s.io/kubernetes/cmd/kube-apiserver "4 min"; }
build_kustomize() { build_module_tool kustomize sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5 "20 s"; }

# Argo's release builds stamp their version in; without it the CLI and the
# controller say v0.0.0 and `argo version` is useless in bug reports.
argo_version_ldflag() { echo "-X github.com/argoproj/argo-workflows/v3.version=$1"; }

# The argo module's folder in the module cache (downloaded first: on a fresh
# machine `go list -m` alone reports no folder).
argo_dir() {
	(
		cd "$TOOLS/argo"
		go mod download github.com/argoproj/argo-workflows/v3
		go list -m -f '{{.Dir}}' github.com/argoproj/argo-workflows/v3
	)
}

build_workflow_controller() {
	local v s
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	s="$v $(stamp_of argo)"
	if up_to_date workflow-controller "$s" "$BIN/workflow-controller"; then echo "workflow-controller $v: up to date"; return; fi
	build workflow-controller "$v" "3 min" "$s" go -C "$TOOLS/argo" build -trimpath "-ldflags=-s -w $(argo_version_ldflag "$v")" \
		-o "$BIN/workflow-controller" github.com/argoproj/argo-workflows/v3/cmd/workflow-controller
}

# The argo CLI embeds ui/dist/app (its built web UI), which the module zip
# lacks. Build it from a writable copy of the module with a placeholder page,
# through a throw-away copy of hack/tools/argo whose go.mod replaces
# argo-workflows/v3 by that copy; the committed module files stay untouched.
build_argo_cli() {
	local v s
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	s="$v $(stamp_of argo)"
	if up_to_date argo "$s" "$BIN/argo"; then echo "argo $v: up to date"; return; fi
	build argo "$v" "1 min after workflow-controller" "$s" argo_cli "$v"
}

argo_cli() { # <version>
	local v=$1 src work
	src=$(argo_dir)
	work="$BIN/.work/argo"
	[[ -e $work ]] && chmod -R u+w "$work" && rm -rf "$work"
	mkdir -p "$work"
	cp -r "$src" "$work/argo-workflows"
	chmod -R u+w "$work/argo-workflows"
	mkdir -p "$work/argo-workflows/ui/dist/app"
	echo '<!doctype html><title>Argo UI not bundled (BPA test build)</title>' \
		>"$work/argo-workflows/ui/dist/app/index.html"
	mkdir -p "$work/mod"
	cp "$TOOLS/argo/go.mod" "$TOOLS/argo/go.sum" "$TOOLS/argo/tools.go" "$work/mod/"
	cd "$work/mod"
	go mod edit -replace "github.com/argoproj/argo-workflows/v3=$work/argo-workflows"
	GOFLAGS=-mod=mod go build -trimpath "-ldflags=-s -w $(argo_version_ldflag "$v")" -o "$BIN/argo" github.com/argoproj/argo-workflows/v3/cmd/argo
	cd "$ROOT"
	rm -rf "$BIN/.work"
}

# Argo's full CRDs (with OpenAPI schemas, the rig's default: the apiserver
# validates Workflows) and minimal ones (what Argo's own install manifests
# apply; far cheaper for the apiserver) under minimal/.
copy_argo_crds() {
	local v s
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	s="$v $(stamp_of argo)"
	if up_to_date argo-crds "$s" "$BIN/argo-crds" "$BIN/argo-crds/minimal"; then echo "argo-crds $v: up to date"; return; fi
	build argo-crds "$v" "10 s" "$s" argo_crds
}

argo_crds() {
	local src
	src=$(argo_dir)
	rm -rf "$BIN/argo-crds"
	mkdir -p "$BIN/argo-crds/minimal"
	cp "$src"/manifests/base/crds/full/argoproj.io_*.yaml "$BIN/argo-crds/"
	cp "$src"/manifests/base/crds/minimal/argoproj.io_*.yaml "$BIN/argo-crds/minimal/"
	chmod -R u+w "$BIN/argo-crds"
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(etcd argo-crds kube-apiserver workflow-controller argo kustomize)
for t in "${want[@]}"; do
	case $t in
	etcd) build_etcd ;;
	kube-apiserver) build_kube_apiserver ;;
	workflow-controller) build_workflow_controller ;;
	argo) build_argo_cli ;;
	argo-crds) copy_argo_crds ;;
	kustomize) build_kustomize ;;
	*)
		echo "unknown tool $t (want: etcd kube-apiserver workflow-controller argo argo-crds kustomize)" >&2
		exit 2
		;;
	esac
done
