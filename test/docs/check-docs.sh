#!/usr/bin/env bash
# Docs that cannot drift: docs/server.md and the README checked against the code and a running
# binary. Registered with ctest as docs_drift (so `make unit-integration`, `make asan` and
# `make test` run it).
#
#   test/docs/check-docs.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN SOURCE_DIR
#
# 1. Flags: every `--flag` of `serve --help` has a row in docs/server.md's flag table, and every
#    row is a flag of `serve --help`; the README's "Flags of serve" block is the help's text.
# 2. Metrics: the binary is started against the API server test double (as test/attack does),
#    one placement is admitted (so the per-node series have samples), and /metrics is read.
#    Every family (its `# TYPE` line) has a row in docs/server.md's metrics table written
#    `name{label,label}` with its type; the row's label keys are the samples' (`le` of histograms
#    aside); every row is a family the binary exports. A family without a sample is checked by
#    name and type only.
# 3. Reasons: the `reason` list of docs/server.md's Logs section is the set of reason codes the
#    webhook writes: the literal reasons of outcome_allow()/outcome_deny() in
#    lib/admission/webhook.c and lib/engine/{outcome,placer}.c, and the
#    core's decision reasons (`reason = "..."` in lib/core/policy.c, gpupolicy.c and placement.c,
#    and policyset.c's refuse()/add_audit() reasons)
#    that reach it; InvalidInput is left out (the core returns it only with an error, which
#    the webhook logs as InvalidCapacity).
# 4. "Not built yet": each bullet of the README's "Not built yet / limitations" section holds
#    exactly one phrase of test/docs/not-built.list and each phrase is in one bullet, so a claim
#    is not added or dropped without the list; each entry's check (a shell command run in
#    SOURCE_DIR with $BIN set) must still hold, so a claim goes stale loudly when the thing lands.
#
# Needs bash, curl, jq. Every process started here is stopped by its pid on exit.
set -u

BIN=${1:?usage: check-docs.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN SOURCE_DIR}
DOUBLE=${2:?usage: check-docs.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN SOURCE_DIR}
SRC=${3:?usage: check-docs.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN SOURCE_DIR}
SERVER_MD=${GMG_SERVER_MD:-$SRC/docs/server.md} # overridable to show the check failing
README=${GMG_README:-$SRC/README.md}
LIST=${GMG_NOT_BUILT_LIST:-$SRC/test/docs/not-built.list}
for tool in curl jq; do
	command -v "$tool" >/dev/null || {
		echo "check-docs: $tool is needed" >&2
		exit 1
	}
done

T=$(mktemp -d "${TMPDIR:-/tmp}/gmg-docs-XXXXXX")
GMG_PID= DOUBLE_PID= FAILS=0
cleanup() {
	[ -n "$GMG_PID" ] && kill "$GMG_PID" 2>/dev/null
	[ -n "$DOUBLE_PID" ] && kill "$DOUBLE_PID" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	FAILS=$((FAILS + 1))
	echo "check-docs: $*" >&2
}

# The lines of section "## $2" of markdown file $1 (up to the next "## ").
section() {
	awk -v h="## $2" '$0 == h {f = 1; next} /^## / {f = 0} f' "$1"
}

# Report the differences of two sorted lists: $1 what, $2 file A (name), $3 file B (name).
compare() {
	local what=$1 a=$2 b=$3 an=$4 bn=$5
	comm -23 "$a" "$b" | while read -r x; do fail "$what: $x is in $an but not in $bn"; done
	comm -13 "$a" "$b" | while read -r x; do fail "$what: $x is in $bn but not in $an"; done
	[ "$(comm -3 "$a" "$b" | wc -l)" -eq 0 ]
}

