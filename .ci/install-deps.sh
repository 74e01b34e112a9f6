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
if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
	echo "install-deps: Go is needed to build the local control plane; installing golang-go" >&2
	apt-get install -y -q golang-go >/dev/null
fi
