#!/usr/bin/env bash
# Build and cache the control-plane tools the end-to-end suite and the demo run:
# kube-apiserver, kube-scheduler, kube-controller-manager and kubectl from
# k8s.io/kubernetes (Go module proxy), helm and kwok through `go install`, etcd from Debian; and
# promtool (github.com/prometheus/prometheus), which checks the chart's PromQL (test/e2e/promql-check.sh).
#
# Cache: $GMG_CACHE (default ~/.cache/gpu-memory-guard), one folder per tool and version, never
# inside the repository. A second run reuses it. Prints one line per step and, on failure, the
# step and the path of its log. Prints nothing else on stdout but the bin folder on the last
# line, so callers can do: BIN=$(test/e2e/build-tools.sh | tail -n 1).
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
export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

step() { echo "build-tools: $*" >&2; }
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

build_k8s() {
	local mod="$CACHE/src/k8s-$K8S_VERSION" log="$LOGS/k8s-$K8S_VERSION.log"
	local need=0 t
	for t in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
		[ -x "$BIN/$t" ] || need=1
	done
	[ $need = 1 ] || { step "kubernetes $K8S_VERSION: cached in $BIN"; return 0; }
	step "kubernetes $K8S_VERSION: building apiserver, scheduler, controller-manager, kubectl (10-25 min cold; log $log)"
	mkdir -p "$mod"
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
		for t in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
			echo "== go build $t"
			go build -p 2 -trimpath -ldflags "$(k8s_ldflags)" -o "$BIN/$t.tmp" "k8s.io/kubernetes/cmd/$t"
			mv "$BIN/$t.tmp" "$BIN/$t"
		done
	) >"$log" 2>&1 || fail "kubernetes $K8S_VERSION build" "$log"
}

go_install_tool() { # name version package ldflags [build tags]
	local name=$1 ver=$2 pkg=$3 ldf=$4 tags=${5:-}
	local mod="$CACHE/src/$name-$ver" log="$LOGS/$name-$ver.log"
	if [ -x "$BIN/$name" ] && [ -f "$CACHE/src/$name-$ver/.done" ]; then
		step "$name $ver: cached"; return 0
	fi
	step "$name $ver: building (log $log)"
	mkdir -p "$mod"
	(
		set -e
		cd "$mod"
		GOBIN="$mod/bin" go install -trimpath -tags "$tags" -ldflags "$ldf" "$pkg@$ver"
		cp "$mod/bin/$name" "$BIN/$name"
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

need_all=0
for t in kube-apiserver kube-scheduler kube-controller-manager kubectl helm kwok promtool; do
	[ -x "$BIN/$t" ] || need_all=1
done
[ $need_all = 0 ] || need_go
build_k8s
go_install_tool helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
	"-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
go_install_tool kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok "-s -w"
# remove_all_sd: promtool without Prometheus' service discovery plugins (AWS, Azure, GCE,
# Kubernetes, ...), which checking rules never uses: far fewer packages to compile.
go_install_tool promtool "$PROMTOOL_VERSION" github.com/prometheus/prometheus/cmd/promtool \
	"-s -w -X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION" remove_all_sd
step "all tools ready in $BIN"
echo "$BIN"
