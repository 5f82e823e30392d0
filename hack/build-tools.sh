#!/usr/bin/env bash
# Builds the real components the test rig (test/framework/rig) runs: etcd, kube-apiserver,
# Argo's workflow-controller and argo CLI (with Argo's web UI built from its sources),
# plus Argo's CRDs, and those of its real node (test/framework/node): Argo's executor,
# kubelet, kube-proxy, kube-scheduler, kube-controller-manager, containerd (with its shim
# and ctr), runc and the CNI plugins, into bin/.
#
#   hack/build-tools.sh                 # everything missing or out of date
#   hack/build-tools.sh etcd argo-crds  # only these (names: etcd etcdctl etcdutl versitygw kube-apiserver
#                                       #   workflow-controller argo-ui argo argo-crds kustomize
#                                       #   golangci-lint promtool playwright argoexec kubelet kube-proxy
#                                       #   kube-scheduler kube-controller-manager containerd
#                                       #   runc cni-plugins)
#
# Each tool is pinned by its own module under hack/tools/<module>/ (go.mod and
# go.sum committed), so the builds are reproducible and never touch the
# project's go.mod. A tool is rebuilt only when bin/.stamps/<tool> differs from
# the pin (that is, on first use, after a version bump or a STAMP_REV bump).
# Cold times on 2 cores, module cache filled: etcd 40 s, kube-apiserver 4 min,
# workflow-controller 3 min, argo 1 min (it reuses the controller's packages),
# kustomize 20 s (builds config/ in test/integration), versitygw 2 min (pkg/artifacts' S3 store),
# golangci-lint 2 min (`make lint`), promtool 8 min (test/monitoring; on a machine busy with other
# builds), argo-ui 4 min (yarn install
# 1 min, webpack 2.3 min and 2.6 GB of memory; needs Node.js >= 20).
# The node's, cold (an empty build cache, on a machine busy with other builds): kubelet
# 6 min, then kube-controller-manager 2 min, kube-proxy, kube-scheduler and kube-apiserver
# 10 s each (the five share one module and most packages: 8 min for all, against 4 min for
# kube-apiserver alone); argoexec 10 min (about 3 min after workflow-controller);
# containerd, its shim and ctr 1 min; runc 25 s; the CNI plugins 10 s.
# Builds run one after another: on a 2-core machine parallel links only thrash.
# Each tool prints one line (what, why, how long); module downloads and compiler output
# go to bin/logs/build-<tool>.log, shown only when a build fails.
#
# Argo's web UI needs Node.js and one package from GitHub (see build_argo_ui). When it
# cannot be built, one line says what failed and what to set, and is kept in
# bin/argo-ui.unavailable (e2e scenario u and the demo repeat it). The script then fails, unless
# BPA_UI_OPTIONAL is set (make demo and make test set it): then it goes on without the UI,
# and builds the argo CLI with a page saying so where the UI would be.
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
# etcdctl, the floor of pkg/etcdbackup's benchmark: its own `snapshot save` on the same etcd.
build_etcdctl() { build_module_tool etcdctl go.etcd.io/etcd/etcdctl/v3 go.etcd.io/etcd/etcdctl/v3 "20 s"; }
# etcdutl, which the stand-in kubespray installs on the simulated etcd hosts (snapshot restore).
build_etcdutl() { build_module_tool etcdutl go.etcd.io/etcd/etcdutl/v3 go.etcd.io/etcd/etcdutl/v3 "30 s"; }
# versitygw, the real S3 server pkg/artifacts' S3 backup store is tested against (posix backend).
build_versitygw() { build_module_tool versitygw github.com/versity/versitygw github.com/versity/versitygw/cmd/versitygw "2 min"; }

