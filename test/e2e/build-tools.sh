#!/usr/bin/env bash
# Build and cache the control-plane tools the end-to-end suite and the demo run, in two groups:
#   cluster:  kube-apiserver, kube-scheduler, kube-controller-manager and kubectl from
#             k8s.io/kubernetes (build_k8s), etcd (build_etcd), helm and kwok (build_clients),
#             all from the Go module proxy;
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

# The control plane's Kubernetes: v1.37.2. Upstream supports 1.35-1.37; K8S_VERSION=v1.35.4 runs
# the oldest of them (docs/e2e.md, "Kubernetes versions tested").
K8S_VERSION=${K8S_VERSION:-v1.37.2}
# helm v3.22 is built on the k8s.io v0.37 libraries, kwok v0.8.0 on v0.36 (v0.7.0 on v0.33);
# build_clients moves those of the control plane's minor to its patch release, and leaves the
# others (kwok's cri-* at v0.36.1; all of them with K8S_VERSION=v1.35.x) where MVS put them.
HELM_VERSION=${HELM_VERSION:-v3.22.0}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
# etcd's server module (go.etcd.io/etcd/server/v3): its main package is the etcd binary.
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
# Prometheus' Go module: v0.316.0 is Prometheus 3.16.0 (its go.mod asks Go >= 1.26.7).
PROMTOOL_VERSION=${PROMTOOL_VERSION:-v0.316.0}
CACHE=${GMG_CACHE:-$HOME/.cache/gpu-memory-guard}
BIN="$CACHE/bin-$K8S_VERSION"
LOGS="$CACHE/logs"
mkdir -p "$BIN" "$LOGS"
K8S_TOOLS="kube-apiserver kube-scheduler kube-controller-manager kubectl"
CLUSTER_TOOLS="$K8S_TOOLS etcd helm kwok"
export PATH="/usr/local/go/bin:$PATH"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0
# The compiler's garbage collector at GOGC=400 (unless set): measured on 2026-12-05, a cold build
# of k8s.io/client-go/kubernetes and k8s.io/apiserver/pkg/server (empty GOCACHE, 2 cores) took
# 505 s of user CPU against 567 at the default 100 (wall 361 s against 386);
# -gcflags=all=-dwarf=false gained nothing (564 s). The compiles use a few GiB more at most.
export GOGC=${GOGC:-400}

step() { echo "build-tools: $(date +%H:%M:%S) $*" >&2; }
fail() { echo "build-tools: FAILED: $1 (log: $2)" >&2; tail -n 20 "$2" >&2 || true; exit 1; }
# timed FUNCTION: runs it, then says how much CPU (user + system, from /proc/$$/stat's cutime and
# cstime: the builds' processes, waited for by this shell) and wall time it took, when it built.
timed() {
	local f t0=$SECONDS c0 c1
	read -r -a f <"/proc/$$/stat"
	c0=$((f[15] + f[16]))
	"$@" || return
	read -r -a f <"/proc/$$/stat"
	c1=$((f[15] + f[16]))
	[ $((c1 - c0)) -lt 100 ] || step "$1: done in $((SECONDS - t0)) s, CPU $(((c1 - c0) / $(getconf CLK_TCK))) s"
}

# What the scripts around the cluster use: jq (reading the API's JSON), openssl (certificates),
# curl. (etcd is built from Go modules: build_etcd.)
pkgs=""
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

# etcd: built from go.etcd.io/etcd/server/v3 (its main package is the etcd server) in a scratch
# module of its own, keyed by version. Debian 12's etcd-server is 3.4.23: etcd 3.4 is out of
# support; Kubernetes v1.35 ships etcd 3.6, v1.37 ships 3.7.0 (build/dependencies.yaml) with a
# 3.7 client; kube-apiserver's storage feature check wants etcd >= 3.4.31 or 3.5.13 for watch
# progress requests (k8s.io/apiserver pkg/storage/feature). One etcd 3.6 serves each minor the
# suite runs (v1.33's client is 3.5, v1.35's 3.6, v1.37's 3.7, which speaks to a 3.6 server as
# during an etcd upgrade). etcd's own go.mod replaces its sibling
# modules by ../ paths, so `go install ...@version` refuses it; a requiring module does not.
build_etcd() {
	local mod="$CACHE/src/etcd-$ETCD_VERSION" log="$LOGS/etcd-$ETCD_VERSION.log"
	local out="$CACHE/etcd-$ETCD_VERSION/etcd"
	if [ ! -x "$out" ] || [ ! -f "$mod/.done" ]; then
		step "etcd $ETCD_VERSION: building (about 4 min cold on 2 cores; log $log)"
		rm -rf "$mod" && mkdir -p "$mod" "${out%/*}"
		(
			set -e
			cd "$mod"
			{
				echo "module gmg-etcd-build"
				echo
				echo "go 1.26.0"
				echo
				echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
			} >go.mod
			cat >tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
			go mod tidy -e
			echo "== go build etcd"
			go build -p 2 -trimpath -ldflags "-s -w" -o "$out.tmp" go.etcd.io/etcd/server/v3
			mv "$out.tmp" "$out"
			touch .done
		) >"$log" 2>&1 || fail "etcd $ETCD_VERSION build" "$log"
	else
		step "etcd $ETCD_VERSION: cached"
	fi
	ln -sf "$out" "$BIN/etcd"
}

