#!/usr/bin/env bash
# check-docs.sh must fail when docs/server.md lacks a flag's, a metric's or a reason's row, and
# when a README "Not built yet" bullet has no line in not-built.list: run it on copies with one
# of each removed and expect exit 1 with the four messages. Registered as docs_drift_selftest.
#
#   test/docs/selftest.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN SOURCE_DIR
set -u
BIN=${1:?usage: selftest.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN SOURCE_DIR}
DOUBLE=${2:?}
SRC=${3:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/gmg-docs-self-XXXXXX")
trap 'rm -rf "$T"' EXIT
# The server.md with the --policies row, the policies{state} row and TierYield removed.
grep -v '^| `--policies on' "$SRC/docs/server.md" | grep -v '^| `policies{state}`' |
	sed 's/`TierYield`//' >"$T/server.md"
# The list without its HTTP/1.1 line.
grep -v '^HTTP/1.1 only' "$SRC/test/docs/not-built.list" >"$T/not-built.list"
GMG_SERVER_MD=$T/server.md GMG_NOT_BUILT_LIST=$T/not-built.list \
	bash "$SRC/test/docs/check-docs.sh" "$BIN" "$DOUBLE" "$SRC" >"$T/out" 2>&1
rc=$?
fails=0
[ "$rc" -eq 1 ] || { echo "selftest: check-docs.sh exited $rc, want 1" >&2; fails=1; }
for want in "flag: --policies is in serve --help but not in docs/server.md's flag table" \
	"metric: policies is in the binary's /metrics but not in docs/server.md's metrics table" \
	"reason: TierYield is in the code but not in docs/server.md's reason list" \
	"(\"- HTTP/1.1 only (libmicrohttpd); the API server falls back to it....\") holds 0 phrases"; do
	grep -qF -- "$want" "$T/out" || { echo "selftest: no \"$want\" in:" >&2; fails=1; }
done
[ "$fails" -eq 0 ] || { cat "$T/out" >&2; exit 1; }
echo "selftest: check-docs.sh caught the missing flag, metric, reason and not-built entry"
