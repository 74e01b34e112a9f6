#!/usr/bin/env bash
# make bench-scheduler (a benchmark, not a test; issue 23): the real kube-scheduler and
# kube-apiserver of the e2e cluster (test/e2e/cluster.sh, kwok nodes), 80 fake H100 80GB nodes
# time-sliced 8 ways (8 slots each, but 7 x 10Gi is what fits under 90% of 79.6Gi), 640 pods of
# 10Gi created at once (560 fit). In one run, in turn, each configuration:
#   none      no webhook, kube-scheduler without the extender (the baseline)
#   wh-1      the webhook (1 replica, local reservations), no extender
#   ext-1     the webhook and kube-scheduler's extender at it (docs/scheduler.md's configuration)
#   wh-2      2 replicas, --reservations shared, behind test/e2e/rrproxy (per-connection round
#             robin, as a Service balances): the default install, no extender
#   ext-2     the same with the extender at the proxy
# Per configuration: pods bound, time from the first create to the last binding, Bindings the
# webhook refused, nodes over their limit (recomputed from `kubectl get pods -o json` by
# test/e2e/usage.jq), the binding rate as a ratio to the no-guard run of the same round, the
# scheduler's mean scheduling attempt and extender time (its /metrics), the webhook's new TLS
# connections and Lease writes/conflicts, and the machine's load (uptime).
#
# Usage: bench-scheduler.sh /abs/path/to/gpu-memory-guard [ROUNDS]
# Environment: BENCH_SCHED_ROUNDS (default 2), BENCH_SCHED_CONFIGS (default
# "none wh-1 ext-1 wh-2 ext-2"), BENCH_SCHED_NODES (80), BENCH_SCHED_PODS (640),
# GMG_E2E_STATE (the cluster's state folder: its own by default, so that an e2e cluster is left
# alone). The cluster is taken down at the end.
set -euo pipefail
BINARY=${1:-}
[ -n "$BINARY" ] && [ -x "$BINARY" ] || { echo "usage: $0 /abs/path/to/gpu-memory-guard [ROUNDS]" >&2; exit 2; }
export GMG_E2E_STATE=${GMG_E2E_STATE:-${TMPDIR:-/tmp}/gpu-memory-guard-bench-sched}
# shellcheck source=../e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
ROUNDS=${2:-${BENCH_SCHED_ROUNDS:-2}}
CONFIGS=${BENCH_SCHED_CONFIGS:-none wh-1 ext-1 wh-2 ext-2}
NODES=${BENCH_SCHED_NODES:-80}
PODS=${BENCH_SCHED_PODS:-640}
NS=bench-sched
QUIET_S=12  # a run has settled when every pod is bound or none was bound for this long
MAX_S=180   # and ends after this long in any case
RRPROXY=${GMG_RRPROXY:-$(dirname "$BINARY")/rrproxy}
[ -x "$RRPROXY" ] || die "rrproxy not found at $RRPROXY (the CMake build makes it next to the binary)"
OUT=$(mktemp -d)

GMG_TOOLS_BIN=$(bash "$E2E_DIR/build-tools.sh" cluster | tail -n 1)
export GMG_TOOLS_BIN
if [ -f "$STATE/cluster.env" ]; then bash "$E2E_DIR/cluster.sh" down; fi
bash "$E2E_DIR/cluster.sh" up --binary "$BINARY"
load_cluster_env
# BENCH_SCHED_KEEP=1: the cluster (and the work folder) stay up afterwards, to look around. An
# early exit still prints the rows measured so far.
trap 'rc=$?; trap - EXIT; [ -n "${TABLE_PRINTED:-1}" ] || print_table; [ -n "${BENCH_SCHED_KEEP:-}" ] && { log "kept: $OUT, $STATE"; exit $rc; }; for i in 1 2; do stop_daemon bench-replica-$i; done; stop_daemon bench-rrproxy; bash "$E2E_DIR/cluster.sh" down >/dev/null 2>&1 || true; rm -rf "$OUT"; exit $rc' EXIT
trap 'exit 130' INT TERM

# --- the nodes and the pods --------------------------------------------------------------------

