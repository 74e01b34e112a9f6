#!/usr/bin/env bash
# Build and cache the control-plane tools the end-to-end suite and the demo run, in two groups:
#   cluster:  kube-apiserver, kube-scheduler, kube-controller-manager and kubectl from
#             k8s.io/kubernetes (build_k8s), helm and kwok (build_clients), all from the Go
#             module proxy; etcd from Debian;
#   promtool: github.com/prometheus/prometheus' promtool, which checks the chart's PromQL
#             (test/e2e/promql-check.sh).
# Usage: build-tools.sh [cluster] [promtool]   (no argument: both)
#
# Cache: $GMG_CACHE (default ~/.cache/gpu-memory-guard), one folder per tool set and version,
# never inside the repository. A second run reuses it; a lock per group lets several callers run
# at once (the second waits, then finds the cache). Prints one line per step and, on failure, the
# step and the path of its log. Prints nothing else on stdout but the bin folder on the last
# line, so callers can do: BIN=$(test/e2e/build-tools.sh cluster | tail -n 1).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.33.13}
HELM_VERSION=${HELM_VERSION:-v3.18.6}
KWOK_VERSION=${KWOK_VERSION:-v0.7.0}
# Prometheus' Go module: v0.316.0 is Prometheus 3.16.0 (its go.mod asks Go >= 1.26.7).
PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
CACHE=${GMG_CACHE:-$HOME/.cache/gpu-memory-guard}
BIN="$CACHE/bin-$K8S_VERSION"
LOGS="$CACHE/logs"
mkdir -p "$BIN" "$LOGS"
K8S_TOOLS="kube-apiserver kube-scheduler kube-controller-manager kubectl"
CLUSTER_TOOLS="$K8S_TOOLS helm kwok"
export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

step() { echo "build-tools: $(date +%H:%M:%S) $*" >&2; }
fail() { echo "build-tools: FAILED: $1 (log: $2)" >&2; tail -n 20 "$2" >&2 || true; exit 1; }

# etcd: Debian's etcd-server 3.4 (its client protocol is what v1.33's apiserver speaks); and what
# the scripts around the cluster use: jq (reading the API's JSON), openssl (certificates), curl.
pkgs=""
command -v etcd >/dev/null 2>&1 || pkgs="$pkgs etcd-server"
command -v jq >/dev/null 2>&1 || pkgs="$pkgs jq"
command -v openssl >/dev/null 2>&1 || pkgs="$pkgs openssl"
command -v curl >/dev/null 2>&1 || pkgs="$pkgs curl"
if [ -n "$pkgs" ]; then
	step "installing from Debian:$pkgs"
	log="$LOGS/apt-packages.log"
	# shellcheck disable=SC2086
	{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs; } \
		>"$log" 2>&1 || fail "apt-get install$pkgs" "$log"
fi
ln -sf "$(command -v etcd)" "$BIN/etcd"

k8s_ldflags() {
	local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
	local f="" p
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
		f+=" -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000"
		f+=" -X $p.buildDate=1970-01-01T00:00:00Z"
	done
	echo "-s -w$f"
}