# build_kube <tool> <estimate>: one of the Kubernetes binaries, all from hack/tools/kubernetes
# (one module: they share most packages, so each after the first mostly links). Release
# builds stamp the version in; without it they report v0.0.0-master+$Format:%H$, which
# `kubectl version` cannot parse and the Node's kubeletVersion shows.
build_kube() {
	local tool=$1 estimate=$2 v s ld="-s -w" minor pkg
	v=$(pin kubernetes k8s.io/kubernetes)
	s="$v $(stamp_of kubernetes)"
	if up_to_date "$tool" "$s" "$BIN/$tool"; then echo "$tool $v: up to date"; return; fi
	minor=${v#v1.}
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=clean"
	done
	build "$tool" "$v" "$estimate" "$s" go -C "$TOOLS/kubernetes" build -trimpath "-ldflags=$ld" -o "$BIN/$tool" "k8s.io/kubernetes/cmd/$tool"
}
build_kustomize() { build_module_tool kustomize sigs.k8s.io/kustomize/kustomize/v5 sigs.k8s.io/kustomize/kustomize/v5 "20 s"; }
build_golangci_lint() { build_module_tool golangci-lint github.com/golangci/golangci-lint/v2 github.com/golangci/golangci-lint/v2/cmd/golangci-lint "2 min"; }
# promtool checks and unit-tests config/prometheus's alerting rules (test/monitoring).
build_promtool() { build_module_tool promtool github.com/prometheus/prometheus github.com/prometheus/prometheus/cmd/promtool "8 min"; }

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

# Argo's executor, for the executor image of the test node's pods. Upstream,
# workflow/executor/osspecific/signal_linux.go is a git symlink to signal_darwin.go, and
# module zips drop symlinks: from the module proxy argoexec fails with "undefined: Setpgid".
# So it is built from a copy of the module with that file restored as a regular copy, through
# a throw-away copy of hack/tools/argo whose go.mod replaces argo-workflows/v3 by it (the
# committed module files stay untouched, and go.sum still checks every other module).
build_argoexec() {
	local v s
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	s="$v $(stamp_of argo)"
	if up_to_date argoexec "$s" "$BIN/argoexec"; then echo "argoexec $v: up to date"; return; fi
	build argoexec "$v" "3 min after workflow-controller, 10 min cold" "$s" argoexec "$v"
}

argoexec() { # <version>
	local v=$1 work="$BIN/.work/argoexec" os
	argo_module_copy "$work"
	os="$work/argo-workflows/workflow/executor/osspecific"
	[[ -e $os/signal_linux.go ]] || cp "$os/signal_darwin.go" "$os/signal_linux.go"
	mkdir -p "$work/mod"
	cp "$TOOLS/argo/go.mod" "$TOOLS/argo/go.sum" "$TOOLS/argo/tools.go" "$work/mod/"
	cd "$work/mod"
	go mod edit -replace "github.com/argoproj/argo-workflows/v3=$work/argo-workflows"
	go build -trimpath "-ldflags=-s -w $(argo_version_ldflag "$v")" -o "$BIN/argoexec" github.com/argoproj/argo-workflows/v3/cmd/argoexec
	cd "$ROOT"
	rm -rf "$work"
}

# argo_module_copy <dir>: a fresh, writable copy of the argo module at <dir>/argo-workflows.
argo_module_copy() {
	local src
	src=$(argo_dir)
	[[ -e $1 ]] && chmod -R u+w "$1" && rm -rf "$1"
	mkdir -p "$1"
	cp -r "$src" "$1/argo-workflows"
	chmod -R u+w "$1/argo-workflows"
}

# Argo's web UI, built from the pinned module's ui/ sources (the module zip has
# no ui/dist/app) into bin/argo-ui, without source maps. Its yarn.lock takes
# every package from the npm registry but one, argo-ui, which it names by a
# GitHub git URL. BPA_ARGO_UI_TARBALL, when set, is that package's source as a
# tarball (`git archive --prefix=package/` of the pinned commit), for machines
# that cannot reach GitHub; CI points it at its copy.
ARGO_UI_REPO=https://github.com/argoproj/argo-ui.git
ARGO_UI_COMMIT=54f36c723d9a0e5d3386689298cbb9c27767fa00
ARGO_UI_GIT="git+$ARGO_UI_REPO#$ARGO_UI_COMMIT"
ARGO_UI_TARBALL_SHA256=a1ffdf94d29f2477e2e27c6916c728165b7e588b12a464f3a10bc1bf652b17a7
YARN_VERSION=1.22.22 # yarn classic: the lockfile is a v1 one
UI_UNAVAILABLE="$BIN/argo-ui.unavailable"
ui_state= # checked: the UI is up to date or can be built; unavailable: said so, going on without
# check_argo_ui says now, before any tool builds, when Argo's web UI is not up to date and
# cannot be built here (no Node.js >= 20; GitHub out of reach and no BPA_ARGO_UI_TARBALL):
# in seconds, not after the other tools' builds.
check_argo_ui() {
	local v s why
	[[ -z $ui_state ]] || return 0
	ui_state=checked
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	s="$v $(stamp_of argo)"
	up_to_date argo-ui "$s" "$BIN/argo-ui/index.html" && return 0
	if ! why=$("$ROOT/hack/deps.sh" --node); then
		why=$(head -n 1 <<<"$why")
		ui_unavailable "$v" "${why#deps: } (hack/deps.sh --node says how to install it)"
	elif [[ -z ${BPA_ARGO_UI_TARBALL:-} ]] && ! why=$(reachable "$ARGO_UI_REPO"); then
		# Without the tarball yarn fetches argo-ui from GitHub.
		ui_unavailable "$v" "cannot fetch argoproj/argo-ui from GitHub ($why): set BPA_ARGO_UI_TARBALL=/path/to/argo-ui-${ARGO_UI_COMMIT:0:7}.tgz" \
			"(argoproj/argo-ui at ${ARGO_UI_COMMIT:0:7}: git archive --prefix=package/ ${ARGO_UI_COMMIT:0:7} | gzip, on a machine that reaches GitHub)"
	fi
}

build_argo_ui() {
	local v s rc
	check_argo_ui
	[[ $ui_state != unavailable ]] || return 0
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	s="$v $(stamp_of argo)"
	if up_to_date argo-ui "$s" "$BIN/argo-ui/index.html"; then
		rm -f "$UI_UNAVAILABLE"
		echo "argo-ui $v: up to date"
		return
	fi
	# In a subshell with its own errexit, so that a failed build can be survived when the UI
	# is optional (logged must not run as the condition of an if: see hack/logged.sh).
	set +e
	(
		set -e
		build argo-ui "$v" "4 min" "$s" argo_ui
	)
	rc=$?
	set -e
	if ((rc == 0)); then
		rm -f "$UI_UNAVAILABLE"
	else
		ui_unavailable "$v" "the build failed (exit $rc; log ${LOGS#"$ROOT/"}/build-argo-ui.log)"
	fi
}

# reachable <git URL>: succeeds when git can list the repository; else prints why (git's
# last line), within 30 s however the network drops the connection.
reachable() {
	local out rc=0
	out=$(GIT_TERMINAL_PROMPT=0 timeout 30 git ls-remote "$1" HEAD 2>&1) || rc=$?
	((rc == 0)) && return 0
	if ((rc == 124)); then
		echo "git ls-remote $1: no answer in 30 s"
	else
		out=$(grep -v '^[[:space:]]*$' <<<"$out" | tail -n 1)
		echo "git ls-remote: ${out#fatal: }"
	fi
	return 1
}

# ui_unavailable <version> <reason...>: says in one line why Argo's web UI cannot be built
# and what to do, keeps the line in $UI_UNAVAILABLE, and fails unless BPA_UI_OPTIONAL is set.
ui_unavailable() {
	local v=$1 line
	shift
	line="argo-ui $v: $*"
	ui_state=unavailable
	echo "$line" >"$UI_UNAVAILABLE"
	echo "$line" >&2
	[[ -n ${BPA_UI_OPTIONAL:-} ]] || exit 1
	echo "argo-ui $v: going on without Argo's web UI (BPA_UI_OPTIONAL): argo server will serve its API and a page saying this" >&2
}

argo_ui() {
	local work yarn="$BIN/.yarn/node_modules/.bin/yarn"
	[[ -x $yarn ]] || npm install --no-audit --no-fund --prefix "$BIN/.yarn" "yarn@$YARN_VERSION"
	work="$BIN/.work/argo-ui"
	# The whole module: webpack copies ../api/openapi-spec and ../api/jsonschema.
	argo_module_copy "$work"
	cd "$work/argo-workflows/ui"
	if [[ -n ${BPA_ARGO_UI_TARBALL:-} ]]; then
		# A relative file: spec; yarn's frozen-lockfile check rejects an absolute one.
		cp "$BPA_ARGO_UI_TARBALL" ../argo-ui.tgz
		echo "$ARGO_UI_TARBALL_SHA256  ../argo-ui.tgz" | sha256sum -c -
		sed -i "s|$ARGO_UI_GIT|file:../argo-ui.tgz|" package.json yarn.lock
	fi
	YARN_CACHE_FOLDER="$BIN/.cache/yarn" "$yarn" install --frozen-lockfile --non-interactive --network-timeout 600000
	"$yarn" build
	rm -rf "$BIN/argo-ui"
	cp -r dist/app "$BIN/argo-ui"
	find "$BIN/argo-ui" -name '*.map' -delete
	cd "$ROOT"
	rm -rf "$work"
}

# playwright-core (no browser of its own: the UI test drives Debian's chromium),
# from the npm registry, for e2e scenario u (the UI).
PLAYWRIGHT_VERSION=1.65.1
build_playwright() {
	local v=$PLAYWRIGHT_VERSION
	if up_to_date playwright "$v" "$BIN/playwright/node_modules/playwright-core"; then echo "playwright-core $v: up to date"; return; fi
	"$ROOT/hack/deps.sh" --node
	build playwright "$v" "20 s" "$v" npm install --no-audit --no-fund --prefix "$BIN/playwright" "playwright-core@$v"
}

# The argo CLI embeds ui/dist/app, which the module zip lacks: build it from a
# writable copy of the module holding bin/argo-ui, through a throw-away copy of
# hack/tools/argo whose go.mod replaces argo-workflows/v3 by that copy; the
# committed module files stay untouched.
build_argo_cli() {
	local v s
	v=$(pin argo github.com/argoproj/argo-workflows/v3)
	[[ -f $STAMPS/argo-ui || $ui_state == unavailable ]] || build_argo_ui
	# "ui none": built without the UI (BPA_UI_OPTIONAL), so built again once the UI is.
	s="$v $(stamp_of argo) ui $(cat "$STAMPS/argo-ui" 2>/dev/null || echo none)"
	if up_to_date argo "$s" "$BIN/argo"; then echo "argo $v: up to date"; return; fi
	build argo "$v" "1 min after workflow-controller" "$s" argo_cli "$v"
}

argo_cli() { # <version>
	local v=$1 work="$BIN/.work/argo"
	argo_module_copy "$work"
	mkdir -p "$work/argo-workflows/ui/dist"
	if [[ -f $BIN/argo-ui/index.html ]]; then
		cp -r "$BIN/argo-ui" "$work/argo-workflows/ui/dist/app"
	else
		# Where the UI would be, the line that says why it is not.
		mkdir "$work/argo-workflows/ui/dist/app"
		{
			echo "<!doctype html><title>Argo's web UI was not built</title><p>Argo's web UI was not built with this argo:</p><pre>"
			sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g' "$UI_UNAVAILABLE" 2>/dev/null || echo "bin/argo-ui is missing: run hack/build-tools.sh argo-ui"
			echo "</pre>"
		} >"$work/argo-workflows/ui/dist/app/index.html"
	fi
	# `argo server` listens on every interface; the rig and the demo run it with
	# --auth-mode=server (the rig's admin rights for any caller): loopback only.
	local server="$work/argo-workflows/server/apiserver/argoserver.go"
	# (Its gRPC gateway dials "localhost", which may be ::1 first: the same address.)
	sed -i -e 's|address := fmt.Sprintf(":%d", port)|address := fmt.Sprintf("127.0.0.1:%d", port)|' \
		-e 's|endpoint := fmt.Sprintf("localhost:%d", port)|endpoint := fmt.Sprintf("127.0.0.1:%d", port)|' "$server"
	[[ $(grep -c '"127.0.0.1:%d", port)' "$server") == 2 ]]
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

# The test node's runtime (test/framework/node). containerd without the btrfs, devmapper and
# zfs snapshotters: they need C headers, and the node uses overlayfs.
build_containerd() {
	local v s m=github.com/containerd/containerd/v2
	v=$(pin containerd $m)
	s="$v $(stamp_of containerd)"
	if up_to_date containerd "$s" "$BIN/containerd" "$BIN/containerd-shim-runc-v2" "$BIN/ctr"; then echo "containerd $v: up to date"; return; fi
	build containerd "$v" "1 min" "$s" containerd_bins "$v"
}

containerd_bins() { # <version>
	local m=github.com/containerd/containerd/v2 t
	for t in containerd containerd-shim-runc-v2 ctr; do
		go -C "$TOOLS/containerd" build -trimpath -tags no_btrfs,no_devmapper,no_zfs \
			"-ldflags=-s -w -X $m/version.Version=$1 -X $m/version.Package=$m" -o "$BIN/$t" "$m/cmd/$t"
	done
}

# runc with seccomp (cgo and libseccomp-dev, which hack/deps.sh installs): kubelet asks
# RuntimeDefault seccomp for every sandbox and containerd passes it on whenever the kernel
# has seccomp, so a runc without it fails every pod ("seccomp not supported").
build_runc() {
	local v s
	v=$(pin runc github.com/opencontainers/runc)
	s="$v $(stamp_of runc)"
	if up_to_date runc "$s" "$BIN/runc"; then echo "runc $v: up to date"; return; fi
	build runc "$v" "25 s" "$s" runc_bin "$v"
}

runc_bin() { # <version>
	CGO_ENABLED=1 go -C "$TOOLS/runc" build -trimpath -tags seccomp "-ldflags=-s -w -X main.version=${1#v}" -o "$BIN/runc" github.com/opencontainers/runc
	"$BIN/runc" --version | grep -q '^libseccomp: ' # linked with seccomp, or fail
}

# The CNI plugins of the node's pod network, into bin/cni/ (containerd's CNI bin dir).
CNI_PLUGINS=(main/bridge ipam/host-local main/loopback meta/portmap)
build_cni_plugins() {
	local v s p outs=()
	v=$(pin cni-plugins github.com/containernetworking/plugins)
	s="$v $(stamp_of cni-plugins)"
	for p in "${CNI_PLUGINS[@]}"; do outs+=("$BIN/cni/${p#*/}"); done
	if up_to_date cni-plugins "$s" "${outs[@]}"; then echo "cni-plugins $v: up to date"; return; fi
	build cni-plugins "$v" "10 s" "$s" cni_plugin_bins "$v"
}

cni_plugin_bins() { # <version>
	local m=github.com/containernetworking/plugins p
	for p in "${CNI_PLUGINS[@]}"; do
		go -C "$TOOLS/cni-plugins" build -trimpath "-ldflags=-s -w -X $m/pkg/utils/buildversion.BuildVersion=$1" -o "$BIN/cni/${p#*/}" "$m/plugins/$p"
	done
}

ALL_TOOLS=(etcd etcdctl etcdutl versitygw argo-crds kube-apiserver workflow-controller argo-ui argo kustomize golangci-lint promtool playwright
	argoexec kubelet kube-proxy kube-scheduler kube-controller-manager containerd runc cni-plugins)
want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=("${ALL_TOOLS[@]}")
# The UI's prerequisites first, when it will be built (argo builds it when it never was).
for t in "${want[@]}"; do
	if [[ $t == argo-ui || ($t == argo && ! -f $STAMPS/argo-ui) ]]; then
		check_argo_ui
		break
	fi
done
for t in "${want[@]}"; do
	case $t in
	etcd) build_etcd ;;
	etcdctl) build_etcdctl ;;
	etcdutl) build_etcdutl ;;
	versitygw) build_versitygw ;;
	kube-apiserver) build_kube kube-apiserver "4 min" ;;
	kubelet) build_kube kubelet "6 min" ;;
	kube-controller-manager) build_kube "$t" "2 min" ;;
	kube-proxy | kube-scheduler) build_kube "$t" "10 s after kubelet" ;;
	workflow-controller) build_workflow_controller ;;
	argoexec) build_argoexec ;;
	containerd) build_containerd ;;
	runc) build_runc ;;
	cni-plugins) build_cni_plugins ;;
	argo-ui) build_argo_ui ;;
	playwright) build_playwright ;;
	argo) build_argo_cli ;;
	argo-crds) copy_argo_crds ;;
	kustomize) build_kustomize ;;
	golangci-lint) build_golangci_lint ;;
	promtool) build_promtool ;;
	*)
		echo "unknown tool $t (want: ${ALL_TOOLS[*]})" >&2
		exit 2
		;;
	esac
done