# ---- 1. flags ------------------------------------------------------------------------------
"$BIN" serve --help >"$T/help" 2>&1 || true
grep -oE '^  --[a-z][a-z-]*' "$T/help" | sed 's/^  //' | sort -u >"$T/flags.help"
section "$SERVER_MD" "Command line" | grep -oE '^\| `--[a-z][a-z-]*' | sed 's/^| `//' |
	sort -u >"$T/flags.doc"
[ -s "$T/flags.help" ] || fail "no flag found in serve --help"
[ -s "$T/flags.doc" ] || fail "no flag row found in docs/server.md's Command line section"
compare "flag" "$T/flags.help" "$T/flags.doc" "serve --help" "docs/server.md's flag table" ||
	FAILS=$((FAILS + 1))

# The README's copy of the flags (its Command line section) is serve --help's, line for line.
awk '/^Flags of serve/ {f = 1} f && /^```/ {exit} f' "$README" >"$T/flags.readme"
awk '/^Flags of serve/ {f = 1} f' "$T/help" >"$T/flags.helptext"
if ! diff -u "$T/flags.helptext" "$T/flags.readme" >"$T/flags.diff"; then
	fail "the README's \"Flags of serve\" block differs from serve --help (- help, + README):"
	sed -n '3,40p' "$T/flags.diff" >&2
fi

# ---- 2. metrics ----------------------------------------------------------------------------
cat >"$T/state.json" <<'EOF'
{"nodes": [
 {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "drift-n1", "labels":
   {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "10240"}},
  "status": {"allocatable": {"nvidia.com/gpu": "1"}}}
], "pods": []}
EOF
"$BIN" certs --out-dir "$T/certs" --ip 127.0.0.1 >/dev/null || fail "cannot make certificates"
mkdir -p "$T/api"
"$DOUBLE" --dir "$T/api" --state "$SRC/test/data" --state "$T/state.json" >"$T/api/url" \
	2>"$T/api/log" &
DOUBLE_PID=$!
for _ in $(seq 100); do
	[ -s "$T/api/url" ] && [ -s "$T/api/kubeconfig" ] && break
	sleep 0.1
done
"$BIN" serve --listen 127.0.0.1:0 --health-listen 127.0.0.1:0 --tls-cert-file "$T/certs/tls.crt" \
	--tls-key-file "$T/certs/tls.key" --kubeconfig "$T/api/kubeconfig" --drain-timeout 0s \
	--reservations shared --reservations-namespace gpu-memory-guard \
	2>"$T/gmg.log" &
GMG_PID=$!
PORT= HPORT=
for _ in $(seq 150); do
	if grep -q '"msg":"serving"' "$T/gmg.log"; then
		PORT=$(grep '"msg":"serving"' "$T/gmg.log" | head -n 1 | jq -r .listen_port)
		HPORT=$(grep '"msg":"serving"' "$T/gmg.log" | head -n 1 | jq -r .health_port)
		break
	fi
	kill -0 "$GMG_PID" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$PORT" ]; then
	fail "the binary did not start: $(tail -n 5 "$T/gmg.log")"
else
	# One placement admitted (so the per-node and shared-record series have samples), retried
	# while the webhook cannot decide yet (cache or policies not read: refused meanwhile).
	admitted=0
	for i in $(seq 300); do
		jq --arg uid "docs-drift-$i" '.request.uid = $uid | .request.object.spec.nodeName = "drift-n1" |
		    (.request.object.spec.containers[].env[]? | select(.name == "GPU_MEMORY_LIMIT") |
		     .value) = "1Gi"' "$SRC/test/data/review-pod-create-nodename.json" >"$T/review.json"
		curl -sS -m 10 --cacert "$T/certs/ca.crt" -H 'Content-Type: application/json' \
			--data-binary "@$T/review.json" "https://127.0.0.1:$PORT/validate" >"$T/answer.json" 2>&1
		if jq -e '.response.allowed == true' "$T/answer.json" >/dev/null 2>&1; then
			admitted=1
			break
		fi
		sleep 0.1
	done
	[ "$admitted" = 1 ] ||
		fail "the placement on drift-n1 was not admitted in 30 s: $(cat "$T/answer.json")"
	curl -sS -m 10 "http://127.0.0.1:$HPORT/metrics" >"$T/metrics" ||
		fail "GET /metrics failed"
