#!/usr/bin/env bash
# make bench: install nginx (Debian's, the static-200 reference the benchmark measures beside the
# webhook) when it is missing, then run gmg-bench. Debian 12, root.
#   run-bench.sh GMG_BENCH GPU_MEMORY_GUARD_BINARY [gmg-bench options]
set -euo pipefail
bench=${1:?usage: run-bench.sh GMG_BENCH BINARY [options]}
bin=${2:?usage: run-bench.sh GMG_BENCH BINARY [options]}
shift 2
if [ ! -x /usr/sbin/nginx ]; then
	echo "bench: apt-get install nginx (the static-200 reference)" >&2
	export DEBIAN_FRONTEND=noninteractive
	# The package would start nginx on port 80: a policy-rc.d that refuses service starts
	# during the install (only when the system has none), removed afterwards.
	guard=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod 755 /usr/sbin/policy-rc.d
		guard=/usr/sbin/policy-rc.d
	fi
	rc=0
	{ apt-get update -q >/dev/null && apt-get install -y -q nginx >/dev/null; } || rc=$?
	[ -z "$guard" ] || rm -f "$guard"
	[ "$rc" -eq 0 ] || exit "$rc"
fi
exec "$bench" --binary "$bin" --nginx /usr/sbin/nginx "$@"