log "$NODES kwok nodes (H100 80GB, time-sliced 8 ways)"
for i in $(seq 0 $((NODES - 1))); do
	n=$(printf 'bench-h100-%03d' "$i")
	cat <<EON
---
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels:
    kubernetes.io/hostname: $n
    kubernetes.io/os: linux
    gmg-bench/sched: "true"
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3-SHARED
    nvidia.com/gpu.memory: "81559"
    nvidia.com/gpu.count: "1"
    nvidia.com/gpu.replicas: "8"
    nvidia.com/gpu.sharing-strategy: time-slicing
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  capacity: {cpu: "64", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}
  allocatable: {cpu: "64", memory: 256Gi, pods: "110", nvidia.com/gpu: "8"}
EON
done >"$OUT/nodes.yaml"
kc create -f "$OUT/nodes.yaml" >/dev/null
bench_nodes_ready() {
	[ "$(kc get nodes -l gmg-bench/sched=true -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$')" -ge "$NODES" ]
}
wait_for 120 "$NODES bench nodes Ready" bench_nodes_ready || die "the bench nodes are not Ready"
kc create namespace $NS >/dev/null

# The pods, one JSON file each, and curl's config to POST them all at once over HTTP/2 (as
# test 12's rr_post: the API server then admits them concurrently).
mkdir -p "$OUT/pods"
for i in $(seq 0 $((PODS - 1))); do
	jq -nc --arg name "$(printf 'p%04d' "$i")" --arg ns $NS '{apiVersion: "v1", kind: "Pod",
	  metadata: {name: $name, namespace: $ns, labels: {app: "bench-sched"}},
	  spec: {terminationGracePeriodSeconds: 0, nodeSelector: {"gmg-bench/sched": "true"},
	    tolerations: [{key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule"}],
	    containers: [{name: "main", image: "registry.k8s.io/pause:3.10",
	      env: [{name: "GPU_MEMORY_LIMIT", value: "10Gi"}],
	      resources: {limits: {"nvidia.com/gpu": "1"}}}]}}' >"$OUT/pods/$i.json"
	printf 'url = "https://127.0.0.1:%s/api/v1/namespaces/%s/pods"\nheader = "Content-Type: application/json"\n' "$APISERVER_PORT" $NS
	printf 'data-binary = "@%s/pods/%s.json"\noutput = "/dev/null"\nwrite-out = "%%{http_code} %%{errormsg}\\n"\nmax-time = 60\n' "$OUT" "$i"
	printf 'cacert = "%s/ca.crt"\ncert = "%s/admin.crt"\nkey = "%s/admin.key"\n' "$PKI" "$PKI" "$PKI"
	[ "$i" -eq $((PODS - 1)) ] || echo next
done >"$OUT/post.cfg"

# --- the webhook's replicas and what is measured ------------------------------------------------

# The default install's replicas (started once, idle in the 1-replica configurations): ports of
# their own, shared reservations, and the proxy in front of them.
# Their identity may keep the records (Leases) in the webhook's namespace (test/e2e/lib.sh).
grant_reservations gpu-memory-guard-bench-reservations
for i in 1 2; do free_port "RP[$i]"; free_port "RH[$i]"; done
free_port PROXY_PORT
# shellcheck disable=SC2153 # RP and RH are set by free_port
for i in 1 2; do
	webhook_launch "bench-replica-$i" "${RP[$i]}" "${RH[$i]}" "$BINARY" \
		--reservations shared --reservations-namespace "$WEBHOOK_NAMESPACE"
done
for i in 1 2; do
	wait_for 60 "replica $i ready" bash -c "curl -sf --max-time 2 http://127.0.0.1:${RH[$i]}/readyz | grep -q '^cache: synced'" ||
		die "replica $i not ready: $(tail -n 3 "$STATE/logs/bench-replica-$i.log")"
done
start_daemon bench-rrproxy "$RRPROXY" "127.0.0.1:$PROXY_PORT" "127.0.0.1:${RP[1]}" "127.0.0.1:${RP[2]}"
wait_for 10 "rrproxy listening" port_listening "$PROXY_PORT" || die "rrproxy is not listening"

# metric HEALTH_PORT... NAME [LABEL_TEXT]: the sum of a counter over the given webhooks' /metrics.
metric() {
	local ports=$1 m=$2 l=${3:-} p
	for p in $ports; do curl -sf --max-time 5 "http://127.0.0.1:$p/metrics" || true; done |
		awk -v m="$m" -v l="$l" '($1 == m || index($1, m "{") == 1) && (l == "" || index($1, l)) { s += $NF } END { printf "%.6f\n", s }'
}
# counters HEALTH_PORTS: "DENIED ADMITTED CONNECTIONS FILTERS LEASE_OK LEASE_CONFLICT FILTER_S_SUM"
counters() {
	echo "$(metric "$1" gpu_memory_guard_reviews_total 'kind="binding",decision="denied"')" \
		"$(metric "$1" gpu_memory_guard_reviews_total 'kind="binding",decision="allowed"')" \
		"$(metric "$1" gpu_memory_guard_http_connections_total)" \
		"$(metric "$1" gpu_memory_guard_extender_requests_total 'verb="filter"')" \
		"$(metric "$1" gpu_memory_guard_reservation_writes_total 'result="ok"')" \
		"$(metric "$1" gpu_memory_guard_reservation_writes_total 'result="conflict"')" \
		"$(metric "$1" gpu_memory_guard_extender_request_seconds_sum 'verb="filter"')"
}
# sched_metrics: "ALGORITHM_SUM ALGORITHM_COUNT PLUGINS_SUM BIND_SUM" from kube-scheduler's
# /metrics (seconds; the admin certificate may read them): the scheduling algorithm's time per
# attempt (on the one scheduling thread: its plugins, and the extender's calls, which are not
# plugins), the in-tree Filter, Score and PostFilter plugins' part of it, and the Bind extension
# point (the binding cycle, off that thread: the Binding's API call, behind the client's rate
# limit, and the webhook's review of it).
sched_metrics() {
	curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		-k "https://127.0.0.1:$SCHEDULER_PORT/metrics" | awk '
		/^scheduler_scheduling_algorithm_duration_seconds_sum/ { as += $NF }
		/^scheduler_scheduling_algorithm_duration_seconds_count/ { ac += $NF }
		/^scheduler_framework_extension_point_duration_seconds_sum\{extension_point="(PreFilter|Filter|PostFilter|PreScore|Score)"/ { ps += $NF }
		/^scheduler_framework_extension_point_duration_seconds_sum\{extension_point="Bind"/ { bs += $NF }
		END { printf "%f %d %f %f\n", as, ac, ps, bs }'
}

# setup CONFIG: the webhook configuration and kube-scheduler as CONFIG wants them.
CUR_REG=$WEBHOOK_PORT CUR_SCHED="" # as cluster.sh up leaves them
setup() {
	local reg sched
	case $1 in
	none) reg="" sched="" ;;
	wh-1) reg=$WEBHOOK_PORT sched="" ;;
	ext-1) reg=$WEBHOOK_PORT sched=$WEBHOOK_PORT ;;
	wh-2) reg=$PROXY_PORT sched="" ;;
	ext-2) reg=$PROXY_PORT sched=$PROXY_PORT ;;
	*) die "unknown configuration $1" ;;
	esac
	if [ "$reg" != "$CUR_REG" ]; then
		if [ -z "$reg" ]; then
			bash "$E2E_DIR/cluster.sh" webhook-unregister
			sleep 3 # the API server drops the configuration asynchronously
		else
			bash "$E2E_DIR/cluster.sh" webhook-register "$reg" 2>/dev/null
		fi
		CUR_REG=$reg
	fi
	if [ "$sched" != "$CUR_SCHED" ]; then
		if [ -z "$sched" ]; then
			bash "$E2E_DIR/cluster.sh" scheduler-default 2>/dev/null
		else
			bash "$E2E_DIR/cluster.sh" scheduler-extender "$sched" 2>/dev/null
		fi
		CUR_SCHED=$sched
	fi
	load_cluster_env # the scheduler's port stays; SCHEDULER_CONFIG changed
}