fi
# family type, from the # TYPE lines
sed -n 's/^# TYPE gpu_memory_guard_\([a-z_]*\) \([a-z]*\)$/\1 \2/p' "$T/metrics" 2>/dev/null |
	sort -u >"$T/types.bin"
# family{keys} of each sample (histogram suffixes folded into the family, le dropped)
awk -v types="$T/types.bin" '
	BEGIN { while ((getline l < types) > 0) { split(l, a, " "); type[a[1]] = a[2] } }
	/^gpu_memory_guard_/ {
		name = $1; sub(/^gpu_memory_guard_/, "", name); labels = ""
		if (index(name, "{") > 0) { labels = substr(name, index(name, "{") + 1); name = substr(name, 1, index(name, "{") - 1) }
		base = name; sub(/_(bucket|sum|count)$/, "", base)
		if (type[base] == "histogram") name = base
		n = split(labels, kv, ","); keys = ""
		for (i = 1; i <= n; i++) { k = kv[i]; sub(/=.*/, "", k); if (k != "le" && k != "") keys = keys (keys == "" ? "" : ",") k }
		print name "{" keys "}"
	}' "$T/metrics" 2>/dev/null | awk -F'[{}]' '{ n = split($2, k, ","); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (k[j] < k[i]) { t = k[i]; k[i] = k[j]; k[j] = t } s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? "," : "") k[i]; print $1 "{" s "}" }' |
	sort -u >"$T/series.bin"
# rows: | `name{a,b}` | type | ...  -> "name{a,b} type" (label keys sorted)
section "$SERVER_MD" "Metrics" | sed -n 's/^| `\([a-z_]*\)\({[a-z_,]*}\)\{0,1\}` | \([a-z]*\) |.*/\1\2 \3/p' |
	awk '{ name = $1; keys = ""; if (index(name, "{") > 0) { keys = substr(name, index(name, "{") + 1); sub(/}$/, "", keys); name = substr(name, 1, index(name, "{") - 1) }
	       n = split(keys, k, ","); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (k[j] < k[i]) { t = k[i]; k[i] = k[j]; k[j] = t }
	       s = ""; for (i = 1; i <= n; i++) s = s (i > 1 ? "," : "") k[i]; print name "{" s "} " $2 }' |
	sort -u >"$T/rows.doc"
[ -s "$T/types.bin" ] || fail "no metric family read from the running binary"
[ -s "$T/rows.doc" ] || fail "no metric row found in docs/server.md's Metrics section"
awk '{ print $1 }' "$T/types.bin" | sort -u >"$T/fam.bin"
sed 's/{.*//' "$T/rows.doc" | sort -u >"$T/fam.doc"
compare "metric" "$T/fam.bin" "$T/fam.doc" "the binary's /metrics" "docs/server.md's metrics table" ||
	FAILS=$((FAILS + 1))
