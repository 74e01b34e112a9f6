#!/usr/bin/env bash
# Install the Debian 12 packages the build, the tests and the demo need (idempotent; root).
# clang + libclang-rt-14-dev: the libFuzzer targets (make fuzz; the runtime libclang_rt.fuzzer
# is in libclang-rt-14-dev, only recommended by clang-14).
# debootstrap + umoci: `make image` (tools/image/build.sh); runc: e2e test 18 runs that image;
# skopeo: reads the archive back in test 18, and pushes it (README).
# libfaketime: integ_clock_skew runs replicas whose clocks are 90 s off (LD_PRELOAD).
set -euo pipefail
pkgs="build-essential cmake pkg-config libmicrohttpd-dev libgnutls28-dev libssl-dev libcjson-dev
libcurl4-openssl-dev libcmocka-dev libyaml-dev curl openssl clang-format
gnutls-bin ca-certificates git jq iproute2 procps psmisc
clang libclang-rt-14-dev
debootstrap umoci skopeo runc libfaketime"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "install-deps: apt-get install$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q $missing >/dev/null
fi
# Go >= 1.21 builds the local control plane (test/e2e/build-tools.sh; it fetches the newer Go
# Kubernetes asks for itself). Debian 12's golang-go is 1.19, too old: without a Go >= 1.21 on
# PATH or in /usr/local/go, the official toolchain is fetched from the Go module proxy (the
# module golang.org/toolchain, what GOTOOLCHAIN downloads) into GMG_GO_ROOT (/usr/local/go).
# A module zip keeps no file modes: the go command sets bin/ and pkg/tool/ executable, so do we.
GMG_GO_TOOLCHAIN=${GMG_GO_TOOLCHAIN:-go1.26.8}
GMG_GO_ROOT=${GMG_GO_ROOT:-/usr/local/go}
go_new_enough() {
	local v minor
	v=$("$1" env GOVERSION 2>/dev/null) || return 1
	minor=$(echo "${v#go}" | awk -F. '{ print ($1 > 1) ? 99 : $2 + 0 }')
	[ "${minor:-0}" -ge 21 ]
}
if ! { command -v go >/dev/null 2>&1 && go_new_enough go; } &&
	! go_new_enough "$GMG_GO_ROOT/bin/go"; then
	proxy=${GOPROXY:-https://proxy.golang.org}
	proxy=${proxy%%[,|]*}
	case $proxy in direct | off | "") proxy=https://proxy.golang.org ;; esac
	zip="v0.0.1-$GMG_GO_TOOLCHAIN.linux-$(dpkg --print-architecture)"
	echo "install-deps: no Go >= 1.21; fetching $GMG_GO_TOOLCHAIN from $proxy (golang.org/toolchain) into $GMG_GO_ROOT" >&2
	command -v unzip >/dev/null 2>&1 || apt-get install -y -q unzip >/dev/null
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	curl -fsSL --retry 3 "$proxy/golang.org/toolchain/@v/$zip.zip" -o "$tmp/go.zip"
	unzip -q "$tmp/go.zip" -d "$tmp/x"
	src="$tmp/x/golang.org/toolchain@$zip"
	chmod -R u+rwX,go+rX "$src"
	chmod +x "$src"/bin/* "$src"/pkg/tool/*/*
	rm -rf "$GMG_GO_ROOT"
	mkdir -p "$(dirname "$GMG_GO_ROOT")"
	mv "$src" "$GMG_GO_ROOT"
	"$GMG_GO_ROOT/bin/go" version >&2
fi