# clear: every bench pod gone (a DELETE of the collection, grace 0, repeated every 10 s: on a
# busy machine the API server may not finish one in time), and the webhooks' caches with them.
pods_left() { kc -n $NS get pods -o name 2>/dev/null | wc -l; }
clear_pods() {
	local i
	for i in $(seq 1 18); do
		curl -sf --max-time 30 -X DELETE --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
			"https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$NS/pods?gracePeriodSeconds=0" >/dev/null || true
		wait_for 10 "the bench pods gone" bash -c "[ \$(kubectl -n $NS get pods -o name | wc -l) -eq 0 ]" && break
	done
	[ "$(pods_left)" -eq 0 ] || die "bench pods still there after 180 s"
	sleep 3
}

# run CONFIG ROUND: one measurement; appends a line to $OUT/rows:
# CONFIG ROUND BOUND LAST_S DENIED OVER LOAD ALGO_MS OUTSIDE_PLUGINS_MS CONNS FILTERS LEASE_OK
# LEASE_CONFLICT ADMITTED FILTER_MS BIND_MS ATTEMPTS CREATE_S SCHED_CONNS (milliseconds: the scheduling algorithm per
# attempt, the part of it outside the in-tree plugins (the extender's calls), the webhook's own
# time per filter call, the Bind extension point per pod bound; CREATE_S: until the last create
# was answered; SCHED_CONNS: kube-scheduler's connections to the extender seen, sampled each second)
run() {
	local cfg=$1 round=$2 ports watcher t0 c0 c1 s0 s1 bound last over load now last_t t_end created
	local ext_port="" sconns
	case $cfg in none) ports="" ;; *-1) ports=$WEBHOOK_HEALTH_PORT ;; *-2) ports="${RH[1]} ${RH[2]}" ;; esac
	case $cfg in ext-1) ext_port=$WEBHOOK_PORT ;; ext-2) ext_port=$PROXY_PORT ;; esac
	log "round $round: $cfg"
	setup "$cfg"
	c0=$(counters "$ports") s0=$(sched_metrics)
	# Each pod's first binding, stamped as the watch delivers it.
	# (a watch of the API, one JSON event a line; jq passes each on as it comes.)
	curl -sfN --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		"https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$NS/pods?watch=1&allowWatchBookmarks=false" 2>/dev/null \
		> >(jq --unbuffered -r '.object | "\(.metadata.name) \(.spec.nodeName // "")"' | while read -r name node; do
			[ -z "$node" ] || printf '%s %s\n' "$EPOCHREALTIME" "$name"; done >"$OUT/binds") &
	watcher=$!
	sleep 1
	t0=$EPOCHREALTIME
	curl -s --parallel --parallel-max 200 -K "$OUT/post.cfg" >"$OUT/codes" 2>"$OUT/curl.err" || true
	created=$(awk -v t0="$t0" -v t1="$EPOCHREALTIME" 'BEGIN { printf "%.2f", t1 - t0 }')
	[ "$(grep -c '^201 ' "$OUT/codes")" -eq "$PODS" ] ||
		log "WARNING: $(grep -vc '^201 ' "$OUT/codes") of $PODS creates not answered 201: $(sort "$OUT/codes" | uniq -c | tr '\n' ' ')"
	t_end=$((SECONDS + MAX_S)) last_t=$SECONDS bound=0
	: >"$OUT/sched-conns"
	while [ $SECONDS -lt $t_end ]; do
		sleep 1
		# kube-scheduler's connections to the extender, by local port: how many it opened.
		[ -z "$ext_port" ] || ss -tnpH state established "( dport = :$ext_port )" 2>/dev/null |
			awk '/"kube-scheduler"/ { print $3 }' >>"$OUT/sched-conns"
		# Bound pods as the API lists them (the watch may end early on a busy API server: it
		# only stamps the times).
		now=$(kc -n $NS get pods -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null | grep -c . || true)
		[ "$now" = "$bound" ] || { bound=$now last_t=$SECONDS; }
		[ "$bound" -lt "$PODS" ] || break
		[ $((SECONDS - last_t)) -lt $QUIET_S ] || break
	done
	kill "$watcher" 2>/dev/null || true
	wait "$watcher" 2>/dev/null || true
	c1=$(counters "$ports") s1=$(sched_metrics)
	bound=$(kc -n $NS get pods -o json | jq '[.items[] | select(.spec.nodeName != null)] | length')
	last=$(awk -v t0="$t0" '!seen[$2]++ { if ($1 > m) m = $1 } END { printf "%.2f", m ? m - t0 : 0 }' "$OUT/binds")
	over=$(cluster_usage "$THRESHOLD" | jq -s '[.[] | select(.over)] | length')
	load=$(uptime | sed 's/.*load average: //; s/,//g')
	sconns=$(sort -u "$OUT/sched-conns" | grep -c . || true)
	# c0: $1-$7, c1: $8-$14, s0: $15-$18, s1: $19-$22
	paste -d' ' <(echo "$c0") <(echo "$c1") <(echo "$s0") <(echo "$s1") | awk -v cfg="$cfg" -v r="$round" \
		-v b="$bound" -v l="$last" -v o="$over" -v ld="${load// /\/}" -v cr="$created" -v sc="$sconns" '{
		am = ($20 - $16) ? ($19 - $15) / ($20 - $16) * 1000 : 0
		em = ($20 - $16) ? (($19 - $15) - ($21 - $17)) / ($20 - $16) * 1000 : 0
		bm = b ? ($22 - $18) / b * 1000 : 0
		fm = ($11 - $4) ? ($14 - $7) / ($11 - $4) * 1000 : 0
		printf "%s %s %s %s %d %s %s %.2f %.2f %d %d %d %d %d %.2f %.1f %d %s %d\n", cfg, r, b, l, $8 - $1, o, ld, am, em,
			$10 - $3, $11 - $4, $12 - $5, $13 - $6, $9 - $2, fm, bm, $20 - $16, cr, sc }' >>"$OUT/rows"
	tail -n 1 "$OUT/rows" >&2
	clear_pods
}