while read -r row type; do
	fam=${row%%\{*}
	bt=$(awk -v f="$fam" '$1 == f { print $2 }' "$T/types.bin")
	[ -z "$bt" ] || [ "$bt" = "$type" ] ||
		fail "metric $fam: docs/server.md says $type, the binary exports a $bt"
	seen=$(grep "^$fam{" "$T/series.bin" | sort -u)
	[ -z "$seen" ] && continue
	echo "$seen" | grep -qxF "$row" ||
		fail "metric $fam: docs/server.md writes $row, the binary's samples have $(echo "$seen" | tr '\n' ' ')"
done <"$T/rows.doc"

# ---- 3. reasons ----------------------------------------------------------------------------
{
	perl -0777 -ne 'while (/\boutcome_allow\(\s*(?:&x->|\w+->)?o,\s*([^;]*?)\);/sg) { my $a = $1; print "$1\n" while $a =~ /"([A-Za-z]+)"/g }
	                while (/\boutcome_deny\(\s*(?:&x->|\w+->)?o,\s*\w+,\s*\d+,\s*"([A-Za-z]+)"/sg) { print "$1\n" }' \
		"$SRC/lib/admission/webhook.c" "$SRC/lib/engine/outcome.c" "$SRC/lib/engine/placer.c"
	grep -ohE 'reason = "[A-Za-z]+"' "$SRC/lib/core/policy.c" "$SRC/lib/core/gpupolicy.c" \
		"$SRC/lib/core/placement.c" | sed 's/reason = "\(.*\)"/\1/'
	grep -ohE '(refuse|add_audit)\(out, [a-z>-]+, "[A-Za-z]+"' "$SRC/lib/core/policyset.c" |
		sed 's/.*"\(.*\)"/\1/'
} | grep -vx 'InvalidInput' | sort -u >"$T/reasons.code"
section "$SERVER_MD" "Logs" | awk '/^`reason` is one of:/ {f = 1} f && /^$/ {exit} f' |
	sed 's/^`reason` is one of://' | grep -oE '`[A-Za-z]+`' | tr -d '`' | sort -u >"$T/reasons.doc"
[ -s "$T/reasons.code" ] || fail "no reason code found in the code"
[ -s "$T/reasons.doc" ] || fail "no \"\`reason\` is one of:\" list in docs/server.md's Logs section"
compare "reason" "$T/reasons.code" "$T/reasons.doc" "the code" "docs/server.md's reason list" ||
	FAILS=$((FAILS + 1))

# ---- 4. "Not built yet" --------------------------------------------------------------------
# The section's bullets, one per line.
section "$README" "Not built yet / limitations" |
	awk '/^- / { if (b != "") print b; b = $0; next } /^  / && b != "" { sub(/^  +/, " "); b = b $0; next } { if (b != "") print b; b = "" } END { if (b != "") print b }' \
		>"$T/bullets"
[ -s "$T/bullets" ] || fail "no bullet in the README's \"Not built yet / limitations\" section"
n=0
while IFS='|' read -r phrase check; do
	phrase=$(echo "$phrase" | sed 's/^ *//; s/ *$//')
	check=$(echo "$check" | sed 's/^ *//')
	[ -z "$phrase" ] && continue
	case $phrase in \#*) continue ;; esac
	n=$((n + 1))
	hits=$(grep -cF -- "$phrase" "$T/bullets")
	[ "$hits" -eq 1 ] || fail "not-built.list: \"$phrase\" is in $hits bullets of the README's Not built yet section (want 1)"
	echo "$phrase" >>"$T/phrases"
	if [ -n "$check" ] && ! (cd "$SRC" && BIN=$BIN bash -c "$check") >/dev/null 2>&1; then
		fail "not-built.list: the claim \"$phrase\" no longer holds (check failed: $check): update the README and the list"
	fi
done <"$LIST"
[ "$n" -gt 0 ] || fail "not-built.list has no entry"
i=0
while read -r b; do
	i=$((i + 1))
	k=0
	while read -r p; do
		if grep -qF -- "$p" <<<"$b"; then k=$((k + 1)); fi
	done <"$T/phrases"
	[ "$k" -eq 1 ] || fail "README Not built yet bullet $i (\"${b:0:70}...\") holds $k phrases of test/docs/not-built.list (want 1): add it to the list"
done <"$T/bullets"

if [ "$FAILS" -gt 0 ]; then
	echo "check-docs: $FAILS problem(s)" >&2
	exit 1
fi
echo "check-docs: flags ($(wc -l <"$T/flags.help")), metrics ($(wc -l <"$T/fam.bin")), reasons ($(wc -l <"$T/reasons.code")), not-built claims ($n): docs match"