# Kubernetes: a scratch module that requires k8s.io/kubernetes and replaces each staging module
# k8s.io/NAME by its published v0.MINOR.PATCH, every other module at the version Kubernetes' own
# go.mod pins (so the binaries are built from the release's dependency set). One `go build` of
# the four commands: one command links while the next compiles.
build_k8s() {
	local mod="$CACHE/src/k8s-$K8S_VERSION" log="$LOGS/k8s-$K8S_VERSION.log"
	local t need=0
	for t in $K8S_TOOLS; do [ -x "$BIN/$t" ] || need=1; done
	[ $need = 1 ] || { step "kubernetes $K8S_VERSION: cached in $BIN"; return 0; }
	step "kubernetes $K8S_VERSION: building apiserver, scheduler, controller-manager, kubectl (about 15 min cold on 2 cores; log $log)"
	rm -rf "$mod" && mkdir -p "$mod"
	(
		set -e
		cd "$mod"
		go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >dl.json
		gomod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' dl.json)
		minor=${K8S_VERSION#v1.}
		{
			echo "module gmg-k8s-build"
			echo
			grep -E '^go [0-9]' "$gomod"
			grep -E '^godebug ' "$gomod" || true
			echo
			echo "require k8s.io/kubernetes $K8S_VERSION"
			echo
			grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" |
				awk -v v="v0.$minor" '{print "replace " $1 " => " $1 " " v}'
		} >go.mod
		cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
		go mod tidy -e
		echo "== go build $K8S_TOOLS"
		rm -rf out && mkdir out
		# shellcheck disable=SC2046
		go build -p 2 -trimpath -ldflags "$(k8s_ldflags)" -o out/ $(printf 'k8s.io/kubernetes/cmd/%s ' $K8S_TOOLS)
		for t in $K8S_TOOLS; do mv "out/$t" "$BIN/$t"; done
		rmdir out
	) >"$log" 2>&1 || fail "kubernetes $K8S_VERSION build" "$log"
}

# helm and kwok: one scratch module requiring both (each is built on the k8s.io v0.MINOR
# libraries; replaced by v0.MINOR.PATCH as above, the minimal version selection choosing one
# version of every other module between the two), so the Go build cache compiles the k8s.io
# packages they share once, and one `go build` links one while the other compiles. Their own
# go.mod pins are not Kubernetes': these are clients, built apart from the control plane.
build_clients() {
	local mod="$CACHE/src/clients-helm-$HELM_VERSION-kwok-$KWOK_VERSION" log="$LOGS/helm-$HELM_VERSION-kwok-$KWOK_VERSION.log"
	local t need=0
	for t in helm kwok; do [ -x "$BIN/$t" ] || need=1; done
	[ -f "$mod/.done" ] || need=1
	[ $need = 1 ] || { step "helm $HELM_VERSION, kwok $KWOK_VERSION: cached in $BIN"; return 0; }
	step "helm $HELM_VERSION, kwok $KWOK_VERSION: building (about 7 min cold on 2 cores; log $log)"
	rm -rf "$mod" && mkdir -p "$mod"
	(
		set -e
		cd "$mod"
		minor=${K8S_VERSION#v1.}
		minor=${minor%%.*}
		patch=${K8S_VERSION##*.}
		{
			echo "module gmg-clients-build"
			echo
			echo "go 1.24.0"
			echo
			echo "require ("
			echo "	helm.sh/helm/v3 $HELM_VERSION"
			echo "	sigs.k8s.io/kwok $KWOK_VERSION"
			echo ")"
		} >go.mod
		cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
GO
		go mod tidy -e
		# Every k8s.io/* v0.MINOR.x module the two use, at the control plane's patch release.
		go list -m -f '{{.Path}} {{.Version}}' all |
			awk -v v="v0.$minor." '$1 ~ /^k8s\.io\/[a-z0-9-]+$/ && index($2, v) == 1 { print $1 }' |
			while read -r m; do echo "replace $m => $m v0.$minor.$patch"; done >>go.mod
		go mod tidy -e
		echo "== go build helm kwok"
		rm -rf out && mkdir out
		go build -p 2 -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
			-o out/ helm.sh/helm/v3/cmd/helm sigs.k8s.io/kwok/cmd/kwok
		for t in helm kwok; do mv "out/$t" "$BIN/$t"; done
		rmdir out
		touch .done
	) >"$log" 2>&1 || fail "helm $HELM_VERSION, kwok $KWOK_VERSION build" "$log"
}

# promtool: `go install` in a module of its own (Prometheus needs newer libraries than
# Kubernetes v1.33's; sharing a module would change what Kubernetes is built with).
go_install_tool() { # name version package ldflags [build tags]
	local name=$1 ver=$2 pkg=$3 ldf=$4 tags=${5:-}
	local mod="$CACHE/src/$name-$ver" log="$LOGS/$name-$ver.log"
	if [ -x "$BIN/$name" ] && [ -f "$CACHE/src/$name-$ver/.done" ]; then
		step "$name $ver: cached"; return 0
	fi
	step "$name $ver: building (about 10 min cold on 2 cores; log $log)"
	mkdir -p "$mod"
	(
		set -e
		cd "$mod"
		GOBIN="$mod/bin" go install -trimpath -tags "$tags" -ldflags "$ldf" "$pkg@$ver"
		cp "$mod/bin/$name" "$BIN/$name.tmp"
		mv "$BIN/$name.tmp" "$BIN/$name"
		touch .done
	) >"$log" 2>&1 || fail "$name $ver build" "$log"
}

# Go: Kubernetes v1.33 needs Go >= 1.24. A Go >= 1.21 fetches a newer toolchain through the
# module proxy by itself (GOTOOLCHAIN=auto); an older one (Debian 12's golang-go is 1.19) cannot.
need_go() {
	command -v go >/dev/null 2>&1 || { echo "build-tools: FAILED: no Go toolchain (install Go >= 1.21, e.g. in /usr/local/go)" >&2; exit 1; }
	local v minor
	v=$(go env GOVERSION 2>/dev/null || true)
	minor=$(echo "${v#go}" | awk -F. '{ print ($1 > 1) ? 99 : $2 + 0 }')
	if [ "${minor:-0}" -lt 21 ]; then
		echo "build-tools: FAILED: ${v:-go} is too old to build Kubernetes $K8S_VERSION (needs >= 1.21, which fetches 1.24+ itself)" >&2
		exit 1
	fi
}

# Which groups: the arguments (cluster: kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl, helm, kwok; promtool), all of them when none is given.
groups=${*:-cluster promtool}
for g in $groups; do
	case $g in
	cluster | promtool) ;;
	*) echo "build-tools: unknown group '$g' (cluster, promtool)" >&2; exit 2 ;;
	esac
done
need=0
for g in $groups; do
	case $g in
	cluster) for t in $CLUSTER_TOOLS; do [ -x "$BIN/$t" ] || need=1; done ;;
	promtool) [ -x "$BIN/promtool" ] || need=1 ;;
	esac
done
[ $need = 0 ] || need_go
# One lock per group: a second caller (`make test` builds the tools in the background while the
# fast tests run, then the e2e waits for them) waits for the builder and then finds the cache; a
# caller of the cluster group never waits for promtool.
mkdir -p "$CACHE/locks"
for g in $groups; do
	exec 8>"$CACHE/locks/$g.lock"
	if ! flock -n 8; then
		step "$g: another build-tools.sh is building it; waiting"
		flock 8
	fi
	case $g in
	cluster) build_k8s && build_clients ;;
	promtool)
		# remove_all_sd: promtool without Prometheus' service discovery plugins (AWS, Azure, GCE,
		# Kubernetes, ...), which checking rules never uses: far fewer packages to compile.
		go_install_tool promtool "$PROMTOOL_VERSION" github.com/prometheus/prometheus/cmd/promtool \
			"-s -w -X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION" remove_all_sd
		;;
	esac
	exec 8>&-
done
step "ready in $BIN: $groups"
echo "$BIN"