# --- the table ---------------------------------------------------------------------------------

print_table() {
	[ -s "$OUT/rows" ] || return 0
	echo
	echo "bench-scheduler, $(date -u +%F) $(date -u +%H:%M)Z, $(nproc) cores, kube-scheduler $("$TOOLS_BIN/kube-scheduler" --version 2>/dev/null | awk '{print $2}'): $NODES nodes, $PODS pods of 10Gi ($((NODES * 7)) fit), created at once"
	{
		printf 'config\tround\tpods bound\tcreated in (s)\tlast binding (s)\trate vs none\tBindings refused\tnodes over\tattempts\talgorithm (ms)\tof it outside plugins (ms)\tour filter (ms)\tBind (ms)\tnew TLS conns\tscheduler conns\tfilter calls\tLease writes ok/409\t409 per admitted Binding\tload 1/5/15\n'
		awk '$1 == "none" { base[$2] = $4 > 0 ? $3 / $4 : 0 }
			{ row[NR] = $0 }
			END { for (i = 1; i <= NR; i++) { split(row[i], f, " ")
				rate = f[4] > 0 ? f[3] / f[4] : 0
				ratio = base[f[2]] > 0 ? sprintf("%.2fx", rate / base[f[2]]) : "-"
				g = (f[1] == "none"); x = (f[1] ~ /^ext/); two = (f[1] ~ /-2$/)
				printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f[1], f[2], f[3],
					f[18], f[4], ratio, g ? "-" : f[5], f[6], f[17], f[8], f[9], x ? f[15] : "-", f[16],
					g ? "-" : f[10], x ? f[19] : "-", x ? f[11] : "-", two ? f[12] "/" f[13] : "-",
					(two && f[14] > 0) ? sprintf("%.2f", f[13] / f[14]) : "-", f[7] } }' "$OUT/rows"
	} | table
}
TABLE_PRINTED="" # an exit before the end prints the rows so far (the EXIT trap)
for round in $(seq 1 "$ROUNDS"); do
	for cfg in $CONFIGS; do run "$cfg" "$round"; done
done

print_table
TABLE_PRINTED=1
