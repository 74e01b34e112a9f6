#!/usr/bin/env bash
# PromQL check: every expression of the chart's PrometheusRule and Grafana dashboard parses, and
# uses only metrics and labels the binary really exports.
#
# Usage: promql-check.sh /abs/path/to/gpu-memory-guard   (the build folder beside it must hold
#        test/integration/apiserver-double: `make build` builds it)
#
# 1. A real scrape: the binary runs on loopback against the integration tests' API server double
#    (test/data and an empty node), admits one placement and /metrics is read, once with
#    --reservations shared and once with local (each mode fills its own reservation series): the
#    metric names (# TYPE lines, histograms with _bucket, _sum, _count) and each metric's label
#    names (its samples).
# 2. The chart rendered by the cached helm with prometheusRule, serviceMonitor and
#    grafanaDashboard on; the dashboard ConfigMap must hold dashboards/gpu-memory-guard.json as is.
# 3. promtool (built by build-tools.sh) `check rules` on the rendered PrometheusRule's groups,
#    `test rules` with each test/e2e/promql-tests/*.yaml (an alert's firing, series in), and
#    on a rules file made from the dashboard's expressions, each a recording rule (Grafana's
#    $__rate_interval, $namespace and $node replaced by 5m and .*), template variable queries
#    (label_values(SELECTOR, label)) by their selector.
# 4. Every gpu_memory_guard_* name in any expression is in the scrape, and every label name in a
#    selector or a by/without clause is one of the scrape's labels of the expression's metrics or
#    a label Prometheus adds to a target (namespace, pod, instance, job, service, endpoint,
#    container): a renamed metric or label fails here.
# Prints one line per check and "promql-check: N passed, 0 failed"; exit 1 on any failure.
set -euo pipefail

GMG=${1:?usage: promql-check.sh /abs/path/to/gpu-memory-guard}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CHART="$ROOT/helm/gpu-memory-guard"
DOUBLE="$(dirname "$GMG")/test/integration/apiserver-double"
TARGET_LABELS="namespace pod instance job service endpoint container"
[ -x "$DOUBLE" ] || { echo "promql-check: $DOUBLE missing (make build)" >&2; exit 1; }