# helm and kwok: one scratch module requiring both (each is built on the k8s.io v0.MINOR
# libraries; replaced by v0.MINOR.PATCH as above, the minimal version selection choosing one
# version of every other module between the two), so the Go build cache compiles the k8s.io
# packages they share once, and one `go build` links one while the other compiles. Their own
# go.mod pins are not Kubernetes': these are clients, built apart from the control plane.
build_clients() {
	local mod="$CACHE/src/clients-$K8S_VERSION-helm-$HELM_VERSION-kwok-$KWOK_VERSION"
	local log="$LOGS/clients-$K8S_VERSION-helm-$HELM_VERSION-kwok-$KWOK_VERSION.log"
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

# promtool: `go install` in a module of its own (Prometheus' libraries are not Kubernetes';
# sharing a module would change what Kubernetes is built with).
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

# Go: Kubernetes v1.37 and etcd v3.6.16 need Go >= 1.26 (v1.33: 1.24). A Go >= 1.21 fetches a
# newer toolchain through the module proxy by itself (GOTOOLCHAIN=auto); an older one (Debian 12's golang-go is 1.19) cannot.
need_go() {
	command -v go >/dev/null 2>&1 || { echo "build-tools: FAILED: no Go toolchain (install Go >= 1.21, e.g. in /usr/local/go)" >&2; exit 1; }
	local v minor
	v=$(go env GOVERSION 2>/dev/null || true)
	minor=$(echo "${v#go}" | awk -F. '{ print ($1 > 1) ? 99 : $2 + 0 }')
	if [ "${minor:-0}" -lt 21 ]; then
		echo "build-tools: FAILED: ${v:-go} is too old to build Kubernetes $K8S_VERSION (needs >= 1.21, which fetches the newer Go its go.mod asks for itself)" >&2
		exit 1
	fi
}

# Which groups: the arguments (cluster: kube-apiserver, kube-scheduler, kube-controller-manager,
# kubectl, etcd, helm, kwok; promtool), all of them when none is given.
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
	cluster)
		for t in $CLUSTER_TOOLS; do [ -x "$BIN/$t" ] || need=1; done
		[ "$(readlink "$BIN/etcd" || true)" = "$CACHE/etcd-$ETCD_VERSION/etcd" ] || need=1
		;;
	promtool) [ -x "$BIN/promtool" ] || need=1 ;;
	esac
done
[ $need = 0 ] || need_go
# One lock per group: a second caller (`make test` builds the tools in the background while the
# fast tests run, then the e2e waits for them) waits for the builder and then finds the cache; a
# caller of the cluster group never waits for promtool.
mkdir -p "$CACHE/locks"
for g in $groups; do
	# The cluster group's lock is per Kubernetes version: its sources, binaries and logs are, so
	# a v1.35 build never waits for a v1.37 one (the Go build cache is safe to share).
	lk=$g; [ "$g" != cluster ] || lk="cluster-$K8S_VERSION"
	exec 8>"$CACHE/locks/$lk.lock"
	if ! flock -n 8; then
		step "$g: another build-tools.sh is building it; waiting"
		flock 8
	fi
	case $g in
	cluster) timed build_k8s && timed build_etcd && timed build_clients ;;
	promtool)
		# remove_all_sd: promtool without Prometheus' service discovery plugins (AWS, Azure, GCE,
		# Kubernetes, ...), which checking rules never uses: far fewer packages to compile.
		timed go_install_tool promtool "$PROMTOOL_VERSION" github.com/prometheus/prometheus/cmd/promtool \
			"-s -w -X github.com/prometheus/common/version.Version=$PROMTOOL_VERSION" remove_all_sd
		;;
	esac
	exec 8>&-
done
step "ready in $BIN: $groups"
echo "$BIN"