TOOLS=$(bash "$ROOT/test/e2e/build-tools.sh" cluster promtool | tail -n 1)
HELM="$TOOLS/helm"
PROMTOOL="$TOOLS/promtool"
W=$(mktemp -d /tmp/gmg-promql.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ -n "${GMG_KEEP_TMP:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

passed=0
failed=0
ok() { echo "promql-check: ok: $*"; passed=$((passed + 1)); }
bad() { echo "promql-check: FAILED: $*"; failed=$((failed + 1)); }

# --- 1. A real scrape ------------------------------------------------------------------------
# test/data's node is over its limit; a second, empty node of the same kind takes the placement.
mkdir -p "$W/api" "$W/state"
jq '.metadata.name = "gpu-node-empty" | .metadata.uid = "5a0e2f6c-0000-4000-8000-00000000e0e0"' \
	"$ROOT/test/data/node-gpu-node-a.json" >"$W/state/node-gpu-node-empty.json"
jq '.request.object.spec.nodeName = "gpu-node-empty"' "$ROOT/test/data/review-pod-create-nodename.json" \
	>"$W/review-in.json"
"$DOUBLE" --dir "$W/api" --state "$ROOT/test/data" --state "$W/state" >"$W/api.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -s "$W/api/kubeconfig" ] && break; sleep 0.1; done
"$GMG" certs --out-dir "$W/certs" --ip 127.0.0.1 >/dev/null
# scrape MODE: serve with --reservations MODE, one placement admitted (so the per-node
# reservation series have samples: node_reserved_bytes comes from the local ledger,
# reservation_record_entries from the shared record), then /metrics into $W/metrics-MODE.txt.
scrape() {
	local mode=$1 log="$W/serve-$1.log" hp="" lp="" pid
	"$GMG" serve --listen 127.0.0.1:0 --health-listen 127.0.0.1:0 \
		--tls-cert-file "$W/certs/tls.crt" --tls-key-file "$W/certs/tls.key" \
		--kubeconfig "$W/api/kubeconfig" --reservations "$mode" \
		--reservations-namespace gpu-memory-guard >"$log" 2>&1 &
	pid=$!
	pids+=("$pid")
	for _ in $(seq 100); do
		hp=$(sed -n 's/.*"msg":"serving".*"health_port":\([0-9]*\).*/\1/p' "$log" | head -n 1)
		[ -n "$hp" ] && break
		sleep 0.1
	done
	lp=$(sed -n 's/.*"msg":"serving".*"listen_port":\([0-9]*\).*/\1/p' "$log" | head -n 1)
	[ -n "$hp" ] && [ -n "$lp" ] || { cat "$log" >&2; echo "promql-check: the binary did not start" >&2; exit 1; }
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$hp/metrics" | grep -q '^gpu_memory_guard_cache_synced{resource="pods"} 1' && break
		sleep 0.1
	done
	curl -sf --cacert "$W/certs/ca.crt" -H 'Content-Type: application/json' \
		--data-binary "@$W/review-in.json" "https://127.0.0.1:$lp/validate" >"$W/review-$mode.json" ||
		{ cat "$log" >&2; echo "promql-check: the review failed" >&2; exit 1; }
	jq -e '.response.allowed' "$W/review-$mode.json" >/dev/null ||
		{ cat "$W/review-$mode.json" >&2; echo "promql-check: the placement was refused" >&2; exit 1; }
	curl -sf "http://127.0.0.1:$hp/metrics" >"$W/metrics-$mode.txt"
	kill "$pid"
}
scrape shared
scrape local
cat "$W/metrics-shared.txt" "$W/metrics-local.txt" >"$W/metrics.txt"
awk '$1 == "#" && $2 == "TYPE" { print $3; if ($4 == "histogram") { print $3 "_bucket"; print $3 "_sum"; print $3 "_count" } }' \
	"$W/metrics.txt" | sort -u >"$W/names.txt"
# "metric label" per label name seen on a sample.
grep -v '^#' "$W/metrics.txt" | sed -n 's/^\([a-z_:0-9]*\){\(.*\)} .*/\1 \2/p' |
	awk '{ n = split($2, kv, ","); for (i = 1; i <= n; i++) { split(kv[i], p, "="); print $1, p[1] } }' |
	sort -u >"$W/labels.txt"
echo "promql-check: scraped $(wc -l <"$W/names.txt") metric names, $(awk '{ print $1 }' "$W/labels.txt" | sort -u | wc -l) of them with labels, from the binary (--reservations shared and local)"

# --- 2. The chart ----------------------------------------------------------------------------
"$HELM" template gmg "$CHART" --namespace gpu-memory-guard --kube-version "$("$TOOLS/kube-apiserver" --version | awk '{ print $2 }')" \
	--set prometheusRule.enabled=true --set serviceMonitor.enabled=true \
	--set grafanaDashboard.enabled=true >"$W/chart.yaml"
# A document's lines (without the "---"), by its kind.
doc() { awk -v k="kind: $1" '/^---/ { if (found) exit; buf = ""; next } { buf = buf $0 "\n" } $0 == k { found = 1 } END { if (found) printf "%s", buf }' "$W/chart.yaml"; }
doc PrometheusRule | awk '/^spec:/ { on = 1; next } on { sub(/^  /, ""); print }' >"$W/rules.yaml"
awk '/^  gpu-memory-guard.json: \|-$/ { on = 1; next } on && !/^    / { exit } on { sub(/^    /, ""); print }' \
	"$W/chart.yaml" >"$W/dashboard.json"
if [ -s "$W/rules.yaml" ]; then ok "the chart renders a PrometheusRule"; else bad "no PrometheusRule rendered"; fi
if cmp -s <(jq -S . "$W/dashboard.json" 2>&1) <(jq -S . "$CHART/dashboards/gpu-memory-guard.json"); then
	ok "the dashboard ConfigMap holds dashboards/gpu-memory-guard.json"
else
	bad "the dashboard ConfigMap differs from dashboards/gpu-memory-guard.json"
fi

# --- 3. promtool -----------------------------------------------------------------------------
if out=$("$PROMTOOL" check rules "$W/rules.yaml" 2>&1); then
	ok "promtool check rules: PrometheusRule ($(grep -c '^ *- alert:' "$W/rules.yaml") alerts; $(echo "$out" | grep -o 'SUCCESS.*' | head -n 1))"
else
	bad "promtool check rules on the PrometheusRule:"; echo "$out"
fi
# promtool test rules: each test/e2e/promql-tests/*.yaml against the rendered rules (series in,
# alerts out at given times), beside rules.yaml so its rule_files entry finds them.
for t in "$ROOT"/test/e2e/promql-tests/*.yaml; do
	cp "$t" "$W/test-$(basename "$t")"
	if out=$("$PROMTOOL" test rules "$W/test-$(basename "$t")" 2>&1); then
		ok "promtool test rules: $(basename "$t")"
	else
		bad "promtool test rules $(basename "$t"):"; echo "$out"
	fi
done
jq -r '[.. | objects | select(has("expr")) | .expr] + [.templating.list[] | select(.type == "query") | .query.query | sub("^label_values\\((?<s>.*), *[a-zA-Z_]+\\)$"; "\(.s)")] | .[]' \
	"$W/dashboard.json" | sed -e 's/\$__rate_interval/5m/g' -e 's/\$namespace/.*/g' -e 's/\$node/.*/g' >"$W/dash-exprs.txt"
jq -Rn '{groups: [{name: "dashboard", rules: [inputs | {record: "gmg_dashboard_expr", expr: .}]}]}' \
	<"$W/dash-exprs.txt" >"$W/dash-rules.json"
if out=$("$PROMTOOL" check rules "$W/dash-rules.json" 2>&1); then
	ok "promtool check rules: dashboard ($(wc -l <"$W/dash-exprs.txt") expressions as recording rules)"
else
	bad "promtool check rules on the dashboard's expressions:"; echo "$out"
fi

# --- 4. Names and labels -----------------------------------------------------------------------
sed -n 's/^ *expr: *//p' "$W/rules.yaml" >"$W/rule-exprs.txt"
cat "$W/rule-exprs.txt" "$W/dash-exprs.txt" >"$W/all-exprs.txt"
[ "$(grep -c . "$W/rule-exprs.txt")" -eq "$(grep -c '^ *expr:' "$W/rules.yaml")" ] ||
	bad "a rule's expr is not on one line (the name check reads one-line exprs)"
missing=$(grep -o 'gpu_memory_guard_[a-zA-Z0-9_]*' "$W/all-exprs.txt" | sort -u | comm -23 - "$W/names.txt")
if [ -z "$missing" ]; then
	ok "every metric name is exported ($(grep -o 'gpu_memory_guard_[a-zA-Z0-9_]*' "$W/all-exprs.txt" | sort -u | wc -l) names)"
else
	bad "metric names the binary does not export: $(echo $missing)"
fi
label_errors=0
while IFS= read -r e; do
	metrics=$(echo "$e" | grep -o 'gpu_memory_guard_[a-zA-Z0-9_]*' | sort -u)
	known="$TARGET_LABELS le $(for m in $metrics; do awk -v m="$m" '$1 == m { print $2 }' "$W/labels.txt"; done | tr '\n' ' ')"
	used=$( { echo "$e" | grep -o '{[^}]*}' | grep -oE '[a-zA-Z_][a-zA-Z0-9_]* *(=~|!~|!=|=)' | grep -oE '^[a-zA-Z_][a-zA-Z0-9_]*' || true
		echo "$e" | grep -oE '(by|without) *\([^)]*\)' | sed -E 's/^(by|without) *\(//; s/\)$//' | tr ',' '\n' | tr -d ' ' || true; } | sort -u)
	for l in $used; do
		case " $known " in *" $l "*) ;; *) echo "promql-check:   label $l not on $(echo $metrics): $e"; label_errors=$((label_errors + 1)) ;; esac
	done
done <"$W/all-exprs.txt"
if [ "$label_errors" -eq 0 ]; then
	ok "every label in a selector or by clause is exported or a target label ($(grep -c . "$W/all-exprs.txt") expressions)"
else
	bad "$label_errors label(s) not exported"
fi

echo "promql-check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
