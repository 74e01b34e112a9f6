#!/usr/bin/env bash
# End-to-end suite: the webhook binary against a real kube-apiserver, scheduler,
# controller-manager and kwok nodes (test/e2e/cluster.sh): the seven tests of issue 3, an
# eighth (capacity of a deleted pod is free once the grace period is over, long before the TTL),
# a ninth (placements from the watch cache make no API call), a tenth (the same among 16,000 pods;
# GMG_E2E_SCALE_PODS sets the count), an eleventh (kube-apiserver restarted mid-run) and a twelfth
# (2 and 3 replicas with shared reservations behind a round-robin proxy, storms of parallel
# placements, one replica killed; GMG_E2E_RR_ROUNDS, GMG_E2E_RESERVATIONS, GMG_E2E_FIGURES: see
# test 12; docs/shared-reservations-e2e.md), and 13-16 for the scheduler extender (issue 9: the
# suite's kube-scheduler with it, the chart's second scheduler, the webhook without it;
# GMG_E2E_EXTENDER=off: see test 13), 17 for shared GPUs (issue 10: a time-sliced 2-card node
# and an MPS node), 18 for the container image (`make image` unpacked
# with umoci and run with runc under the chart's security context; GMG_IMAGE: see test 18), and
# 19-20 (issue 12: etcd paused, a replica killed, the serving certificate and the token
# replaced, under a steady flow of placements; the soak, GMG_E2E_SOAK_SECONDS; faults.sh), 21
# (issue 11: `gpu-memory-guard report`'s largest fit admitted, one byte more refused), 22
# (the GPUMemoryPolicy CRD: examples accepted, bad policies refused by the API server's schema
# and CEL rules, printer columns; policies.sh), 23 (the webhook applies policies: the seed's
# tiers, audit mode in the API server's audit log, a threshold policy; policies.sh), 24 (inferred
# demand), 25 (issue 21: DRA ResourceSlices and claims allocated by the real scheduler) and 26
# (issue 20: the API server authenticates to the webhook with a client certificate, forged
# reviews are refused).
#
# Usage: run.sh /abs/path/to/gpu-memory-guard [TEST_NUMBER...]   (no number: every test but the
# known failing ones, see KNOWN_FAILING; e.g. 12: that test only, on a cluster of its own)
# Every verdict is read back from the API (pods, events, kubectl's own errors); per-node usage is
# recomputed from `kubectl get pods -o json` by usage.jq, never taken from the webhook's logs.
# Prints PASS/FAIL per test with the reason, then "N passed, M failed"; exits 1 on any failure.
# The cluster lives in its own state folder (so a demo cluster left up is not disturbed) and is
# torn down on exit; GMG_E2E_KEEP=1 keeps it up for a look.
# The whole suite (no number) runs the tests of GMG_E2E_BESIDE (default "12 19 20": each starts
# webhook replicas or faults of its own) beside the others, in a second run.sh on a cluster of
# its own (its own state folder; ports in GMG_E2E_BESIDE_PORTS, default 24000-27999, the main
# cluster's in GMG_E2E_PORTS, default 20000-23999); its output is printed whole after the other
# tests, and its verdicts count in the final line. GMG_E2E_BESIDE="" runs them in sequence.
set -uo pipefail

BINARY=${1:-}
[ -n "$BINARY" ] && [ -x "$BINARY" ] || { echo "usage: $0 /abs/path/to/gpu-memory-guard [TEST...]" >&2; exit 2; }
shift
ONLY=" $* "
# Always a state folder of its own: an inherited GMG_E2E_STATE (after `eval "$(cluster.sh env)"`)
# names somebody's cluster, which this suite must neither reuse nor tear down.
GMG_E2E_STATE=$(mktemp -d "${TMPDIR:-/tmp}/gmg-e2e-run.XXXXXX")
export GMG_E2E_STATE
BESIDE_WANTED="" BESIDE="" BESIDE_PID=""
if [ "$ONLY" = "  " ]; then
	BESIDE_WANTED=${GMG_E2E_BESIDE- 12 19 20}
	[ -z "${BESIDE_WANTED// /}" ] || export GMG_E2E_PORTS=${GMG_E2E_PORTS:-20000-23999}
fi
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

START=$SECONDS
PASSED=0
FAILED=0

# Bash runs the EXIT trap in forked subshells too (the background curls of test 6): only the
# suite's own shell may tear the cluster down.
MAIN_PID=$BASHPID
# cleanup RC: keeps the logs of a failed run, then takes the cluster down (or leaves it up with
# GMG_E2E_KEEP=1).
cleanup() {
	if [ -n "$BESIDE_PID" ]; then # the suite stopped before it waited for them
		kill "$BESIDE_PID" 2>/dev/null
		beside_wait 60 # their cluster's teardown
		BESIDE_PID=""
	fi
	if [ "$1" -ne 0 ] && [ -d "$STATE/logs" ]; then
		mkdir -p "$GMG_CACHE/e2e-logs" && rm -rf "$GMG_CACHE/e2e-logs/last" && cp -r "$STATE/logs" "$GMG_CACHE/e2e-logs/last" &&
			log "logs copied to $GMG_CACHE/e2e-logs/last"
	fi
	if [ "${GMG_E2E_KEEP:-0}" = 1 ]; then
		log "cluster kept up: eval \"\$(GMG_E2E_STATE=$STATE $E2E_DIR/cluster.sh env)\"; tear down with GMG_E2E_STATE=$STATE $E2E_DIR/cluster.sh down"
	else
		bash "$E2E_DIR/cluster.sh" down || true
		case $STATE in */gmg-e2e-run.*) rm -rf "$STATE" ;; esac
	fi
}
teardown() {
	local rc=$?
	[ "$BASHPID" = "$MAIN_PID" ] || return 0
	cleanup $rc
	exit $rc
}

# The webhook forgets an admitted placement when a later review of the same node sees the pod,
# or, once the placement is older than its grace period (5 s, WEBHOOK_GRACE_MS_DEFAULT), when
# the API server says the pod is gone; else after --reservation-ttl (60 s, the default here).
# So that a test's deleted pods cannot count in the next one, the suite settles after each
# test: it waits until the webhook holds no reservation (gpu_memory_guard_ledger_reservations
# 0) and its watch cache no more pods than the API server lists, polled every 0.2 s, and at
# most a little longer than the grace period (SETTLE, the fixed pause this was: a reservation
# that stays, of a pod that never came, is past its grace period by then); test 8 checks the
# grace period is enough.
GRACE=5
SETTLE=${GMG_E2E_SETTLE:-$((GRACE + 1))}

log "e2e: building or reusing the control-plane tools"
GMG_TOOLS_BIN=$(bash "$E2E_DIR/build-tools.sh" cluster | tail -n 1) || die "building the tools failed"
export GMG_TOOLS_BIN
trap teardown EXIT
trap 'exit 130' INT TERM
log "e2e: cluster up in $STATE"
bash "$E2E_DIR/cluster.sh" up --binary "$BINARY" || die "cluster up failed (logs: $STATE/logs)"
load_cluster_env
WEBHOOK_PID=$(cat "$STATE/pids/webhook.pid")
DENIED_POD='admission webhook "pods.gpu-memory-guard.io" denied the request'
DENIED_BINDING='admission webhook "bindings.gpu-memory-guard.io" denied the request'

# --- helpers -------------------------------------------------------------------------------

pass() { PASSED=$((PASSED + 1)); printf 'PASS %s: %s\n' "$CURRENT" "$1"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL %s: %s\n' "$CURRENT" "$1"; }
# Tests that fail on today's code because of a known open bug: not run by default (`make test`),
# run when named or with GMG_E2E_ALL=1; listed as " N M ". None today (14 and 15 were, until the
# extender counted pods whose Binding is in flight: docs/e2e.md).
KNOWN_FAILING=" "
want() {
	case "$ONLY" in
	"  ")
		[ "${GMG_E2E_ALL:-0}" = 1 ] || case "$KNOWN_FAILING" in *" $1 "*) return 1 ;; esac
		case " $BESIDE " in *" $1 "*) return 1 ;; esac # run beside, by the second run.sh
		return 0
		;;
	*" $1 "*) return 0 ;;
	*) return 1 ;;
	esac
}
# The tests run beside (see the top): those of GMG_E2E_BESIDE the whole suite would run.
beside=""
for n in $BESIDE_WANTED; do
	want "$n" && beside="$beside $n"
done
BESIDE=${beside# }
# Not a child of this shell (started from a subshell that exits at once): the tests' own bare
# `wait`s (tests 6, 10, 12) must not wait for it. Its pid and, once it ended, its exit status
# are in $STATE/beside.pid and beside.rc.
if [ -n "$BESIDE" ]; then
	BESIDE_LOG="$STATE/beside.log"
	log "e2e: tests $BESIDE beside the others, on a cluster of their own (log $BESIDE_LOG)"
	(
		(
			GMG_E2E_PORTS=${GMG_E2E_BESIDE_PORTS:-24000-27999} GMG_E2E_BESIDE="" \
				bash "$E2E_DIR/run.sh" "$BINARY" $BESIDE >"$BESIDE_LOG" 2>&1 </dev/null &
			echo $! >"$STATE/beside.pid.tmp" && mv "$STATE/beside.pid.tmp" "$STATE/beside.pid"
			wait $!
			echo $? >"$STATE/beside.rc"
		) &
	)
	wait_for 10 "the pid of tests $BESIDE" test -s "$STATE/beside.pid"
	BESIDE_PID=$(cat "$STATE/beside.pid" 2>/dev/null)
	[ -n "$BESIDE_PID" ] || BESIDE_PID=none
fi
# beside_wait SECONDS: until the run beside has ended (its beside.rc written).
beside_wait() { wait_for "$1" "tests $BESIDE to end" test -s "$STATE/beside.rc"; }

# pod_json NAME NAMESPACE MEMORY GPUS [NODE_NAME] [NODE_SELECTOR_HOSTNAME] [GATED]
# A GPU pod as users write them: GPU_MEMORY_LIMIT, nvidia.com/gpu limit, the taint's toleration.
pod_json() {
	jq -n --arg name "$1" --arg ns "$2" --arg mem "$3" --arg gpus "$4" --arg node "${5:-}" \
		--arg host "${6:-}" --arg gated "${7:-}" '
	{apiVersion: "v1", kind: "Pod",
	 metadata: {name: $name, namespace: $ns, labels: {"app.kubernetes.io/part-of": "gmg-e2e"}},
	 spec: ({terminationGracePeriodSeconds: 0,
	   tolerations: [{key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule"}],
	   containers: [{name: "main", image: "registry.k8s.io/pause:3.10",
	     env: (if $mem == "" then [] else [{name: "GPU_MEMORY_LIMIT", value: $mem}] end),
	     resources: (if $gpus == "0" then {} else {limits: {"nvidia.com/gpu": $gpus}} end)}]}
	   + (if $node == "" then {} else {nodeName: $node} end)
	   + (if $host == "" then {} else {nodeSelector: {"kubernetes.io/hostname": $host}} end)
	   + (if $gated == "" then {} else {schedulingGates: [{name: "gmg-e2e/hold"}]} end))}'
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

fresh_ns() { kc create namespace "$1" >/dev/null; }
drop_ns() {
	kc delete namespace "$1" --wait=true --timeout=120s >/dev/null 2>&1 || log "namespace $1 not gone after 120s"
	settle
}

# settle: see GRACE. Waits SETTLE s at most; less once settled says so.
SETTLE_MS=0 # the settles' time in the current test (timed prints it)
settle() {
	local t0 end
	t0=$(now_ms)
	end=$((t0 + SETTLE * 1000))
	until settled; do
		[ "$(now_ms)" -lt "$end" ] || break
		sleep 0.2
	done
	SETTLE_MS=$((SETTLE_MS + $(now_ms) - t0))
}
# Whether the suite's webhook holds no reservation and its watch cache (synced) no more pods
# than the API server lists; false while the webhook does not answer (test 7 stops it).
settled() {
	local held cached listed
	held=$(metrics | awk '$1 == "gpu_memory_guard_ledger_reservations" { print $2 }') || return 1
	[ "$held" = 0 ] || return 1
	cached=$(cache_synced_pods)
	[ -n "$cached" ] || return 1
	listed=$(kc get pods -A --no-headers 2>/dev/null | wc -l) || return 1
	[ "$cached" -le "$listed" ]
}

phase_count() { # NAMESPACE PHASE
	kc get pods -n "$1" -o json | jq --arg p "$2" '[.items[] | select(.status.phase == $p)] | length'
}

# Node lines over their threshold, as the API shows them; empty when all are within.
over_threshold() { cluster_usage "$THRESHOLD" | jq -r 'select(.over) | "\(.node): declared \(.declared / 1073741824 * 100 | round / 100)Gi > limit \(.limit / 1073741824 * 100 | round / 100)Gi (\(.pods | map(.pod) | join(", ")))"'; }

node_usage() { cluster_usage "$THRESHOLD" | jq -c --arg n "$1" 'select(.node == $n)'; }

fs_messages() { # NAMESPACE POD: FailedScheduling messages of that pod
	kc get events -n "$1" --field-selector "reason=FailedScheduling,involvedObject.name=$2" \
		-o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null
}

# --- 1. a Deployment scaled past what the nodes hold ------------------------------------------

test_scale() {
	CURRENT="1 deployment scaled past capacity"
	local ns=e2e-scale demand=20Gi want=0 n cap
	fresh_ns $ns
	# What fits, from the API's view of the H100 nodes: min(GPU slots, floor(limit / demand)).
	for n in gpu-h100-a gpu-h100-b; do
		cap=$(node_usage $n | jq --argjson d $((20 * 1073741824)) '(.limit - .declared) / $d | floor')
		want=$((want + (cap < 4 ? cap : 4)))
	done
	kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: $ns}
spec:
  replicas: 2
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      terminationGracePeriodSeconds: 0
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3-SHARED}
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.3.post1
        # vLLM's own share (0.24 x 79.6Gi = 19.1Gi) under the declaration: 20Gi counts. Without
        # the flag, --undeclared infer would count vLLM's default 0.92 of the card.
        args: [--model=m, --gpu-memory-utilization=0.24]
        env: [{name: GPU_MEMORY_LIMIT, value: $demand}]
        resources: {limits: {nvidia.com/gpu: "1"}}
EOF
	if ! wait_for 60 "2 replicas running" bash -c "[ \$(kubectl -n $ns get pods --field-selector=status.phase=Running -o name | wc -l) -eq 2 ]"; then
		fail "the first 2 replicas did not run: $(kc get pods -n $ns -o wide --no-headers 2>&1 | tr '\n' ';')"
		drop_ns $ns; return
	fi
	kc scale deployment vllm -n $ns --replicas=8 >/dev/null
	# Done when the fitting ones run and every other one has been refused by the webhook.
	local deadline=$((SECONDS + 120)) running pending refused p ever_over="" o
	while :; do
		o=$(over_threshold) # sampled all along, not only at the end
		[ -z "$o" ] || ever_over=$o
		running=$(phase_count $ns Running)
		pending=$(kc get pods -n $ns --field-selector=status.phase=Pending -o jsonpath='{.items[*].metadata.name}')
		refused=0
		for p in $pending; do fs_messages $ns "$p" | grep -qF "$DENIED_BINDING" && refused=$((refused + 1)); done
		[ "$running" -eq "$want" ] && [ "$refused" -eq $((8 - want)) ] && break
		[ $SECONDS -lt $deadline ] || break
		sleep 2
	done
	sleep 5 # the scheduler keeps retrying the refused ones: none may get through
	running=$(phase_count $ns Running)
	pending=$(kc get pods -n $ns --field-selector=status.phase=Pending -o jsonpath='{.items[*].metadata.name}')
	local over sample
	over=$(over_threshold)
	[ -n "$over" ] || over=$ever_over
	sample=$(for p in $pending; do fs_messages $ns "$p" | grep -F "$DENIED_BINDING" | tail -n 1; break; done)
	if [ -n "$over" ]; then
		fail "node over threshold: $over"
	elif [ "$running" -ne "$want" ]; then
		fail "expected exactly $want running, got $running (pending: $(echo $pending | wc -w), refused by webhook: $refused)"
	elif grep -q '%!' <<<"$sample"; then
		# kube-scheduler passes the bind error to Eventf as the format string
		# (pkg/scheduler/schedule_one.go), so a '%' in a denial reaches operators mangled.
		fail "the FailedScheduling event does not quote the webhook's message intact ('%' in the denial is read as a format verb by kube-scheduler): ${sample:0:400}"
	elif [ "$refused" -ne $((8 - want)) ]; then
		fail "$((8 - want)) pending pods should carry a FailedScheduling event quoting the webhook; $refused do. Events: $(kc get events -n $ns --field-selector reason=FailedScheduling -o jsonpath='{.items[0].message}')"
	else
		pass "$running of 8 running (what fits), $refused pending with FailedScheduling: ${sample:0:400}"
	fi
	drop_ns $ns
}

# --- 2. a pod with spec.nodeName over budget -------------------------------------------------

# legacy_binding NAMESPACE NODE: a pending 30Gi GPU pod "stray" (held by an unmatched
# nodeSelector), then bound through the legacy top-level bindings resource, as old clients and
# custom schedulers do; prints the API server's Status message.
legacy_binding() {
	pod_json stray "$1" 30Gi 1 | jq '.spec.nodeSelector = {"gmg-e2e/nowhere": "true"}' | kc create -f - >/dev/null || return 1
	curl -s --max-time 15 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
		-H 'Content-Type: application/json' -X POST "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$1/bindings" \
		-d "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{\"name\":\"stray\"},\"target\":{\"kind\":\"Node\",\"name\":\"$2\"}}" |
		jq -r '.message // .'
}

test_nodename() {
	CURRENT="2 nodeName pod over budget"
	local ns=e2e-nodename out
	fresh_ns $ns
	if ! out=$(pod_json resident $ns 50Gi 1 gpu-h100-a | kc create -f - 2>&1); then
		fail "a fitting 50Gi pod on gpu-h100-a was refused: $out"; drop_ns $ns; return
	fi
	if out=$(pod_json intruder $ns 30Gi 1 gpu-h100-a | kc create -f - 2>&1); then
		fail "30Gi more on gpu-h100-a (50Gi there, limit 71.7Gi) was admitted: $out"
	elif ! grep -qF "$DENIED_POD" <<<"$out"; then
		fail "kubectl create failed, but not with the webhook's denial: $out"
	elif ! grep -q gpu-h100-a <<<"$out"; then
		fail "the denial does not name the node: $out"
	elif kc get pod intruder -n $ns >/dev/null 2>&1; then
		fail "the refused pod exists anyway"
	elif ! out=$(legacy_binding $ns gpu-h100-a) || ! grep -qF "$DENIED_BINDING" <<<"$out"; then
		fail "the same placement through the legacy POST .../bindings API was not refused by the webhook: $out"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "kubectl create refused (and the legacy bindings API too): $(pod_json intruder $ns 30Gi 1 gpu-h100-a | kc create -f - 2>&1 | cut -c1-400)"
	fi
	drop_ns $ns
}

# --- 3. server-side dry run reserves nothing --------------------------------------------------

test_dryrun() {
	CURRENT="3 dry-run reserves nothing"
	local ns=e2e-dryrun node=gpu-l4-0 out fit i
	fresh_ns $ns
	# The largest whole MiB under the node's limit (0.9 x 23034 MiB = 20730.6 MiB).
	fit=$(node_usage $node | jq '(.limit - .declared) / 1048576 | floor')
	for i in 1 2 3; do
		if ! out=$(pod_json "probe-$i" $ns "${fit}Mi" 1 $node | kc create --dry-run=server -f - 2>&1); then
			fail "dry-run of a fitting ${fit}Mi pod refused: $out"; drop_ns $ns; return
		fi
	done
	if ! out=$(pod_json tenant $ns "${fit}Mi" 1 $node | kc create -f - 2>&1); then
		fail "after 3 dry-runs a real ${fit}Mi pod (fits exactly) was refused, so the dry-runs reserved memory: $out"
	elif kc get pods -n $ns -o name | grep -q probe; then
		fail "a dry-run created a pod"
	elif out=$(pod_json extra $ns 1Mi 1 $node | kc create --dry-run=server -f - 2>&1); then
		fail "with ${fit}Mi on $node another 1Mi was allowed (the real pod is not counted)"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "3 dry-runs of ${fit}Mi allowed, then the real ${fit}Mi pod admitted; 1Mi more refused"
	fi
	drop_ns $ns
}

# --- 4. ordinary pods and non-GPU bindings are never affected -------------------------------

test_ordinary() {
	CURRENT="4 ordinary pods unaffected"
	local ns=e2e-ordinary node=gpu-l4-0 fit out bad=""
	fresh_ns $ns
	# Fill the L4 up to its limit first, so any GPU accounting of these pods would refuse them.
	fit=$(node_usage $node | jq '(.limit - .declared) / 1048576 | floor')
	out=$(pod_json filler $ns "${fit}Mi" 1 $node | kc create -f - 2>&1) || bad="filler refused: $out"
	kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $ns}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: nginx, image: nginx:1.27, resources: {requests: {cpu: 100m}}}]
EOF
	# A node agent pinned with nodeName, a log shipper the scheduler binds to the full GPU node,
	# and a plain pod pinned to the CPU node (no GPU capacity labels at all).
	out=$(pod_json node-agent $ns "" 0 $node | kc create -f - 2>&1) || bad="$bad; node-agent (nodeName $node) refused: $out"
	out=$(pod_json log-shipper $ns "" 0 "" $node | kc create -f - 2>&1) || bad="$bad; log-shipper refused: $out"
	out=$(pod_json cpu-pinned $ns "" 0 cpu-0 | kc create -f - 2>&1) || bad="$bad; cpu-pinned refused: $out"
	if [ -n "$bad" ]; then fail "$bad"; drop_ns $ns; return; fi
	if ! wait_for 60 "7 pods running" bash -c "[ \$(kubectl -n $ns get pods --field-selector=status.phase=Running -o name | wc -l) -eq 7 ]"; then
		fail "not all ordinary pods run: $(kc get pods -n $ns -o wide --no-headers | awk '{print $1, $3, $7}' | tr '\n' ';') events: $(kc get events -n $ns --field-selector reason=FailedScheduling -o jsonpath='{.items[*].message}')"
	elif [ "$(kc get pod log-shipper -n $ns -o jsonpath='{.spec.nodeName}')" != $node ]; then
		fail "log-shipper not bound to $node"
	elif [ "$(kc get pods -n $ns -l app=web -o jsonpath='{.items[*].spec.nodeName}' | tr ' ' '\n' | sort -u)" != cpu-0 ]; then
		fail "web replicas not on cpu-0: $(kc get pods -n $ns -l app=web -o jsonpath='{.items[*].spec.nodeName}')"
	else
		pass "with $node at its limit: 3 web replicas on cpu-0, a nodeName pod and a scheduler-bound pod on $node, a nodeName pod on cpu-0, all Running"
	fi
	drop_ns $ns
}

# --- 5. the per-node threshold annotation ---------------------------------------------------

dry_allowed() { pod_json big "$1" 15Gi 1 "$2" | kc create --dry-run=server -f - >/dev/null 2>&1; }
dry_denied() { ! dry_allowed "$@"; }

test_annotation() {
	CURRENT="5 per-node threshold annotation"
	local ns=e2e-annotation node=gpu-l4-0 out t0
	fresh_ns $ns
	# 15Gi on an empty L4 (22.5Gi): fits 90% (20.2Gi), not 50% (11.2Gi), fits 95% (21.4Gi).
	if ! dry_allowed $ns $node; then
		fail "15Gi on an empty $node refused under the default threshold"; drop_ns $ns; return
	fi
	kc annotate node $node --overwrite gpu-memory-guard.io/threshold=0.5 >/dev/null
	t0=$SECONDS
	if ! wait_for 30 "threshold 0.5 to apply" dry_denied $ns $node; then
		fail "threshold annotation 0.5 not applied within 30s"
	elif out=$(pod_json big $ns 15Gi 1 $node | kc create -f - 2>&1) || ! grep -qF "$DENIED_POD" <<<"$out"; then
		fail "with threshold 0.5, kubectl create of 15Gi did not get the webhook's denial: $out"
	else
		local lag1=$((SECONDS - t0))
		kc annotate node $node --overwrite gpu-memory-guard.io/threshold=0.95 >/dev/null
		t0=$SECONDS
		if ! wait_for 30 "threshold 0.95 to apply" dry_allowed $ns $node; then
			fail "threshold annotation 0.95 not applied within 30s"
		elif ! out=$(pod_json big $ns 15Gi 1 $node | kc create -f - 2>&1); then
			fail "with threshold 0.95, 15Gi refused: $out"
		elif [ "$(cat "$STATE/pids/webhook.pid")" != "$WEBHOOK_PID" ] || ! kill -0 "$WEBHOOK_PID"; then
			fail "the webhook was restarted or died"
		elif [ -n "$(over_threshold)" ]; then
			fail "node over threshold: $(over_threshold)"
		else
			pass "0.5 refused 15Gi on $node (in effect after ${lag1}s), 0.95 admitted it (after $((SECONDS - t0))s), same webhook process"
		fi
	fi
	kc annotate node $node gpu-memory-guard.io/threshold- >/dev/null
	drop_ns $ns
}

# --- 6. 40 GPU pods created in parallel against two nodes ------------------------------------

test_parallel() {
	CURRENT="6 40 parallel creates on two nodes"
	local ns=e2e-parallel dir i node code want=0 n cap
	fresh_ns $ns
	dir=$(mktemp -d)
	for n in gpu-h100-a gpu-h100-b; do
		cap=$(node_usage $n | jq --argjson d $((10 * 1073741824)) '(.limit - .declared) / $d | floor')
		want=$((want + cap))
	done
	for i in $(seq 1 40); do
		node=gpu-h100-a
		[ $((i % 2)) = 0 ] && node=gpu-h100-b
		pod_json "p$i" $ns 10Gi 1 $node >"$dir/p$i.json"
	done
	# One curl per pod, all started before any finishes: the API server calls the webhook 40
	# times at once, 20 per node.
	for i in $(seq 1 40); do
		curl -s --max-time 30 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
			-H 'Content-Type: application/json' -X POST --data-binary "@$dir/p$i.json" \
			-o "$dir/p$i.out" -w '%{http_code}' "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$ns/pods" >"$dir/p$i.code" &
	done
	wait
	local created=0 denied=0 other=0 reasons
	for i in $(seq 1 40); do
		code=$(cat "$dir/p$i.code")
		case $code in
		201) created=$((created + 1)) ;;
		403) if grep -qF 'denied the request' "$dir/p$i.out"; then denied=$((denied + 1)); else other=$((other + 1)); fi ;;
		*) other=$((other + 1)) ;;
		esac
	done
	reasons=$(cat "$dir"/*.out | jq -r 'select(.kind == "Status") | .message' 2>/dev/null | sed -E 's/[0-9.]+(Gi| percent)//g' | sort | uniq -c | sort -rn | head -n 3 | tr '\n' ';')
	local over per
	over=$(over_threshold)
	per=$(cluster_usage "$THRESHOLD" | jq -r 'select(.node | startswith("gpu-h100")) | "\(.node) \(.pods | length) pods \(.declared / 1073741824)Gi/\(.limit / 1073741824 * 10 | floor / 10)Gi"' | tr '\n' ';')
	if [ -n "$over" ]; then
		fail "node over threshold after parallel creates: $over"
	elif [ "$other" -ne 0 ]; then
		fail "$other creates failed other than by a denial (created $created, denied $denied): $reasons"
	elif [ "$created" -ne "$want" ]; then
		fail "expected exactly $want admitted (what fits), got $created (denied $denied): $per reasons: $reasons"
	else
		pass "$created admitted, $denied denied, none over threshold: $per"
	fi
	rm -rf "$dir"
	drop_ns $ns
}

# --- 7. webhook down: failurePolicy Fail, exempt namespaces still schedule -------------------

test_outage() {
	CURRENT="7 webhook outage"
	local ns=e2e-outage ex=$EXEMPT_NAMESPACE out bad=""
	fresh_ns $ns
	# A GPU pod admitted while the webhook is up, held back from the scheduler by a gate.
	if ! out=$(pod_json waiting $ns 8Gi 1 "" gpu-a100-0 gated | kc create -f - 2>&1); then
		fail "gated GPU pod refused with the webhook up: $out"; drop_ns $ns; return
	fi
	bash "$E2E_DIR/cluster.sh" webhook-stop
	# A placement by nodeName: refused by the API server itself (failurePolicy Fail).
	if out=$(pod_json pinned $ns 8Gi 1 gpu-a100-0 | kc create -f - 2>&1); then
		bad="a GPU pod with nodeName was admitted with the webhook down"
	elif ! grep -qF 'failed calling webhook "pods.gpu-memory-guard.io"' <<<"$out"; then
		bad="nodeName pod refused, but not by failurePolicy: $out"
	fi
	# A placement by the scheduler: the binding fails, the pod stays Pending.
	kc patch pod waiting -n $ns --type=json -p '[{"op": "remove", "path": "/spec/schedulingGates"}]' >/dev/null
	if [ -z "$bad" ] && ! wait_for 60 "a FailedScheduling event for the binding" \
		bash -c "kubectl get events -n $ns --field-selector reason=FailedScheduling,involvedObject.name=waiting -o jsonpath='{.items[*].message}' | grep -qF 'failed calling webhook \"bindings.gpu-memory-guard.io\"'"; then
		bad="no FailedScheduling event for the refused binding: $(fs_messages $ns waiting | tail -n 1)"
	fi
	if [ -z "$bad" ] && [ -n "$(kc get pod waiting -n $ns -o jsonpath='{.spec.nodeName}')" ]; then
		bad="the GPU pod was bound with the webhook down"
	fi
	# Exempt namespace: GPU pods are placed both ways.
	if [ -z "$bad" ]; then
		out=$(pod_json exempt-scheduled "$ex" 8Gi 1 "" gpu-a100-0 | kc create -f - 2>&1) || bad="exempt GPU pod refused: $out"
		out=$(pod_json exempt-pinned "$ex" 8Gi 1 gpu-a100-0 | kc create -f - 2>&1) || bad="$bad exempt nodeName GPU pod refused: $out"
	fi
	if [ -z "$bad" ] && ! wait_for 60 "exempt pods running" bash -c "[ \$(kubectl -n $ex get pods --field-selector=status.phase=Running -o name | wc -l) -eq 2 ]"; then
		bad="exempt GPU pods not running: $(kc get pods -n "$ex" -o wide --no-headers | tr '\n' ';')"
	fi
	bash "$E2E_DIR/cluster.sh" webhook-start --binary "$BINARY" || bad="$bad; webhook restart failed"
	WEBHOOK_PID=$(cat "$STATE/pids/webhook.pid" 2>/dev/null)
	if [ -z "$bad" ] && ! wait_for 90 "the held pod to run after the restart" \
		bash -c "[ \"\$(kubectl -n $ns get pod waiting -o jsonpath='{.status.phase}')\" = Running ]"; then
		bad="after the restart the GPU pod still does not run: $(fs_messages $ns waiting | tail -n 1)"
	fi
	if [ -n "$bad" ]; then
		fail "$bad"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "down: nodeName pod refused and binding failed (failurePolicy Fail) while 2 exempt GPU pods ran; restarted: the held pod was bound"
	fi
	kc delete pods -n "$ex" --all --wait=true --timeout=60s >/dev/null 2>&1
	drop_ns $ns
}

# --- 8. (extra) memory of a deleted pod is free after the grace period, not the TTL --------------


test_freed() {
	CURRENT="8 deleted pod frees its memory"
	local ns=e2e-freed node=gpu-a100-0 out admitted wait_ms
	fresh_ns $ns
	# 8 GPUs x 31.25Gi: 250Gi of the A100 node's 278Gi limit; two of them never fit together.
	if ! out=$(pod_json old $ns 250Gi 8 $node | kc create -f - 2>&1); then
		fail "a fitting 250Gi pod on $node was refused: $out"; drop_ns $ns; return
	fi
	admitted=$(now_ms) # old was admitted before kubectl returned
	kc delete pod old -n $ns --wait=true --timeout=60s >/dev/null
	# No review of the node saw old: its reservation goes once the grace period is over (the
	# webhook then asks the API server, which no longer has the pod), not after the 60 s TTL.
	wait_ms=$((admitted + (GRACE + 1) * 1000 - $(now_ms)))
	[ "$wait_ms" -le 0 ] || sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
	if ! out=$(pod_json new $ns 250Gi 8 $node | kc create -f - 2>&1); then
		fail "old (250Gi) deleted, $((GRACE + 1))s after its admission new (250Gi) on the empty node was refused: ${out:0:500}"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "old 250Gi admitted and deleted; new 250Gi on the same node admitted $(($(now_ms) - admitted)) ms after old's admission (grace ${GRACE}s, TTL 60s)"
	fi
	drop_ns $ns
}

# --- 9. (extra) the watch cache: placements make no API call ------------------------------------

# The webhook's GET and LIST calls of pods and nodes so far: the reads a placement may make
# (watches excluded, and the other informers' lists too: a GPUMemoryPolicy relist after an API
# server restart is not a placement's read).
api_reads() {
	curl -sf --max-time 5 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/metrics" |
		awk '/^gpu_memory_guard_api_requests_total\{verb="(get|list)",resource="(pods|nodes)"/ {s += $NF} END {print s + 0}'
}
pod_reviews() { # pod reviews answered so far
	curl -sf --max-time 5 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/metrics" |
		awk '/^gpu_memory_guard_reviews_total\{kind="pod"/ {s += $NF} END {print s + 0}'
}

test_cache() {
	CURRENT="9 placements from the watch cache"
	local ns=e2e-cache node=gpu-a100-0 n=50 out reads0 reads1 rev0 rev1
	fresh_ns $ns
	if ! wait_for 30 "the webhook's watch cache to be synced" \
		bash -c "curl -sf --max-time 2 'http://127.0.0.1:$WEBHOOK_HEALTH_PORT/readyz' | grep -q 'cache: synced'"; then
		fail "the watch cache is not synced: $(curl -s --max-time 2 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/readyz" | tr '\n' ' ')"
		drop_ns $ns; return
	fi
	reads0=$(api_reads) rev0=$(pod_reviews)
	# n pods of 1Gi with spec.nodeName, created in one request each, in parallel batches.
	for i in $(seq 1 $n); do pod_json "c-$i" $ns 1Gi 1 $node; done | jq -s '{apiVersion: "v1", kind: "List", items: .}' >"$STATE/cache-pods.json"
	if ! out=$(kc create -f "$STATE/cache-pods.json" 2>&1); then
		fail "creating $n fitting nodeName pods on $node failed: ${out:0:400}"; drop_ns $ns; return
	fi
	reads1=$(api_reads) rev1=$(pod_reviews)
	if [ $((rev1 - rev0)) -lt $n ]; then
		fail "the webhook answered $((rev1 - rev0)) pod reviews for $n pod creations"
	elif [ "$reads1" -ne "$reads0" ]; then
		fail "$n nodeName placements made $((reads1 - reads0)) API reads (GET/LIST; watches excluded); want 0"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "$n nodeName placements on $node admitted with 0 API reads (api_requests_total{verb=get|list,resource=pods|nodes} $reads0 -> $reads1; $((rev1 - rev0)) pod reviews)"
	fi
	drop_ns $ns
}

# --- 10. (extra) scale: placements among 16,000 pods ----------------------------------------------

SCALE_PODS=${GMG_E2E_SCALE_PODS:-16000}

metrics() { curl -sf --max-time 5 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/metrics"; }
readyz_note() { curl -s --max-time 2 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/readyz" | tail -n 1; }
# The pods count in /readyz "cache: synced (N pods, M nodes)"; empty unless synced.
cache_synced_pods() { readyz_note | sed -n 's/^cache: synced (\([0-9]*\) pods.*/\1/p'; }
cache_synced_with() { local n; n=$(cache_synced_pods); [ -n "$n" ] && [ "$n" -ge "$1" ]; }

# hist_quantile Q BEFORE AFTER: the Q-quantile of the observations of
# gpu_memory_guard_review_duration_seconds between two /metrics snapshots (files), interpolated
# in its bucket as Prometheus' histogram_quantile does; in ms.
hist_quantile() {
	awk -v q="$1" '
		FNR == 1 { f++ }
		/^gpu_memory_guard_review_duration_seconds_bucket/ {
			match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5)
			if (f == 1) b[le] = $NF; else { a[le] = $NF; if (!(le in seen)) { seen[le] = 1; order[n++] = le } }
		}
		END {
			total = a["+Inf"] - b["+Inf"]; if (total <= 0) { print "n/a"; exit }
			rank = q * total; prev_le = 0; prev_c = 0
			for (i = 0; i < n; i++) {
				le = order[i]; c = a[le] - b[le]
				if (c >= rank) {
					if (le == "+Inf") { printf ">%.1f", prev_le * 1000; exit }
					printf "%.2f", (prev_le + (le - prev_le) * (c > prev_c ? (rank - prev_c) / (c - prev_c) : 1)) * 1000; exit
				}
				prev_le = le; prev_c = c
			}
		}' "$2" "$3"
}

# bulk_config VERB NS NODE FIRST LAST: a curl config (-K) for pods s-FIRST..s-LAST of NS, with
# the admin credentials, each answer's HTTP code on a line. VERB POST creates them (one container,
# no GPU, spec.nodeName NODE, a toleration for its taint); DELETE deletes them (grace period 0).
bulk_config() {
	awk -v verb="$1" -v ns="$2" -v node="$3" -v first="$4" -v last="$5" -v port="$APISERVER_PORT" -v pki="$PKI" 'BEGIN {
		q = "\\\""
		for (i = first; i <= last; i++) {
			name = sprintf("s-%05d", i)
			if (verb == "POST") {
				printf "url = \"https://127.0.0.1:%s/api/v1/namespaces/%s/pods\"\n", port, ns
				printf "header = \"Content-Type: application/json\"\n"
				body = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"" name "\",\"labels\":{\"app.kubernetes.io/part-of\":\"gmg-e2e\"}},\"spec\":{\"nodeName\":\"" node "\",\"terminationGracePeriodSeconds\":0,\"tolerations\":[{\"key\":\"gmg-e2e/scale\",\"operator\":\"Exists\"}],\"containers\":[{\"name\":\"main\",\"image\":\"registry.k8s.io/pause:3.10\"}]}}"
				gsub(/"/, q, body)
				printf "data-binary = \"%s\"\n", body
			} else {
				printf "url = \"https://127.0.0.1:%s/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0\"\nrequest = \"DELETE\"\n", port, ns, name
			}
			printf "cacert = \"%s/ca.crt\"\ncert = \"%s/admin.crt\"\nkey = \"%s/admin.key\"\n", pki, pki, pki
			printf "output = \"/dev/null\"\nwrite-out = \"%%{http_code}\\n\"\n"
			if (i < last) print "next"
		}
	}'
}

# bulk VERB NS NODE COUNT DIR: runs bulk_config over s-1..s-COUNT in 4 curl processes, each
# with 32 requests in flight over HTTP/2; prints "OK_COUNT CODE_SUMMARY" (OK: 201 for POST, 200 for
# DELETE).
bulk() {
	local verb=$1 ns=$2 node=$3 count=$4 dir=$5 procs=4 per i first last ok
	per=$(((count + procs - 1) / procs))
	for i in $(seq 0 $((procs - 1))); do
		first=$((i * per + 1)) last=$(((i + 1) * per))
		[ $last -le "$count" ] || last=$count
		[ $first -le $last ] || continue
		bulk_config "$verb" "$ns" "$node" $first $last >"$dir/$verb-$i.cfg"
		curl -s --no-progress-meter --parallel --parallel-max 32 -K "$dir/$verb-$i.cfg" >"$dir/$verb-$i.codes" 2>"$dir/$verb-$i.err" &
	done
	wait
	ok=201
	[ "$verb" = POST ] || ok=200
	echo "$(cat "$dir/$verb"-*.codes | grep -c "^$ok\$") $(cat "$dir/$verb"-*.codes | sort | uniq -c | awk '{ printf "%s%s x%s", s, $2, $1; s = ", " }')$(cat "$dir/$verb"-*.err | sort -u | head -n 2 | tr '\n' ' ')"
}

# ms_stats FILE: "median M ms, p90 P ms, max X ms" of the numbers (ms) in FILE, one a line.
ms_stats() {
	sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR == 0) { print "no samples"; exit }
		printf "median %d ms, p90 %d ms, max %d ms", v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.999)], v[NR] }'
}

test_scale_pods() {
	CURRENT="10 scale: placements among $SCALE_PODS pods"
	local ns=$EXEMPT_NAMESPACE gns=e2e-bulk-gpu node=gpu-a100-0 bulk=scale-0 dir t0 create_s res
	local i out bad="" reads0 reads1 rev0 rev1 synced_s n_pods note
	dir=$(mktemp -d)
	fresh_ns $gns
	# A node nobody manages (no kwok annotation): its pods stay Pending with no status update, so
	# each pod costs the API server its creation and nothing more. Its taint keeps the scheduler
	# away; it has no GPU labels. The pods go to the exempt namespace, which the webhook
	# configuration leaves out (creating them takes the API server's time only, 3x less than
	# through the webhook on this machine), and which the webhook's cache holds all the same
	# (exempt pods count as usage).
	kc create -f - >/dev/null <<EON
apiVersion: v1
kind: Node
metadata:
  name: $bulk
  labels: {kubernetes.io/hostname: $bulk, gmg-e2e/scale: "true"}
spec:
  taints: [{key: gmg-e2e/scale, effect: NoSchedule}]
EON
	log "test 10: creating $SCALE_PODS pods on $bulk"
	t0=$(now_ms)
	res=$(bulk POST "$ns" $bulk "$SCALE_PODS" "$dir")
	create_s=$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')
	n_pods=${res%% *}
	log "test 10: $n_pods pods created in ${create_s}s (HTTP codes: ${res#* })"
	[ "$n_pods" -eq "$SCALE_PODS" ] || bad="only $n_pods of $SCALE_PODS pods created in ${create_s}s (HTTP codes: ${res#* })"
	# The webhook's cache holds them all before any placement is timed.
	t0=$(now_ms)
	if [ -z "$bad" ] && ! wait_for 120 "the watch cache to hold $SCALE_PODS pods" cache_synced_with "$SCALE_PODS"; then
		bad="watch cache not synced with >= $SCALE_PODS pods within 120s: $(readyz_note)"
	fi
	synced_s=$(awk -v ms=$(($(now_ms) - t0)) 'BEGIN { printf "%.1f", ms / 1000 }')
	note=$(readyz_note)
	local room deny
	if [ -z "$bad" ]; then
		# 20 fitting placements of 1Gi on an A100 node, one kubectl create at a time, timed.
		metrics >"$dir/m0" || bad="no metrics"
		reads0=$(api_reads) rev0=$(pod_reviews)
		for i in $(seq 1 20); do
			pod_json "fit-$i" $gns 1Gi 1 $node >"$dir/fit-$i.json"
		done
		for i in $(seq 1 20); do
			t0=$(now_ms)
			if ! out=$(kc create -f "$dir/fit-$i.json" 2>&1); then
				bad="$bad; fit-$i (1Gi on $node) refused: ${out:0:300}"
			fi
			echo $(($(now_ms) - t0)) >>"$dir/lat-fit"
		done
		# 3 that do not fit: 1Gi more than the room left on the node, spread over its 8 GPUs.
		room=$(cluster_usage "$THRESHOLD" $node | jq '(.limit - .declared) / 1073741824 | floor')
		deny=$((room + 1))
		for i in 1 2 3; do
			t0=$(now_ms)
			if out=$(pod_json "nofit-$i" $gns "${deny}Gi" 8 $node | kc create -f - 2>&1); then
				bad="$bad; nofit-$i (${deny}Gi, ${room}Gi left) admitted"
			elif ! grep -qF "$DENIED_POD" <<<"$out" || grep -qE 'could not be asked|no time left' <<<"$out" ||
				! grep -q 'percent limit' <<<"$out"; then
				bad="$bad; nofit-$i not refused for the threshold: ${out:0:300}"
			fi
			echo $(($(now_ms) - t0)) >>"$dir/lat-nofit"
		done
		reads1=$(api_reads) rev1=$(pod_reviews)
		metrics >"$dir/m1" || bad="$bad; no metrics"
	fi
	local over="" fit_lat nofit_lat p50 p99 onnode=0
	if [ -z "$bad" ]; then
		# The oracle for the node placed on (reading all $SCALE_PODS pods takes it 17 s more).
		over=$(cluster_usage "$THRESHOLD" $node | jq -r 'select(.over) | "\(.node): declared \(.declared / 1073741824)Gi > limit \(.limit / 1073741824)Gi"')
		onnode=$(kc get pods -n $gns --field-selector spec.nodeName=$node -o name | wc -l)
		fit_lat=$(ms_stats "$dir/lat-fit") nofit_lat=$(ms_stats "$dir/lat-nofit")
		p50=$(hist_quantile 0.5 "$dir/m0" "$dir/m1") p99=$(hist_quantile 0.99 "$dir/m0" "$dir/m1")
	fi
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	elif [ -n "$over" ]; then
		fail "node over threshold: $over"
	elif [ "$onnode" -ne 20 ]; then
		fail "$onnode pods of $gns on $node, want the 20 fitting ones"
	elif [ $((rev1 - rev0)) -lt 23 ]; then
		fail "the webhook answered $((rev1 - rev0)) pod reviews for 23 placements"
	elif [ "$reads1" -ne "$reads0" ]; then
		fail "23 placements among $SCALE_PODS pods made $((reads1 - reads0)) API reads (GET/LIST); want 0"
	else
		pass "$SCALE_PODS pods created in ${create_s}s; cache synced ${synced_s}s later ($note); 20 x 1Gi on $node admitted (kubectl create: $fit_lat), 3 x ${deny}Gi refused for the threshold ($nofit_lat); webhook review p50 ${p50} ms, p99 ${p99} ms; 0 API reads; $node within its threshold"
	fi
	# Clean up fast: one DELETE per pod, in parallel (deleting the namespace removes its pods one
	# at a time, about 100 a second here).
	t0=$(now_ms)
	res=$(bulk DELETE "$ns" $bulk "$SCALE_PODS" "$dir")
	log "test 10: ${res%% *} pods deleted in $((($(now_ms) - t0) / 1000))s (HTTP codes: ${res#* })"
	wait_for 120 "the bulk pods gone" bash -c "[ \$(kubectl get pods -n $ns -l app.kubernetes.io/part-of=gmg-e2e -o name | wc -l) -eq 0 ]" ||
		log "test 10: bulk pods still there after 120s"
	kc delete node $bulk --wait=false >/dev/null 2>&1
	rm -rf "$dir"
	drop_ns $gns
}

# --- 11. (extra) kube-apiserver restarts while placements are made ------------------------------

watch_restarts() { metrics | awk '/^gpu_memory_guard_cache_watch_restarts_total/ {s += $NF} END {print s + 0}'; }
cache_relists() { metrics | awk '/^gpu_memory_guard_cache_relists_total/ {s += $NF} END {print s + 0}'; }
cache_synced() { readyz_note | grep -q '^cache: synced'; }

# place_retry NS NAME MEMORY NODE LOG: creates a 1-GPU pod with nodeName, retrying for 120 s while
# the API server cannot be reached or answers anything but the webhook's verdict; appends
# "MS NAME admitted|denied|error MESSAGE" to LOG.
place_retry() {
	local ns=$1 name=$2 mem=$3 node=$4 out deadline=$((SECONDS + 120)) tries=0
	while :; do
		tries=$((tries + 1))
		if out=$(pod_json "$name" "$ns" "$mem" 1 "$node" | kc create -f - 2>&1); then
			echo "$(now_ms) $name admitted after $tries tries" >>"$5"; return 0
		elif grep -q 'AlreadyExists' <<<"$out"; then
			echo "$(now_ms) $name admitted (AlreadyExists: the answer to an earlier try was lost) after $tries tries" >>"$5"; return 0
		elif grep -qF "$DENIED_POD" <<<"$out"; then
			echo "$(now_ms) $name denied after $tries tries: $(tr '\n' ' ' <<<"$out")" >>"$5"; return 0
		elif [ $SECONDS -ge $deadline ]; then
			echo "$(now_ms) $name error after $tries tries: $(tr '\n' ' ' <<<"$out")" >>"$5"; return 1
		fi
		sleep 0.3
	done
}

test_apiserver_restart() {
	CURRENT="11 API server restart"
	local ns=e2e-restart node=gpu-h100-b ex=$EXEMPT_NAMESPACE dir out bad="" i
	local r0 rl0 t_stop t_up t_synced reads0 reads1 placer sampler room want_z got_z=0 usage probe
	local stop_wait=5 down=3
	[ "${GMG_E2E_APISERVER_CRASH:-0}" != 1 ] || stop_wait=0 down=0
	fresh_ns $ns
	dir=$(mktemp -d)
	if ! wait_for 60 "the watch cache to be synced" cache_synced; then
		fail "the watch cache is not synced before the restart: $(readyz_note)"; drop_ns $ns; return
	fi
	# Before: 20Gi "victim" and 4 x 5Gi on the H100 node (limit 71.7Gi): 40Gi.
	for i in victim:20Gi p-1:5Gi p-2:5Gi p-3:5Gi p-4:5Gi; do
		out=$(pod_json "${i%%:*}" $ns "${i#*:}" 1 $node | kc create -f - 2>&1) || bad="$bad; ${i%%:*} (${i#*:}) refused before the restart: ${out:0:300}"
	done
	if [ -n "$bad" ]; then fail "${bad#; }"; rm -rf "$dir"; drop_ns $ns; return; fi
	r0=$(watch_restarts) rl0=$(cache_relists)
	# The oracle, sampled every second all along (it fails while the API server is down).
	: >"$dir/over"
	(while [ ! -e "$dir/stop" ]; do over_threshold >>"$dir/over" 2>/dev/null; sleep 1; done) &
	sampler=$!
	# Placements all along: 6 x 5Gi, one after the other, each retried until the webhook's
	# verdict. They fit in every order of the events below (at most 70Gi: victim still there,
	# exempt pod not yet), so all 6 must be admitted.
	(for i in 1 2 3 4 5 6; do place_retry $ns "q-$i" 5Gi $node "$dir/placements"; sleep 0.4; done) &
	placer=$!
	sleep 1
	# A pod deleted right before the stop: its 20Gi must be free afterwards.
	kc delete pod victim -n $ns --wait=false >/dev/null
	t_stop=$(now_ms)
	# GMG_E2E_APISERVER_CRASH=1: SIGKILL and restart at once instead (the webhook's watches break less
	# than --cache-max-staleness before the API server serves again).
	GMG_APISERVER_STOP_WAIT=$stop_wait bash "$E2E_DIR/cluster.sh" apiserver-stop || bad="apiserver-stop failed"
	sleep "$down"
	bash "$E2E_DIR/cluster.sh" apiserver-start || bad="$bad; apiserver-start failed"
	t_up=$(now_ms)
	# Just back: pods the webhook never reviews (exempt namespace) land on nodes, 10Gi on this one
	# and 15Gi on the empty L4 (limit 20.2Gi), and p-1 (5Gi) goes; the cache must reflect all
	# three. A 10Gi placement on the L4 right after must be refused: it fits only if the exempt
	# pod is not counted.
	out=$(pod_json ex-l4 "$ex" 15Gi 1 gpu-l4-0 | kc create -f - 2>&1) || bad="$bad; exempt pod ex-l4 refused: ${out:0:300}"
	place_retry $ns probe 10Gi gpu-l4-0 "$dir/probe"
	out=$(pod_json ex-late "$ex" 10Gi 1 $node | kc create -f - 2>&1) || bad="$bad; exempt pod ex-late refused: ${out:0:300}"
	probe=$(cat "$dir/probe")
	kc delete pod p-1 -n $ns --wait=false >/dev/null 2>&1 || bad="$bad; p-1 not deleted"
	wait $placer
	if ! wait_for 90 "the watch cache to be synced again" cache_synced; then
		bad="$bad; watch cache not synced 90s after the API server came back: $(readyz_note)"
	fi
	t_synced=$(now_ms)
	# After: fill the node from the recovered cache, one 5Gi placement at a time, until the first
	# refusal; what fits is read from the API (the oracle).
	usage=$(node_usage $node)
	room=$(jq '(.limit - .declared) / 1073741824' <<<"$usage")
	want_z=$(jq '(.limit - .declared) / (5 * 1073741824) | floor' <<<"$usage")
	reads0=$(api_reads)
	for i in $(seq 1 $((want_z + 1))); do
		place_retry $ns "z-$i" 5Gi $node "$dir/placements"
		if [ "$(tail -n 1 "$dir/placements" | awk '{ print $3 }')" = admitted ]; then got_z=$((got_z + 1)); else break; fi
	done
	reads1=$(api_reads)
	touch "$dir/stop"
	wait $sampler
	local r1 rl1 final over failclosed errors before after recovering
	r1=$(watch_restarts) rl1=$(cache_relists)
	final=$(node_usage $node)
	over=$(sort -u "$dir/over"; over_threshold)
	# Lines of $dir/placements: MS NAME admitted|denied|error ...
	failclosed=$(awk '$3 == "denied"' "$dir/placements" | grep -cE 'could not be asked|no time left')
	errors=$(awk '$3 == "error"' "$dir/placements" | head -n 1)
	before=$(awk -v t="$t_stop" '$1 < t && $2 ~ /^q-/' "$dir/placements" | wc -l)
	after=$(awk -v t="$t_up" '$1 >= t && $2 ~ /^q-/' "$dir/placements" | wc -l)
	recovering=$(awk -v t="$t_up" -v u="$t_synced" '$1 >= t && $1 < u && $2 ~ /^q-/' "$dir/placements" | wc -l)
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	elif [ -n "$over" ]; then
		fail "node over threshold during or after the restart: $(head -n 3 <<<"$over")"
	elif [ "$(awk '{ print $3 }' <<<"$probe")" != denied ]; then
		fail "10Gi on gpu-l4-0 just after a 15Gi exempt pod landed there (limit 20.2Gi), as the API server came back: ${probe:0:400}"
	elif [ -n "$errors" ]; then
		fail "a placement got no verdict: ${errors:0:400}"
	elif awk '$2 ~ /^q-/ && $3 == "denied"' "$dir/placements" | grep -qvE 'could not be asked|no time left'; then
		fail "a placement made across the restart was refused for the threshold, yet all 6 fit: $(awk '$2 ~ /^q-/ && $3 == "denied"' "$dir/placements" | head -n 1 | cut -c1-400)"
	elif [ "$r1" -le "$r0" ]; then
		fail "cache_watch_restarts_total did not increase ($r0 -> $r1): the webhook did not notice the restart"
	elif [ "$got_z" -ne "$want_z" ]; then
		fail "after the restart the API shows room for $want_z x 5Gi on $node (${room}Gi), the webhook admitted $got_z: $(tail -n 1 "$dir/placements" | cut -c1-400)"
	elif ! tail -n 1 "$dir/placements" | awk -v z="z-$((want_z + 1))" '$2 == z && $3 == "denied"' | grep -q 'percent limit'; then
		fail "the placement past the threshold was not refused for it: $(tail -n 1 "$dir/placements" | cut -c1-400)"
	elif [ "$reads1" -ne "$reads0" ]; then
		fail "$((want_z + 1)) placements after recovery made $((reads1 - reads0)) API reads (GET/LIST); want 0"
	elif jq -e --arg ns $ns --arg ex "$ex" '[.pods[].pod] | any(. == "\($ns)/victim" or . == "\($ns)/p-1") or (any(. == "\($ex)/ex-late") | not)' <<<"$final" >/dev/null; then
		fail "the API's view of $node is not the expected one: $final"
	else
		pass "API server down $(((t_up - t_stop) / 100 / 10)).$(((t_up - t_stop) / 100 % 10))s ($([ $stop_wait = 0 ] && echo SIGKILL || echo SIGTERM), ${down}s, start, /readyz); cache synced again $(((t_synced - t_up) / 100 / 10)).$(((t_synced - t_up) / 100 % 10))s after it was back (watch restarts $r0 -> $r1, relists $rl0 -> $rl1); placements across it: $before before the stop, $((6 - before - after)) while it stopped or started, $after once it was ready ($recovering of them before the cache was synced again), $(awk '$2 ~ /^q-/ && $3 == "admitted"' "$dir/placements" | wc -l) of 6 admitted ($failclosed fail-closed denials); after recovery $got_z x 5Gi admitted = what the API shows fits (victim 20Gi deleted before the stop freed, exempt 10Gi created just after counted), the next refused, 0 API reads; 10Gi on gpu-l4-0 refused right after a 15Gi exempt pod landed there; $node never over threshold ($(jq -r '"\(.declared / 1073741824)Gi of \(.limit / 1073741824 * 100 | floor / 100)Gi"' <<<"$final"))"
	fi
	kc delete pod ex-late ex-l4 -n "$ex" --wait=true --timeout=60s >/dev/null 2>&1
	rm -rf "$dir"
	drop_ns $ns
}

# --- 12. (extra) shared reservations: 2 and 3 replicas behind a round-robin proxy --------------

# Replicas of the webhook as an HA install runs them (issue 8): separate processes with the
# suite's flags, behind rrproxy (test/e2e/rrproxy.c, built next to the binary), which spreads
# connections over them as a Service does; the webhook configuration points at the proxy. Storms
# of parallel placements onto fresh 40Gi nodes of one GPU (limit 36Gi) must never overfill a node
# and must admit exactly what fits; one replica is killed with SIGKILL during a storm.
# GMG_E2E_RESERVATIONS=local runs the replicas with per-process reservations instead (the flag
# --reservations local, or no flag with a binary that predates it): the test must then fail, as
# it did before shared reservations existed. GMG_E2E_RR_ROUNDS: rounds of each storm (1).
# GMG_E2E_FIGURES=FILE: the figures table (markdown) is written there too.
RR_TTL=15
RR_ROUNDS=${GMG_E2E_RR_ROUNDS:-1}
RR_MODE=${GMG_E2E_RESERVATIONS:-shared}
RRPROXY=${GMG_RRPROXY:-$(dirname "$BINARY")/rrproxy}
RR_NS=e2e-shared
RR_NODES=""     # fresh nodes made by this test (deleted at its end)
RR_REPLICAS=0   # replicas running
RR_FIG=""       # the figures table, rows "| ... |"
RR_BAD=""       # problems found, "; "-separated
RR_LAST=""      # the last storm's summary

# The replicas' flags; RR_EXTRA_FLAGS (test 19) are appended (the last of a repeated flag wins).
rr_flags() {
	if [ "$RR_MODE" = shared ]; then
		echo "--reservations shared --reservations-namespace $WEBHOOK_NAMESPACE --reservation-ttl ${RR_TTL}s"
	elif "$BINARY" serve --help 2>&1 | grep -q -- '--reservations '; then
		echo "--reservations local --reservation-ttl ${RR_TTL}s"
	else
		echo "--reservation-ttl ${RR_TTL}s"
	fi
	echo "${RR_EXTRA_FLAGS:-}"
}

# rr_binary I: what replica I runs: the binary, or with RR_SKEW[I] set (a FAKETIME offset such as
# -90s) a wrapper that runs it under libfaketime with its wall clock that far off (the monotonic
# clock left alone, FAKETIME_DONT_FAKE_MONOTONIC=1).
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
RR_SKEW=()
rr_binary() {
	local i=$1 w
	if [ -z "${RR_SKEW[$i]:-}" ]; then
		echo "$BINARY"
		return
	fi
	w="$RR_DIR/replica-$i-clock${RR_SKEW[$i]}"
	printf '#!/bin/sh\nLD_PRELOAD=%s FAKETIME=%s FAKETIME_DONT_FAKE_MONOTONIC=1 exec %s "$@"\n' \
		"$FAKETIME_LIB" "${RR_SKEW[$i]}" "$BINARY" >"$w" && chmod +x "$w" && echo "$w"
}

# " (clocks -90s +90s -90s)" while RR_SKEW is set, else nothing: for the figures.
rr_clocks() { [ -z "${RR_SKEW[1]+set}" ] || echo " (clocks ${RR_SKEW[*]:1})"; }

rr_replica_ready() { curl -sf --max-time 2 "http://127.0.0.1:$1/readyz" | grep -q '^cache: synced'; }

# rr_start N: N replicas and the proxy in front of them, on the ports picked by test 12.
rr_start() {
	local n=$1 i backends=()
	for i in $(seq 1 "$n"); do
		# shellcheck disable=SC2046 # rr_flags is a list of flags
		webhook_launch "replica-$i" "${RR_PORT[$i]}" "${RR_HEALTH[$i]}" "$(rr_binary "$i")" $(rr_flags) || return 1
		backends+=("127.0.0.1:${RR_PORT[$i]}")
	done
	for i in $(seq 1 "$n"); do
		wait_for 60 "replica-$i ready with its cache synced" rr_replica_ready "${RR_HEALTH[$i]}" || return 1
	done
	start_daemon rrproxy "$RRPROXY" "127.0.0.1:$RR_PROXY_PORT" "${backends[@]}" || return 1
	wait_for 10 "rrproxy listening" port_listening "$RR_PROXY_PORT" || return 1
	RR_REPLICAS=$n
	# The configuration already points at the proxy after the first start: this only waits until a
	# placement that must be refused is refused through the new replicas.
	bash "$E2E_DIR/cluster.sh" webhook-register "$RR_PROXY_PORT" >/dev/null
}

# rr_stop: the proxy (SIGTERM: its exit line counts the connections per replica), then the replicas.
rr_stop() {
	local i
	stop_daemon rrproxy
	grep '^rrproxy: exit:' "$STATE/logs/rrproxy.log" | tail -n 1 | sed 's/^/test 12: /' >&2
	for i in $(seq 1 3); do stop_daemon "replica-$i" & done
	wait
	RR_REPLICAS=0
}

# rr_node NAME: a fresh kwok node with one 40Gi GPU (limit 36Gi at the default 0.90), time-sliced
# into 100 nvidia.com/gpu so that the scheduler never stops at the device count.
rr_node() {
	kc create -f - >/dev/null <<EON || return 1
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels:
    kubernetes.io/hostname: $1
    kubernetes.io/os: linux
    gmg-e2e/shared: "true"
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.product: NVIDIA-A100-PCIE-40GB
    nvidia.com/gpu.memory: "40960"
    nvidia.com/gpu.count: "1"
    nvidia.com/gpu.replicas: "100"
    nvidia.com/gpu.sharing-strategy: time-slicing
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  capacity: {cpu: "64", memory: 256Gi, pods: "250", nvidia.com/gpu: "100"}
  allocatable: {cpu: "64", memory: 256Gi, pods: "250", nvidia.com/gpu: "100"}
EON
	RR_NODES="$RR_NODES $1"
}

# Sum over the running replicas of a metric (all its label sets, or those matching $2).
rr_metric() {
	local i
	for i in $(seq 1 "$RR_REPLICAS"); do
		curl -sf --max-time 5 "http://127.0.0.1:${RR_HEALTH[$i]}/metrics" 2>/dev/null
	done | awk -v m="$1" -v l="${2:-}" '$1 == m || index($1, m "{") == 1 { if (l == "" || index($1, l)) s += $NF } END { print s + 0 }'
}
# "conflicts retries writes_ok writes_conflict writes_error reads", summed over the replicas.
rr_counters() {
	echo "$(rr_metric gpu_memory_guard_reservation_conflicts_total) $(rr_metric gpu_memory_guard_reservation_retries_total)" \
		"$(rr_metric gpu_memory_guard_reservation_writes_total 'result="ok"') $(rr_metric gpu_memory_guard_reservation_writes_total 'result="conflict"')" \
		"$(rr_metric gpu_memory_guard_reservation_writes_total 'result="error"') $(rr_metric gpu_memory_guard_reservation_reads_total)"
}

# rr_post DIR: POSTs every pod DIR/pods/NAME.json (metadata.namespace set) at once: one curl, all
# requests in flight together over HTTP/2 (the API server then calls the webhook for each at
# once). Lines "NAME HTTP_CODE" in DIR/codes, each answer in DIR/NAME.out.
rr_post() {
	local dir=$1 f name ns sep=""
	for f in "$dir"/pods/*.json; do
		name=$(basename "$f" .json)
		ns=$(jq -r .metadata.namespace "$f")
		printf '%surl = "https://127.0.0.1:%s/api/v1/namespaces/%s/pods"\n' "$sep" "$APISERVER_PORT" "$ns"
		printf 'header = "Content-Type: application/json"\ndata-binary = "@%s"\noutput = "%s/%s.out"\n' "$f" "$dir" "$name"
		printf 'write-out = "%s %%{http_code}\\n"\nmax-time = 60\n' "$name"
		printf 'cacert = "%s/ca.crt"\ncert = "%s/admin.crt"\nkey = "%s/admin.key"\n' "$PKI" "$PKI" "$PKI"
		sep="next"$'\n'
	done >"$dir/post.cfg"
	curl -s --parallel --parallel-max 200 -K "$dir/post.cfg" >"$dir/codes" 2>"$dir/curl.err"
}

# rr_tally DIR: "CREATED THRESHOLD OTHER ERRORS" of the answers rr_post got: 201, refused by the
# webhook for the threshold, refused otherwise (by the webhook for another reason, or the API
# server's failurePolicy), not answered with 201 or 403 (rr_reasons says why).
rr_tally() {
	local dir=$1 name code created=0 thr=0 other=0 errors=0 msg
	while read -r name code; do
		msg=$(jq -r '.message // empty' "$dir/$name.out" 2>/dev/null | head -c 300)
		if [ "$code" = 201 ]; then
			created=$((created + 1))
			continue
		elif [ "$code" = 403 ] && grep -qF "$DENIED_POD" <<<"$msg" && grep -q 'percent limit' <<<"$msg"; then
			thr=$((thr + 1))
			continue
		elif [ "$code" = 403 ]; then
			other=$((other + 1))
		else
			errors=$((errors + 1))
		fi
	done <"$dir/codes"
	echo "$created $thr $other $errors"
}

# rr_usage NODE...: cluster_usage's line of each NODE (the API's view, the oracle), from one read
# of the API's nodes and pods.
rr_usage() { cluster_usage "$THRESHOLD" | jq -c --args 'select(.node as $n | $ARGS.positional | index($n))' "$@"; }

# rr_fit MEM_GI NODE...: how many MEM_GI pods fit on the NODEs together, from the API's view.
rr_fit() {
	local d=$(($1 * 1073741824))
	shift
	rr_usage "$@" | jq -s --argjson d $d 'map((.limit - .declared) / $d | floor) | add // 0'
}

# rr_placed NODE...: the number of pods of the test's namespace on each NODE, space-separated, from
# one read of the API.
rr_placed() {
	kc get pods -n $RR_NS -o json | jq -r --args '[.items[].spec.nodeName] as $on |
		$ARGS.positional | map(. as $n | [$on[] | select(. == $n)] | length) | join(" ")' "$@"
}
rr_sum() { awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }'; }

# rr_storm KIND LABEL COUNT MEM_GI NODE...: one storm of COUNT pods of MEM_GI each, spread over the
# NODEs in turn: KIND nodename (pod CREATE with spec.nodeName, all at once) or scheduler (pods
# with a nodeSelector to their node, created at once, bound by kube-scheduler). Checks, from the
# API: no node over its threshold; on each node exactly what fits placed (nodename: at once, every
# other one refused for the threshold; scheduler: once the storm settles, within 90 s, and still 3
# s later). Appends a figures row; problems to RR_BAD.
rr_storm() {
	local kind=$1 label=$2 count=$3 mem=$4 round=$5
	shift 5
	local nodes=("$@") dir i node t0 ms c0 c1 want=0 placed=0 over bad="" per="" n f
	dir=$(mktemp -d)
	mkdir "$dir/pods"
	want=$(rr_fit "$mem" "${nodes[@]}")
	for i in $(seq 1 "$count"); do
		node=${nodes[$(((i - 1) % ${#nodes[@]}))]}
		if [ "$kind" = nodename ]; then
			pod_json "$node-p$i" $RR_NS "${mem}Gi" 1 "$node" >"$dir/pods/$node-p$i.json"
		else
			pod_json "$node-p$i" $RR_NS "${mem}Gi" 1 "" "$node" >"$dir/pods/$node-p$i.json"
		fi
	done
	c0=$(rr_counters)
	t0=$(now_ms)
	rr_post "$dir"
	local created denied other errors
	read -r created denied other errors <<<"$(rr_tally "$dir")"
	[ "$(wc -l <"$dir/codes")" -eq "$count" ] || bad="$bad; $(wc -l <"$dir/codes") answers to $count creates ($(head -c 200 "$dir/curl.err"))"
	if [ "$kind" = scheduler ]; then
		[ "$created" -eq "$count" ] || bad="$bad; $((count - created)) of $count unscheduled pods not created ($(awk '$2 != 201 { print $2 }' "$dir/codes" | sort | uniq -c | tr '\n' ' '): $(rr_reasons "$dir"))"
		# Settled: exactly what fits bound (the refused ones keep being retried by the scheduler).
		local deadline=$((SECONDS + 90))
		while :; do
			placed=$(rr_placed "${nodes[@]}" | rr_sum)
			[ "$placed" -lt "$want" ] && [ $SECONDS -lt $deadline ] || break
			sleep 1
		done
		ms=$(($(now_ms) - t0))
		sleep 3
	else
		ms=$(($(now_ms) - t0))
	fi
	c1=$(rr_counters)
	per=" $(rr_placed "${nodes[@]}")"
	placed=$(rr_sum <<<"$per")
	local usage worst
	usage=$(rr_usage "${nodes[@]}")
	over=$(jq -r 'select(.over) | "\(.node) \(.declared / 1073741824 * 100 | round / 100)Gi > \(.limit / 1073741824 * 100 | round / 100)Gi"' <<<"$usage" | tr '\n' ' ')
	worst=$(jq -s 'map(.declared / 1073741824) | max * 100 | round / 100' <<<"$usage")
	if [ -n "$over" ]; then
		bad="$bad; node over its threshold: $over"
	fi
	if [ "$kind" = nodename ]; then
		[ "$created" -eq "$placed" ] || bad="$bad; $created creates answered 201 but the API shows $placed pods on the nodes"
		[ $((errors + other)) -eq 0 ] || bad="$bad; $errors creates failed and $other were refused, not for the threshold: $(rr_reasons "$dir")"
	fi
	[ "$placed" -eq "$want" ] || bad="$bad; $placed placed where $want fit (per node:$per)"
	# Each node's record: one Lease named after it, in the webhook's namespace.
	if [ "$RR_MODE" = shared ]; then
		for node in "${nodes[@]}"; do
			kc get lease -n "$WEBHOOK_NAMESPACE" "$node" >/dev/null 2>&1 || bad="$bad; no Lease $WEBHOOK_NAMESPACE/$node after placements on it"
		done
	fi
	local d
	read -r -a d <<<"$(paste -d' ' <(tr ' ' '\n' <<<"$c0") <(tr ' ' '\n' <<<"$c1") | awk '{ printf "%d ", $2 - $1 }')"
	RR_LAST="$RR_REPLICAS replicas, $kind $count x ${mem}Gi on ${#nodes[@]} node(s), round $round: $placed placed of $want that fit (per node:$per), $denied refused for the threshold, $other refused otherwise, $errors errors; fullest node ${worst}Gi of 36Gi; ${ms} ms; conflicts ${d[0]}, retries ${d[1]}, writes ok ${d[2]} conflict ${d[3]} error ${d[4]}, reads ${d[5]}"
	log "test 12: $RR_LAST${bad:+ -- PROBLEM: ${bad#; }}"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$RR_REPLICAS$(rr_clocks)" "$label" "$round" "$count" "$want" "$placed" \
		"${worst}Gi" "$ms" "${d[0]}" "${d[1]}" "${d[2]}" "$([ -z "$bad" ] && echo ok || echo FAIL)" >>"$RR_DIR/figures.tsv"
	[ -z "$bad" ] || RR_BAD="$RR_BAD; $RR_REPLICAS replicas, $label round $round:$bad"
	kc delete pods -n $RR_NS -l "app.kubernetes.io/part-of=gmg-e2e" --grace-period=0 --force --wait=false >/dev/null 2>&1
	kc delete node "${nodes[@]}" --wait=false >/dev/null 2>&1
	rm -rf "$dir"
}

# rr_storms: every storm, RR_ROUNDS rounds each, on fresh nodes.
rr_storms() {
	local r round a b c
	r=$RR_REPLICAS
	for round in $(seq 1 "$RR_ROUNDS"); do
		a=${RR_PREFIX:-rr}$r-a$round b=${RR_PREFIX:-rr}$r-b$round
		rr_node $a && rr_storm nodename "nodeName 60 x 1Gi, 1 node" 60 1 "$round" $a
		rr_node $b && rr_storm nodename "nodeName 30 x 5Gi, 1 node" 30 5 "$round" $b
		rr_node $a-0 && rr_node $a-1 && rr_node $a-2 &&
			rr_storm nodename "nodeName 45 x 5Gi, 3 nodes" 45 5 "$round" $a-0 $a-1 $a-2
		rr_node $b-s && rr_storm scheduler "Bindings 60 x 1Gi, 1 node" 60 1 "$round" $b-s
		rr_node $b-0 && rr_node $b-1 && rr_node $b-2 &&
			rr_storm scheduler "Bindings 45 x 5Gi, 3 nodes" 45 5 "$round" $b-0 $b-1 $b-2
	done
}

# rr_review PORT NS NAME MEM NODE: an AdmissionReview of a pod CREATE with spec.nodeName sent
# straight to one replica (as the API server sends it); prints response.allowed.
rr_review() {
	local uid
	uid=$(cat /proc/sys/kernel/random/uuid)
	pod_json "$3" "$2" "$4" 1 "$5" | jq --arg uid "$uid" --arg ruid "$(cat /proc/sys/kernel/random/uuid)" '
		.metadata.uid = $uid | .metadata.creationTimestamp = (now | todate) |
		{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
		 request: {uid: $ruid, kind: {group: "", version: "v1", kind: "Pod"},
		   resource: {group: "", version: "v1", resource: "pods"},
		   requestKind: {group: "", version: "v1", kind: "Pod"},
		   requestResource: {group: "", version: "v1", resource: "pods"},
		   name: .metadata.name, namespace: .metadata.namespace, operation: "CREATE",
		   userInfo: {username: "gmg-e2e"}, object: ., dryRun: false,
		   options: {apiVersion: "meta.k8s.io/v1", kind: "CreateOptions"}}}' |
		curl -s --max-time 10 --cacert "$PKI/webhook-ca.crt" -H 'Content-Type: application/json' \
			--cert "$PKI/apiserver-webhook-client.crt" --key "$PKI/apiserver-webhook-client.key" \
			--data-binary @- "https://127.0.0.1:$1/validate" | jq -r '.response.allowed'
}

# rr_reasons DIR: the answers of rr_post that are neither 201 nor the threshold's refusal,
# grouped by message (numbers and names blanked): "COUNT x MESSAGE; ..." (3 most frequent).
rr_reasons() {
	local dir=$1 name code
	while read -r name code; do
		[ "$code" != 201 ] || continue
		jq -r '.message // empty' "$dir/$name.out" 2>/dev/null | grep -v 'percent limit' |
			sed -E "s/^admission webhook \"[a-z.-]+\" denied the request: //; s/$RR_NS\/[a-z0-9-]+|rr[0-9a-z-]+|[0-9.]+(Gi|ms|s)?/_/g; s/^(.{240}).*/\1.../" || { [ -s "$dir/$name.out" ] || echo "HTTP $code, no answer"; }
	done <"$dir/codes" | sort | uniq -c | sort -rn | head -n 3 | awk '{ c = $1; $1 = ""; printf "%s%d x%s", s, c, $0; s = "; " }'
}

# rr_kill_round: 3 replicas. replica-3 admits a 20Gi placement on node K whose pod never comes
# (sent straight to it, as when a replica answers and dies before the API server persists the
# pod); a real 17Gi placement on K must then be refused whichever replica decides it. Then a
# storm of 2 x 60 x 1Gi onto two more nodes, replica-3 killed with SIGKILL in its middle: no node
# over its threshold. After the TTL (from the kill) every node's whole room is admitted in one
# placement: nothing the dead replica reserved counts any more.
rr_kill_round() {
	local k=${RR_PREFIX:-rr}3-k k1=${RR_PREFIX:-rr}3-k1 k2=${RR_PREFIX:-rr}3-k2 out t_kill t0 dir allowed probes=0 victim bad="" n i
	rr_node $k && rr_node $k1 && rr_node $k2 || { RR_BAD="$RR_BAD; kill round: nodes not created"; return; }
	victim=$(cat "$STATE/pids/replica-3.pid")
	allowed=$(rr_review "${RR_PORT[3]}" $RR_NS phantom 20Gi $k)
	[ "$allowed" = true ] || { RR_BAD="$RR_BAD; kill round: replica-3 did not admit 20Gi on the empty $k (allowed: $allowed)"; return; }
	# A replica with an older copy of the record finds the entry when its write conflicts. Dry
	# runs write nothing, so one answered from an older copy is not corrected: only reported.
	if out=$(pod_json beside $RR_NS 17Gi 1 $k | kc create -f - 2>&1); then
		bad="$bad; 17Gi on $k admitted beside replica-3's 20Gi reservation (a replica did not count it)"
	elif ! grep -q 'percent limit' <<<"$out"; then
		bad="$bad; 17Gi on $k beside replica-3's 20Gi reservation refused, but not for the threshold: ${out:0:300}"
	fi
	for i in 1 2 3 4 5 6; do
		pod_json probe $RR_NS 17Gi 1 $k | kc create --dry-run=server -f - >/dev/null 2>&1 || probes=$((probes + 1))
	done
	# The storm, and SIGKILL of replica-3 in its middle.
	dir=$(mktemp -d)
	mkdir "$dir/pods"
	for i in $(seq 1 120); do
		n=$k1
		[ $((i % 2)) = 0 ] && n=$k2
		pod_json "$n-p$i" $RR_NS 1Gi 1 "$n" >"$dir/pods/$n-p$i.json"
	done
	t0=$(now_ms)
	rr_post "$dir" &
	local poster=$!
	sleep 0.4
	disown "$victim" 2>/dev/null # no "Killed" line from bash: the kill is the test's
	kill -KILL "$victim"
	t_kill=$(now_ms)
	wait $poster
	local t_end storm_ms created thr other errors reasons worst
	t_end=$(now_ms)
	storm_ms=$((t_end - t0))
	RR_REPLICAS=2 # the metrics of the two left
	read -r created thr other errors <<<"$(rr_tally "$dir")"
	reasons=$(rr_reasons "$dir")
	local over usage
	usage=$(rr_usage $k $k1 $k2)
	worst=$(jq -s --arg k $k 'map(select(.node != $k) | .declared / 1073741824) | max * 100 | round / 100' <<<"$usage")
	over=$(jq -r 'select(.over) | "\(.node) \(.declared / 1073741824)Gi"' <<<"$usage" | tr '\n' ' ')
	[ -z "$over" ] || bad="$bad; node over its threshold after the storm with the kill: $over"
	[ "$t_kill" -lt "$t_end" ] || bad="$bad; the storm ($storm_ms ms) ended before the kill ($((t_kill - t0)) ms in): not a kill in the middle"
	# After the TTL (counted from the kill: every reservation replica-3 made is older), each node's
	# whole room is admitted, in one placement: it fits only if no dead reservation counts.
	local wait_ms room placed_after="" node
	wait_ms=$((t_kill + (RR_TTL + 2) * 1000 - $(now_ms)))
	[ "$wait_ms" -le 0 ] || sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
	usage=$(rr_usage $k $k1 $k2)
	for node in $k $k1 $k2; do
		room=$(jq --arg n $node 'select(.node == $n) | (.limit - .declared) / 1048576 | floor' <<<"$usage")
		[ "$room" -gt 0 ] || continue
		if ! out=$(pod_json "$node-room" $RR_NS "${room}Mi" 1 $node | kc create -f - 2>&1); then
			bad="$bad; $((RR_TTL + 2))s after the kill, ${room}Mi on $node (all its room by the API) refused: ${out:0:300}"
		elif out=$(pod_json "$node-more" $RR_NS 1Mi 1 $node | kc create -f - 2>&1); then
			bad="$bad; after ${room}Mi filled $node, 1Mi more was admitted"
		else
			placed_after="$placed_after $node ${room}Mi,"
		fi
	done
	over=$(rr_usage $k $k1 $k2 | jq -r 'select(.over) | "\(.node) \(.declared / 1073741824)Gi"' | tr '\n' ' ')
	[ -z "$over" ] || bad="$bad; node over its threshold after the TTL: $over"
	RR_LAST="replica-3 admitted 20Gi on $k for a pod that never came: 17Gi more there refused (dry runs of it: $probes of 6 refused); replica-3 killed $((t_kill - t0)) ms into a storm of 120 x 1Gi on 2 nodes ($storm_ms ms): $created admitted, $thr refused for the threshold, $((errors + other)) without a verdict (${reasons:-none}); $((RR_TTL + 2))s after the kill each node's whole room admitted in one pod:${placed_after%,}"
	log "test 12: $RR_LAST${bad:+ -- PROBLEM: ${bad#; }}"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "3$(rr_clocks), SIGKILL of 1" "nodeName 120 x 1Gi, 2 nodes, kill at $((t_kill - t0)) ms" 1 120 72 \
		"$created" "${worst}Gi" "$storm_ms" "-" "-" "-" "$([ -z "$bad" ] && echo ok || echo FAIL)" >>"$RR_DIR/figures.tsv"
	[ -z "$bad" ] || RR_BAD="$RR_BAD; kill round:$bad"
	kc delete pods -n $RR_NS -l "app.kubernetes.io/part-of=gmg-e2e" --grace-period=0 --force --wait=false >/dev/null 2>&1
	kc delete node $k $k1 $k2 --wait=false >/dev/null 2>&1
	rm -rf "$dir"
}

test_shared_reservations() {
	CURRENT="12 shared reservations: replicas behind a round-robin proxy"
	local t_start=$SECONDS i
	RR_BAD="" RR_NODES="" RR_DIR=$(mktemp -d)
	if [ ! -x "$RRPROXY" ]; then
		fail "rrproxy not found at $RRPROXY (built by the CMake build next to the binary; or set GMG_RRPROXY)"; return
	fi
	fresh_ns $RR_NS
	# The replicas' identity may keep the records (Leases) in the webhook's namespace, nowhere else.
	grant_reservations gpu-memory-guard-e2e-reservations
	PICKED="$PICKED $WEBHOOK_PORT $WEBHOOK_HEALTH_PORT"
	free_port RR_PROXY_PORT
	RR_PORT=() RR_HEALTH=()
	for i in 1 2 3; do free_port "RR_PORT[$i]"; free_port "RR_HEALTH[$i]"; done
	# The suite's webhook stops, so that a placement is refused only once the configuration that
	# points at the proxy is in effect (with the old one it fails: nothing listens there).
	bash "$E2E_DIR/cluster.sh" webhook-stop
	log "test 12: replicas with: $(rr_flags)"
	if rr_start 2; then
		rr_storms
	else
		RR_BAD="$RR_BAD; 2 replicas and the proxy did not start: $(tail -n 3 "$STATE/logs/replica-1.log" "$STATE/logs/rrproxy.log" 2>/dev/null | tr '\n' ' ')"
	fi
	rr_stop
	if rr_start 3; then
		rr_storms
		rr_kill_round
	else
		RR_BAD="$RR_BAD; 3 replicas and the proxy did not start: $(tail -n 3 "$STATE/logs/replica-1.log" "$STATE/logs/rrproxy.log" 2>/dev/null | tr '\n' ' ')"
	fi
	local dead=""
	for i in 1 2; do daemon_alive "replica-$i" || dead="$dead replica-$i"; done
	[ -z "$dead" ] || RR_BAD="$RR_BAD; died during the test:$dead (logs: $STATE/logs)"
	rr_stop
	# Issue 20: storms (pod CREATEs and Bindings) and the kill round with the replicas' clocks 90 s
	# behind, ahead and behind (libfaketime), replica-3, the one killed, behind: entries expire on
	# the API server's clock, so no replica drops another's early and the dead one's still go.
	if [ "$RR_MODE" = shared ] && [ -r "$FAKETIME_LIB" ]; then
		RR_SKEW=("" -90s +90s -90s) RR_PREFIX=sk
		if rr_start 3; then
			local clocks="" now
			now=$(date +%s)
			for i in 1 2 3; do
				clocks="$clocks $(tail -n 1 "$STATE/logs/replica-$i.log" | jq -r '.ts' 2>/dev/null | sed 's/\.[0-9]*Z$/Z/' | xargs -I{} date -d {} +%s 2>/dev/null | awk -v n="$now" '{ printf "%+d", $1 - n }')s"
			done
			log "test 12: replicas' own clocks against this host's:$clocks (wanted -90, +90, -90)"
			grep -Eq '^ -(8[0-9]|9[0-9]|1[01][0-9])s \+(6[0-9]|[7-9][0-9])s -(8[0-9]|9[0-9]|1[01][0-9])s$' <<<"$clocks" ||
				RR_BAD="$RR_BAD; skewed replicas' clocks are not off as set:$clocks"
			rr_node sk3-a1 && rr_storm nodename "nodeName 60 x 1Gi, 1 node" 60 1 1 sk3-a1
			rr_node sk3-b1-s && rr_storm scheduler "Bindings 60 x 1Gi, 1 node" 60 1 1 sk3-b1-s
			rr_kill_round
		else
			RR_BAD="$RR_BAD; 3 skewed replicas and the proxy did not start: $(tail -n 3 "$STATE/logs/replica-1.log" "$STATE/logs/rrproxy.log" 2>/dev/null | tr '\n' ' ')"
		fi
		rr_stop
		RR_SKEW=() RR_PREFIX=rr
	elif [ "$RR_MODE" = shared ]; then
		RR_BAD="$RR_BAD; $FAKETIME_LIB missing (apt-get install libfaketime): the skewed-clock storms did not run"
	fi
	# Back to the suite's webhook and configuration.
	bash "$E2E_DIR/cluster.sh" webhook-start --binary "$BINARY" || RR_BAD="$RR_BAD; the suite's webhook did not start again"
	WEBHOOK_PID=$(cat "$STATE/pids/webhook.pid" 2>/dev/null)
	local leases
	leases=$(kc get leases -n "$WEBHOOK_NAMESPACE" -o name 2>/dev/null | grep -c -E '/(rr|sk)[23]-' || true)
	for i in $RR_NODES; do kc delete lease -n "$WEBHOOK_NAMESPACE" "$i" --ignore-not-found >/dev/null 2>&1; done
	kc delete role,rolebinding -n "$WEBHOOK_NAMESPACE" gpu-memory-guard-e2e-reservations --ignore-not-found >/dev/null 2>&1
	# The figures, as a markdown table (stderr, and GMG_E2E_FIGURES if set).
	{
		echo "| replicas | storm | round | pods | fit | placed | fullest node (limit 36Gi) | time ms | conflicts | retries | writes ok | verdict |"
		echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
		awk -F'\t' '{ printf "|"; for (i = 1; i <= NF; i++) printf " %s |", $i; printf "\n" }' "$RR_DIR/figures.tsv"
	} >"$RR_DIR/figures.md"
	sed 's/^/test 12: /' "$RR_DIR/figures.md" >&2
	[ -z "${GMG_E2E_FIGURES:-}" ] || cp "$RR_DIR/figures.md" "$GMG_E2E_FIGURES"
	local storms
	storms=$(wc -l <"$RR_DIR/figures.tsv")
	if [ -n "$RR_BAD" ]; then
		fail "$(echo "${RR_BAD#; }" | cut -c1-1500)"
	else
		pass "$storms storms ($RR_ROUNDS rounds of 5 kinds with 2 and with 3 replicas, and 2 with 3 whose clocks are 90 s behind, ahead and behind; a kill round after each 3) in $((SECONDS - t_start))s, reservations $RR_MODE: no node over its threshold, on every node exactly what fits placed; $leases Lease records; kill round: $RR_LAST"
	fi
	rm -rf "$RR_DIR"
	drop_ns $RR_NS
}

# --- 19. (issue 12) faults under a steady flow: test/e2e/faults.sh ------------------------------
# shellcheck source=faults.sh
. "$E2E_DIR/faults.sh"

# --- 22. the GPUMemoryPolicy CRD: test/e2e/policies.sh -------------------------------------------
# shellcheck source=policies.sh
. "$E2E_DIR/policies.sh"

# --- 13-16. (issue 9) the scheduler extender: steer, not only refuse ------------------------------

# Issue 9's scenarios. 13 and 14 restart the suite's kube-scheduler with the KubeSchedulerConfiguration
# of docs/scheduler.md for self-managed control planes (cluster.sh scheduler-extender: the
# extender at the webhook's TLS port); 15 runs a second kube-scheduler from the chart's rendered
# configuration; 16 checks the suite's default scheduler, without the extender. Each test restores
# the default scheduler at its end, whatever its verdict. Inputs as in the issue: H100 pods with a
# preferred node affinity for gpu-h100-a (preferences are everyday scoring inputs).
# GMG_E2E_EXTENDER=off leaves the extender out (13, 14: the default scheduler stays; 15: the
# chart's configuration without its extenders): 13-15 must then fail, as they did before it existed.
EXT_MODE=${GMG_E2E_EXTENDER:-on}
EXT_REASON='free of the' # the extender's reason: "needs 20Gi, 11.7Gi free of the 90 percent limit"
EXT_PREFERRED=gpu-h100-a
SCHED2=gpu-memory-guard-scheduler # the chart's ConfigMap, ServiceAccount and Lease (release gpu-memory-guard)
SCHED2_NAME=gpu-memory-guard      # its profile: the pods' spec.schedulerName
B_DENIED='gpu_memory_guard_reviews_total{kind="binding",decision="denied"}'
F_JUDGED='gpu_memory_guard_extender_requests_total{verb="filter",result="judged"}'

wh_metric() { metrics | awk -v s="$1" '$1 == s { v = $2 } END { printf "%d", v + 0 }'; }
# Bindings the webhook admitted (allowed, or allowed with a warning over the warn threshold).
bindings_admitted() { metrics | awk '/^gpu_memory_guard_reviews_total\{kind="binding",decision="(allowed|warned)"\}/ { s += $NF } END { print s + 0 }'; }

ext_scheduler_on() {
	if [ "$EXT_MODE" = off ]; then log "GMG_E2E_EXTENDER=off: kube-scheduler stays without the extender"; return 0; fi
	bash "$E2E_DIR/cluster.sh" scheduler-extender
}
ext_scheduler_off() { bash "$E2E_DIR/cluster.sh" scheduler-default || log "kube-scheduler was not restored to its default configuration"; }

# A pod (or pod template spec) on stdin gets the issue's scheduling inputs: H100 nodes only, a
# preferred node affinity for gpu-h100-a (weight 100).
ext_prefer() {
	jq --arg n "$EXT_PREFERRED" '.spec.nodeSelector = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"} |
	  .spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution = [{weight: 100,
	    preference: {matchExpressions: [{key: "kubernetes.io/hostname", operator: "In", values: [$n]}]}}]'
}

# ext_events NS: "POD<TAB>MESSAGE" for every FailedScheduling event in NS.
ext_events() {
	kc get events -n "$1" --field-selector reason=FailedScheduling \
		-o jsonpath='{range .items[*]}{.involvedObject.name}{"\t"}{.message}{"\n"}{end}' 2>/dev/null
}

# 13: issue 9's case. gpu-h100-a at its threshold 0.76 (annotation: 60.5Gi of 79.6Gi) holds 55Gi;
# gpu-h100-b holds 60Gi of its 71.7Gi. A 10Gi pod preferring gpu-h100-a fits on gpu-h100-b only.
ext_h100a_full() { pod_json probe "$1" 10Gi 1 gpu-h100-a | kc create --dry-run=server -f - >/dev/null 2>&1 && return 1 || return 0; }

test_extender_case() {
	CURRENT="13 extender: a pod preferring a memory-full node is bound where it fits"
	local ns=e2e-ext-case out bad="" b0 a0 f0 b1 a1 f1 node ev
	fresh_ns $ns
	kc annotate node gpu-h100-a --overwrite gpu-memory-guard.io/threshold=0.76 >/dev/null
	out=$(pod_json fill-a $ns 55Gi 1 gpu-h100-a | kc create -f - 2>&1) || bad="55Gi filler on gpu-h100-a refused: $out"
	out=$(pod_json fill-b $ns 60Gi 1 gpu-h100-b | kc create -f - 2>&1) || bad="$bad; 60Gi filler on gpu-h100-b refused: $out"
	# In effect when 10Gi more on gpu-h100-a is refused (it fits under the default 0.90).
	[ -n "$bad" ] || wait_for 30 "threshold 0.76 on gpu-h100-a in effect" ext_h100a_full $ns ||
		bad="10Gi more on gpu-h100-a (55Gi held, threshold 0.76) still admitted after 30s"
	[ -n "$bad" ] || ext_scheduler_on || bad="kube-scheduler did not start with the extender"
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	else
		b0=$(wh_metric "$B_DENIED") a0=$(bindings_admitted) f0=$(wh_metric "$F_JUDGED")
		pod_json llm $ns 10Gi 1 | ext_prefer | kc create -f - >/dev/null
		wait_for 30 "llm bound" bash -c "[ -n \"\$(kubectl -n $ns get pod llm -o jsonpath='{.spec.nodeName}')\" ]"
		sleep 2 # a denied Binding's event and metric, if any, have landed
		node=$(kc -n $ns get pod llm -o jsonpath='{.spec.nodeName}')
		b1=$(wh_metric "$B_DENIED") a1=$(bindings_admitted) f1=$(wh_metric "$F_JUDGED")
		ev=$(fs_messages $ns llm)
		if [ "$node" != gpu-h100-b ]; then
			fail "the 10Gi pod preferring the memory-full gpu-h100-a is bound to '${node:-nothing}' within 30s, not gpu-h100-b (Bindings denied +$((b1 - b0)), filter calls +$((f1 - f0))); events: ${ev:0:500}"
		elif [ $((b1 - b0)) -ne 0 ] || [ $((a1 - a0)) -ne 1 ]; then
			fail "bound to gpu-h100-b, but not on its first attempt: $((b1 - b0)) Bindings denied, $((a1 - a0)) admitted; events: ${ev:0:500}"
		elif grep -qF 'denied the request' <<<"$ev"; then
			fail "a FailedScheduling event quotes a webhook denial: ${ev:0:500}"
		elif [ -n "$ev" ] && grep -vqF "$EXT_REASON" <<<"$ev"; then
			fail "a FailedScheduling event without the extender's reason: ${ev:0:500}"
		elif [ $((f1 - f0)) -lt 1 ]; then
			fail "bound to gpu-h100-b with no filter call to the extender (filter judged $f0 -> $f1)"
		elif [ -n "$(over_threshold)" ]; then
			fail "node over threshold: $(over_threshold)"
		else
			pass "10Gi pod preferring gpu-h100-a (55Gi of its 60.5Gi limit at 0.76) bound to gpu-h100-b (60Gi of 71.7Gi) on its first attempt: 1 Binding admitted, 0 denied, $((f1 - f0)) filter call(s) judged, $(grep -c . <<<"$ev") FailedScheduling event(s)"
		fi
	fi
	ext_scheduler_off
	kc annotate node gpu-h100-a gpu-memory-guard.io/threshold- >/dev/null
	drop_ns $ns
}

# ext_scale NS [SCHEDULER_NAME]: the issue's Deployment (20Gi per replica, 1 GPU, H100 nodes,
# preferring gpu-h100-a) run at 2 replicas, then scaled to 8, past what fits: exactly what fits
# is bound, with zero Bindings denied (the webhook's metrics, before and after), the rest Pending
# with the extender's reason in their FailedScheduling events, and none with a webhook denial.
# Sets EXT_BAD (empty when all holds) and EXT_SUMMARY.
ext_scale() {
	local ns=$1 sched=${2:-default-scheduler} want=0 n cap b0 a0 b1 a1 running pending reasoned denied_ev deadline ev
	EXT_BAD="" EXT_SUMMARY=""
	for n in gpu-h100-a gpu-h100-b; do
		cap=$(node_usage $n | jq --argjson d $((20 * 1073741824)) '(.limit - .declared) / $d | floor')
		want=$((want + (cap < 4 ? cap : 4)))
	done
	b0=$(wh_metric "$B_DENIED") a0=$(bindings_admitted)
	pod_json x $ns 20Gi 1 | ext_prefer | jq --arg s "$sched" '.spec.schedulerName = $s |
	  {apiVersion: "apps/v1", kind: "Deployment", metadata: {name: "vllm", namespace: .metadata.namespace},
	   spec: {replicas: 2, selector: {matchLabels: {app: "vllm"}},
	     template: {metadata: {labels: {app: "vllm", "app.kubernetes.io/part-of": "gmg-e2e"}}, spec: .spec}}}' |
		kc apply -f - >/dev/null
	if ! wait_for 60 "2 replicas running" bash -c "[ \$(kubectl -n $ns get pods --field-selector=status.phase=Running -o name | wc -l) -eq 2 ]"; then
		EXT_BAD="the first 2 replicas did not run within 60s: $(kc get pods -n $ns -o wide --no-headers 2>&1 | awk '{print $1, $3, $7}' | tr '\n' ';') events: $(ext_events $ns | tail -n 2 | tr '\n' ' ')"
		return
	fi
	kc scale deployment vllm -n $ns --replicas=8 >/dev/null
	deadline=$((SECONDS + 60))
	while :; do
		running=$(phase_count $ns Running)
		ev=$(ext_events $ns)
		pending=$(kc get pods -n $ns --field-selector=status.phase=Pending -o jsonpath='{.items[*].metadata.name}')
		reasoned=0
		for n in $pending; do awk -F'\t' -v p="$n" '$1 == p' <<<"$ev" | grep -qF "$EXT_REASON" && reasoned=$((reasoned + 1)); done
		[ "$running" -eq "$want" ] && [ "$reasoned" -eq $((8 - want)) ] && break
		[ $SECONDS -lt $deadline ] || break
		sleep 1
	done
	sleep 3 # kube-scheduler retries the Pending ones on the pods' updates: none may be bound or denied
	running=$(phase_count $ns Running)
	b1=$(wh_metric "$B_DENIED") a1=$(bindings_admitted)
	ev=$(ext_events $ns)
	denied_ev=$(grep -cF 'denied the request' <<<"$ev")
	local over sample
	over=$(over_threshold)
	sample=$(grep -F "$EXT_REASON" <<<"$ev" | tail -n 1 | cut -f2)
	local per
	per=$(for n in gpu-h100-a gpu-h100-b; do echo "$n $(kc get pods -n $ns --field-selector spec.nodeName=$n -o name | wc -l)"; done | tr '\n' ',')
	if [ -n "$over" ]; then
		EXT_BAD="node over threshold: $over"
	elif [ $((b1 - b0)) -ne 0 ] || [ "$denied_ev" -ne 0 ]; then
		EXT_BAD="$((b1 - b0)) Bindings denied by the webhook during the scale-up ($denied_ev FailedScheduling events quote a denial; $running of 8 running, $want fit; per node: ${per%,}): $(grep -F 'denied the request' <<<"$ev" | tail -n 1 | cut -c1-400)"
	elif [ "$running" -ne "$want" ]; then
		EXT_BAD="$running of 8 running, $want fit (per node: ${per%,}); events: $(tail -n 2 <<<"$ev" | tr '\n' ' ' | cut -c1-500)"
	elif [ "$reasoned" -ne $((8 - want)) ]; then
		EXT_BAD="$((8 - want)) Pending replicas should carry the extender's reason in a FailedScheduling event; $reasoned do: $(tail -n 2 <<<"$ev" | tr '\n' ' ' | cut -c1-500)"
	else
		EXT_SUMMARY="$running of 8 bound and running (what fits; per node: ${per%,}), $((a1 - a0)) Bindings admitted, 0 denied (webhook metric $b0 -> $b1), $((8 - want)) Pending with the extender's reason: ${sample:0:300}"
	fi
}

# ext_scale_down NS: the Deployment's replicas gone, the Pending ones first (a ReplicaSet scaled
# down deletes unassigned pods first), so that no Pending replica takes the room the running
# ones free; then the Deployment.
ext_scale_down() {
	kc scale deployment vllm -n "$1" --replicas=0 >/dev/null 2>&1
	wait_for 60 "the replicas gone" bash -c "[ \$(kubectl -n $1 get pods -o name | wc -l) -eq 0 ]" || log "$1: replicas still there after 60s"
	kc delete deployment vllm -n "$1" --wait=false >/dev/null 2>&1
}

test_extender_scale() {
	CURRENT="14 extender: Deployment scaled past what fits, zero Bindings denied"
	local ns=e2e-ext-scale
	fresh_ns $ns
	if ! ext_scheduler_on; then
		fail "kube-scheduler did not start with the extender"
	else
		ext_scale $ns
		if [ -n "$EXT_BAD" ]; then fail "$EXT_BAD"; else pass "$EXT_SUMMARY"; fi
	fi
	ext_scale_down $ns # before the default scheduler returns: it would try the Pending replicas
	ext_scheduler_off
	drop_ns $ns
}

# 15: the chart's second scheduler (scheduler.enabled), from `helm template`: the rendered
# ConfigMap's KubeSchedulerConfiguration with only the extender's urlPrefix and caData changed
# (the webhook on the host, its CA) and clientConnection.kubeconfig added (in the pod, the
# in-cluster ServiceAccount); the rendered Deployment's command; the rendered RBAC, applied, with
# a token of the rendered ServiceAccount, so the API server enforces the chart's permissions.
# The host run as a daemon "gmg-scheduler" (cluster.sh down stops it if the suite is interrupted).
ext_second_start() { # DIR
	local dir=$1 ver port url ca args
	ver=$(kc version -o json | jq -r .serverVersion.gitVersion)
	"$TOOLS_BIN/helm" template gpu-memory-guard "$REPO_ROOT/helm/gpu-memory-guard" -n "$WEBHOOK_NAMESPACE" \
		--kube-version "$ver" --set scheduler.enabled=true >"$dir/render.yaml" 2>"$dir/err" || { cat "$dir/err"; return 1; }
	kc create --dry-run=client -o json -f "$dir/render.yaml" 2>"$dir/err" | jq -s . >"$dir/objects.json" || { cat "$dir/err"; return 1; }
	jq -r --arg n $SCHED2 '.[] | select(.kind == "ConfigMap" and .metadata.name == $n) | .data["config.yaml"]' "$dir/objects.json" >"$dir/chart-config.yaml"
	url="https://127.0.0.1:$WEBHOOK_PORT/scheduler"
	ca=$(base64 -w0 "$PKI/webhook-ca.crt")
	{
		printf 'clientConnection:\n  kubeconfig: %s\n' "$dir/sa.kubeconfig"
		# The chart's client certificate is a Secret mounted in the pod: on the host, a
		# certificate of the webhook's CA stands in for it (the suite's webhook does not
		# require one on the extender routes; the install proof checks the chart's own).
		sed -E -e "s|^(- urlPrefix: ).*|\\1\"$url\"|" -e "s|^(    caData: ).*|\\1$ca|" \
			-e "s|^(    certFile: ).*|\\1$PKI/apiserver-webhook-client.crt|" \
			-e "s|^(    keyFile: ).*|\\1$PKI/apiserver-webhook-client.key|" "$dir/chart-config.yaml"
	} >"$dir/config.yaml"
	if [ "$EXT_MODE" = off ]; then
		awk '/^extenders:/ { exit } 1' "$dir/config.yaml" >"$dir/config.off" && mv "$dir/config.off" "$dir/config.yaml"
		log "GMG_E2E_EXTENDER=off: the chart's configuration without its extenders"
	else
		# Only those lines differ from the chart's: 4 changed, 2 added.
		[ "$(diff "$dir/chart-config.yaml" "$dir/config.yaml" | grep -c '^[<>]')" = 10 ] &&
			grep -q "^- urlPrefix: \"$url\"\$" "$dir/config.yaml" && grep -q "^    caData: $ca\$" "$dir/config.yaml" ||
			{ echo "the rendered configuration is not as expected: $(diff "$dir/chart-config.yaml" "$dir/config.yaml" | cut -c1-120 | tr '\n' ' ')"; return 1; }
	fi
	jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.metadata.labels["app.kubernetes.io/component"] == "scheduler" and
	  (.kind == "ServiceAccount" or .kind == "ClusterRoleBinding" or .kind == "Role" or .kind == "RoleBinding"))]}' \
		"$dir/objects.json" >"$dir/rbac.json"
	kc apply -f "$dir/rbac.json" >/dev/null || return 1
	local token
	token=$(kc create token $SCHED2 -n "$WEBHOOK_NAMESPACE" --duration=1h) || return 1
	cat >"$dir/sa.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gmg-e2e
  cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$PKI/ca.crt"}
users:
- name: $SCHED2
  user: {token: "$token"}
contexts:
- name: gmg-e2e
  context: {cluster: gmg-e2e, user: $SCHED2}
current-context: gmg-e2e
EOF
	chmod 600 "$dir/sa.kubeconfig"
	mapfile -t args < <(jq -r --arg n $SCHED2 '.[] | select(.kind == "Deployment" and .metadata.name == $n) |
	  .spec.template.spec.containers[0].command[1:][]' "$dir/objects.json" | grep -vE '^--(config|bind-address|secure-port)(=|$)')
	free_port port
	echo "---- $(date -u +%FT%TZ) start" >>"$STATE/logs/gmg-scheduler.log"
	start_daemon gmg-scheduler "$TOOLS_BIN/kube-scheduler" "${args[@]}" --config "$dir/config.yaml" \
		--bind-address 127.0.0.1 --secure-port "$port" \
		--authentication-kubeconfig "$dir/sa.kubeconfig" --authorization-kubeconfig "$dir/sa.kubeconfig"
	wait_for 60 "the second scheduler's /readyz" curl -skf --max-time 2 "https://127.0.0.1:$port/readyz" &&
		wait_for 45 "the second scheduler to lead" log_lease_acquired "$STATE/logs/gmg-scheduler.log" "$WEBHOOK_NAMESPACE/$SCHED2" ||
		{ tail -n 5 "$STATE/logs/gmg-scheduler.log"; return 1; }
}

test_extender_second() {
	CURRENT="15 extender: the chart's second scheduler, schedulerName $SCHED2_NAME"
	local ns=e2e-ext-second dir out
	dir=$(mktemp -d)
	fresh_ns $ns
	if ! out=$(ext_second_start "$dir" 2>&1); then
		fail "the chart's second scheduler did not start: $(tr '\n' ' ' <<<"$out" | cut -c1-600)"
	else
		ext_scale $ns $SCHED2_NAME
		if [ -z "$EXT_BAD" ] && grep -hiE 'forbidden|is not allowed|cannot (get|list|watch|create|update|patch)' "$STATE/logs/gmg-scheduler.log" |
			grep -v 'FLAG: ' >"$dir/denials"; then
			EXT_BAD="RBAC denials in the second scheduler's log: $(head -n 2 "$dir/denials" | cut -c1-300)"
		fi
		if [ -n "$EXT_BAD" ]; then fail "$EXT_BAD"; else pass "helm template's configuration (urlPrefix, caData adapted), chart RBAC, leader: $EXT_SUMMARY"; fi
	fi
	stop_daemon gmg-scheduler # first: the Deployment's pods are then never placed again
	ext_scale_down $ns
	[ ! -f "$dir/rbac.json" ] || kc delete -f "$dir/rbac.json" --ignore-not-found >/dev/null 2>&1
	kc delete lease -n "$WEBHOOK_NAMESPACE" $SCHED2 --ignore-not-found >/dev/null 2>&1
	rm -rf "$dir"
	drop_ns $ns
}

# 16: the suite's scheduler as `up` starts it, without the extender (13-15 restored it): a pod
# that can only go to a memory-full node is bound there by kube-scheduler and the webhook refuses
# the Binding; the extender is not asked.
test_extender_safety_net() {
	CURRENT="16 without the extender the webhook still refuses Bindings"
	local ns=e2e-ext-net out b0 f0 b1 f1 config node
	fresh_ns $ns
	config=$(sed -n 's/^SCHEDULER_CONFIG=//p' "$STATE/cluster.env" | tail -n 1)
	if [ -n "$config" ]; then
		fail "kube-scheduler still runs with $config, not as up starts it"; drop_ns $ns; return
	fi
	if ! out=$(pod_json fill-a $ns 65Gi 1 gpu-h100-a | kc create -f - 2>&1); then
		fail "65Gi filler on gpu-h100-a refused: $out"; drop_ns $ns; return
	fi
	b0=$(wh_metric "$B_DENIED") f0=$(wh_metric "$F_JUDGED")
	pod_json pinned $ns 10Gi 1 "" gpu-h100-a | kc create -f - >/dev/null
	wait_for 30 "a FailedScheduling event quoting the webhook" bash -c "kubectl get events -n $ns --field-selector reason=FailedScheduling,involvedObject.name=pinned -o jsonpath='{.items[*].message}' | grep -qF '$DENIED_BINDING'"
	node=$(kc -n $ns get pod pinned -o jsonpath='{.spec.nodeName}')
	b1=$(wh_metric "$B_DENIED") f1=$(wh_metric "$F_JUDGED")
	out=$(fs_messages $ns pinned | tail -n 1)
	if [ -n "$node" ]; then
		fail "10Gi more on gpu-h100-a (65Gi held, limit 71.7Gi) was bound: the webhook let the Binding through ($((b1 - b0)) denied; events: ${out:0:300})"
	elif ! grep -qF "$DENIED_BINDING" <<<"$out" || [ $((b1 - b0)) -lt 1 ]; then
		fail "no Binding refused by the webhook within 30s ($((b1 - b0)) denied, extender filter calls +$((f1 - f0))); events: ${out:0:400}"
	elif [ "$f1" -ne "$f0" ]; then
		fail "the default scheduler asked the extender ($((f1 - f0)) filter calls): it is not restored"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "default scheduler, no extender call: $((b1 - b0)) Binding(s) of a 10Gi pod to gpu-h100-a (65Gi of 71.7Gi) refused by the webhook: ${out:0:300}"
	fi
	drop_ns $ns
}

# --- 17. shared GPUs: time-slicing and MPS (issue 10) ----------------------------------------

# Nodes of nodes/sharing/ (not created by cluster.sh up): created here, deleted at the end.
SHARING_NODES="gpu-ts-2x gpu-mps-0"
sharing_nodes_ready() {
	local n
	for n in $SHARING_NODES; do
		[ "$(kc get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] || return 1
	done
}
sharing_nodes_gone() { ! kc get node $SHARING_NODES -o name 2>/dev/null | grep -q .; }
# sharing_create NAME NS MEM GPUS NODE: 0 when admitted; the API server's answer on stdout.
sharing_create() { pod_json "$1" "$2" "$3" "$4" "$5" | kc create -f - 2>&1; }

test_sharing() {
	CURRENT="17 shared GPUs: time-sliced slices on one card, MPS clients pinned"
	local ns=e2e-sharing out bad="" ev
	local ts_rule="time-sliced: both slices may land on one card"
	local mps_rule="MPS: each client is pinned to the card's memory / 10 replicas"
	if ! out=$(kc create -f "$E2E_DIR/nodes/sharing/" 2>&1) || ! wait_for 60 "nodes $SHARING_NODES Ready (kwok)" sharing_nodes_ready; then
		fail "nodes $SHARING_NODES not created or not Ready: ${out:0:300}"
		kc delete node $SHARING_NODES --ignore-not-found >/dev/null 2>&1
		return
	fi
	fresh_ns $ns
	# gpu-ts-2x: 2 x H100 (79.6Gi, limit 71.7Gi each), 4 slices per card.
	if out=$(sharing_create ts-two $ns 140Gi 2 gpu-ts-2x); then
		bad="$bad; 2 slices declaring 140Gi admitted on gpu-ts-2x (both may be on one 79.6Gi card)"
	elif ! grep -qF "$DENIED_POD" <<<"$out" || ! grep -qF "$ts_rule" <<<"$out"; then
		bad="$bad; 2 slices x 140Gi refused without the rule: ${out:0:300}"
	fi
	out=$(sharing_create ts-eight $ns 140Gi 8 gpu-ts-2x) || bad="$bad; 8 slices declaring 140Gi (70Gi on each card) refused: ${out:0:300}"
	# gpu-mps-0: 1 x L40S (45Gi), 10 MPS clients pinned to 4.5Gi each (limit 4Gi).
	if out=$(sharing_create mps-8 $ns 8Gi 1 gpu-mps-0); then
		bad="$bad; an 8Gi MPS client admitted on gpu-mps-0 (pinned to 4.5Gi)"
	elif ! grep -qF "$DENIED_POD" <<<"$out" || ! grep -qF "$mps_rule" <<<"$out"; then
		bad="$bad; the 8Gi MPS client refused without the rule: ${out:0:300}"
	fi
	out=$(sharing_create mps-4 $ns 4Gi 1 gpu-mps-0) || bad="$bad; a 4Gi MPS client refused: ${out:0:300}"
	# Through kube-scheduler: the Binding of an 8Gi client to the MPS node is refused too.
	pod_json mps-sched $ns 8Gi 1 "" gpu-mps-0 | kc create -f - >/dev/null
	wait_for 30 "a FailedScheduling event quoting the webhook" bash -c "$TOOLS_BIN/kubectl --kubeconfig $STATE/kubeconfig get events -n $ns --field-selector reason=FailedScheduling,involvedObject.name=mps-sched -o jsonpath='{.items[*].message}' | grep -qF '$DENIED_BINDING'"
	ev=$(fs_messages $ns mps-sched | tail -n 1)
	if [ -n "$(kc -n $ns get pod mps-sched -o jsonpath='{.spec.nodeName}')" ]; then
		bad="$bad; kube-scheduler bound the 8Gi MPS client to gpu-mps-0"
	elif ! grep -qF "$DENIED_BINDING" <<<"$ev" || ! grep -qF "$mps_rule" <<<"$ev"; then
		bad="$bad; no Binding refusal naming the MPS rule within 30s: ${ev:0:300}"
	fi
	[ -z "$(over_threshold)" ] || bad="$bad; node over threshold: $(over_threshold)"
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	else
		pass "gpu-ts-2x (2 x H100, 4 slices each): 2 slices x 140Gi refused ($ts_rule), 8 slices x 140Gi admitted; gpu-mps-0 (L40S, 10 MPS clients): 8Gi refused at CREATE and at Binding ($mps_rule), 4Gi admitted"
	fi
	drop_ns $ns
	kc delete node $SHARING_NODES --ignore-not-found >/dev/null 2>&1
	wait_for 60 "nodes $SHARING_NODES deleted" sharing_nodes_gone || log "nodes $SHARING_NODES still there after 60s"
}

# --- 18. (extra) the container image of `make image`, run as the chart runs it ----------------

# The very archive `make image` wrote (GMG_IMAGE: another one), read back with skopeo (the tool
# the README pushes it with), unpacked with umoci into a runtime bundle and run with runc under
# the chart's security context: uid/gid 65532 (fsGroup 65532), read-only root filesystem, every
# capability dropped, no new privileges, the serving certificate and the kubeconfig mounted
# read-only (0440, group 65532, as the chart's Secret volume), /tmp a 16Mi tmpfs (the chart's
# emptyDir), the host network. The image's own entrypoint with the suite's webhook args (as the
# chart's `args:`), seccomp RuntimeDefault as CRI-O and Podman define it (containers-common's
# seccomp.json, which skopeo brings, turned into the runtime spec's form for this machine's
# architecture and a process without capabilities). The real kube-apiserver is pointed at it: a
# placement that fits is allowed and one past the threshold refused, both counted by the
# container's /metrics. Prints the image's size and the time from `runc run` to a synced /readyz.
IMAGE_ARCHIVE=${GMG_IMAGE:-$(dirname "$BINARY")/gpu-memory-guard-image.oci.tar}
RUNTIME_DEFAULT_SECCOMP=/usr/share/containers/seccomp.json
IMG_ID=gmg-e2e-image-$$

img_ready() { curl -sf --max-time 2 "http://127.0.0.1:$1/readyz" | grep -q '^cache: synced'; }
# Reviews of pods the container answered with DECISION (allowed|denied).
img_reviews() {
	curl -sf --max-time 5 "http://127.0.0.1:$1/metrics" |
		awk -v d="$2" '/^gpu_memory_guard_reviews_total\{/ && index($1, "kind=\"pod\"") && index($1, "decision=\"" d "\"") { s += $NF } END { print s + 0 }'
}

# img_bundle DIR PORT HEALTH: DIR/bundle from the archive, its config.json set as the chart runs
# the container; "sizes" lines in DIR/facts.
img_bundle() {
	local dir=$1 port=$2 health=$3 entry
	mkdir -p "$dir/layout" "$dir/tls" "$dir/kube" || return 1
	tar -xf "$IMAGE_ARCHIVE" -C "$dir/layout" || return 1
	umoci unpack --image "$dir/layout:latest" "$dir/bundle" >"$dir/unpack.log" 2>&1 ||
		{ cat "$dir/unpack.log"; return 1; }
	# The Secret volume and the kubeconfig as the kubelet lays them out with fsGroup 65532.
	cp "$PKI/webhook.crt" "$dir/tls/tls.crt" && cp "$PKI/webhook.key" "$dir/tls/tls.key" &&
		cp "$STATE/webhook.kubeconfig" "$dir/kube/kubeconfig" || return 1
	chown root:65532 "$dir"/tls/* "$dir"/kube/* && chmod 0440 "$dir"/tls/* "$dir"/kube/* || return 1
	entry=$(jq -r '.process.args[0]' "$dir/bundle/config.json")
	# The rules that apply to an amd64 process with no capability (Docker's profile format: rules
	# may be limited to some architectures or to holders of a capability).
	jq '{defaultAction, defaultErrnoRet, architectures: ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
	     syscalls: [.syscalls[] | select((.includes.caps // []) == [] and
	       ((.includes.arches // []) == [] or (.includes.arches | index("amd64") != null))) |
	       {names, action} + (if .errnoRet then {errnoRet} else {} end) +
	       (if (.args // []) != [] then {args} else {} end)]}' "$RUNTIME_DEFAULT_SECCOMP" >"$dir/seccomp.json" ||
		return 1
	jq --slurpfile seccomp "$dir/seccomp.json" --arg entry "$entry" --arg tls "$dir/tls" --arg kube "$dir/kube" \
		--arg listen "127.0.0.1:$port" --arg health "127.0.0.1:$health" --arg threshold "$THRESHOLD" \
		--arg exempt "$EXEMPT_NAMESPACE" '
	  .process.terminal = false
	  | .process.args = [$entry, "serve", "--listen", $listen, "--health-listen", $health,
	      "--tls-cert-file", "/etc/gpu-memory-guard/tls/tls.crt",
	      "--tls-key-file", "/etc/gpu-memory-guard/tls/tls.key",
	      "--kubeconfig", "/etc/gpu-memory-guard/kube/kubeconfig",
	      "--threshold", $threshold, "--mode", "enforce", "--exempt-namespace", $exempt,
	      "--log-level", "info"]
	  | .process.user.additionalGids = [65532]
	  | .process.noNewPrivileges = true
	  | .process.capabilities = {bounding: [], effective: [], inheritable: [], permitted: [], ambient: []}
	  | .root.readonly = true
	  | .linux.seccomp = $seccomp[0]
	  | .linux.namespaces |= map(select(.type != "network"))
	  | .mounts += [
	      {destination: "/etc/gpu-memory-guard/tls", type: "bind", source: $tls, options: ["rbind", "ro", "nosuid", "nodev", "noexec"]},
	      {destination: "/etc/gpu-memory-guard/kube", type: "bind", source: $kube, options: ["rbind", "ro", "nosuid", "nodev", "noexec"]},
	      {destination: "/tmp", type: "tmpfs", source: "tmpfs", options: ["nosuid", "nodev", "size=16m", "mode=1777"]}]' \
		"$dir/bundle/config.json" >"$dir/config.json" && mv "$dir/config.json" "$dir/bundle/config.json"
}

# What the kernel says of the container's process (not what config.json asked for): "" when it
# runs as the chart's securityContext says, else what differs.
img_confinement() {
	local pid=$1 bad="" root_opts c m
	grep -qE '^Uid:\s+65532\s+65532\s+65532\s+65532$' "/proc/$pid/status" || bad="$bad; $(grep ^Uid: "/proc/$pid/status")"
	grep -qE '^Gid:\s+65532\s+65532\s+65532\s+65532$' "/proc/$pid/status" || bad="$bad; $(grep ^Gid: "/proc/$pid/status")"
	grep -qE '^Groups:\s+65532\s*$' "/proc/$pid/status" || bad="$bad; $(grep ^Groups: "/proc/$pid/status")"
	for c in CapInh CapPrm CapEff CapBnd CapAmb; do
		grep -qE "^$c:\s+0+$" "/proc/$pid/status" || bad="$bad; $(grep "^$c:" "/proc/$pid/status")"
	done
	grep -qE '^NoNewPrivs:\s+1$' "/proc/$pid/status" || bad="$bad; $(grep ^NoNewPrivs: "/proc/$pid/status")"
	grep -qE '^Seccomp:\s+2$' "/proc/$pid/status" || bad="$bad; no seccomp filter: $(grep ^Seccomp: "/proc/$pid/status")"
	root_opts=$(awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo")
	[[ ,$root_opts, == *,ro,* ]] || bad="$bad; root mounted $root_opts"
	for m in /etc/gpu-memory-guard/tls /etc/gpu-memory-guard/kube; do
		[[ ,$(awk -v m="$m" '$5 == m { print $6 }' "/proc/$pid/mountinfo"), == *,ro,* ]] || bad="$bad; $m not mounted read-only"
	done
	[ "$(readlink "/proc/$pid/ns/net")" = "$(readlink /proc/self/ns/net)" ] || bad="$bad; not on the host network"
	[ "$(readlink "/proc/$pid/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ] || bad="$bad; the host's mount namespace"
	# A write to the root filesystem fails, /tmp (the emptyDir) takes one, as uid 65532.
	runc exec --user 65532:65532 "$IMG_ID" /usr/bin/touch /probe >/dev/null 2>&1 && bad="$bad; wrote /probe on the root filesystem"
	runc exec --user 65532:65532 "$IMG_ID" /usr/bin/touch /tmp/probe >/dev/null 2>&1 || bad="$bad; cannot write /tmp"
	echo "${bad#; }"
}

img_stop() {
	stop_daemon image
	runc delete --force "$IMG_ID" >/dev/null 2>&1 || true
}

test_image() {
	CURRENT="18 the image of make image under runc"
	local ns=e2e-image node=gpu-l4-0 dir="$STATE/image" port health t0 t_ready pid bad digest inspected \
		fit a0 d0 a1 d1 out sizes pkgs missing p v t unpack_ms
	if [ ! -f "$IMAGE_ARCHIVE" ]; then
		fail "no image at $IMAGE_ARCHIVE (make image)"; return
	fi
	[ -f "$RUNTIME_DEFAULT_SECCOMP" ] || { fail "no $RUNTIME_DEFAULT_SECCOMP (containers-common, with skopeo)"; return; }
	for t in runc umoci skopeo; do
		command -v $t >/dev/null || { fail "$t not installed (bash .ci/install-deps.sh)"; return; }
	done
	rm -rf "$dir" && mkdir -p "$dir"
	# skopeo reads the archive as a registry push would, and names the manifest the layout's index does.
	if ! inspected=$(skopeo inspect --raw "oci-archive:$IMAGE_ARCHIVE" 2>&1 | sha256sum | cut -d' ' -f1); then
		fail "skopeo cannot read $IMAGE_ARCHIVE: $inspected"; return
	fi
	free_port port; free_port health
	t0=$(date +%s%N)
	if ! out=$(img_bundle "$dir" "$port" "$health" 2>&1); then
		fail "unpacking the image into a runc bundle failed: ${out:0:400}"; return
	fi
	unpack_ms=$((($(date +%s%N) - t0) / 1000000))
	digest=$(jq -r '.manifests[0].digest' "$dir/layout/index.json")
	if [ "sha256:$inspected" != "$digest" ]; then
		fail "skopeo read manifest sha256:$inspected, the layout's index names $digest"; return
	fi
	# The SBOM the image carries lists every package of the Dockerfile's runtime stage, with the
	# version the image's dpkg database has.
	pkgs=$(bash "$REPO_ROOT/tools/image/build.sh" --spec | awk '$1 == "package" { print $2 }')
	missing=""
	for p in $pkgs; do
		v=$(dpkg-query --admindir="$dir/bundle/rootfs/var/lib/dpkg" -W -f='${Version}' "$p" 2>/dev/null)
		jq -e --arg p "$p" --arg v "$v" '[.packages[] | select(.name == $p and .versionInfo == $v)] | length == 1' \
			"$dir/bundle/rootfs/usr/share/doc/gpu-memory-guard/sbom.spdx.json" >/dev/null 2>&1 || missing="$missing $p=$v"
	done
	if [ -n "$missing" ]; then
		fail "the image's SBOM (/usr/share/doc/gpu-memory-guard/sbom.spdx.json) lacks:$missing"; return
	fi
	if [ "$(jq -r '"\(.process.user.uid):\(.process.user.gid)"' "$dir/bundle/config.json")" != 65532:65532 ]; then
		fail "the image's config does not run as 65532:65532: $(jq -c .process.user "$dir/bundle/config.json")"; return
	fi
	t0=$(date +%s%N)
	( cd "$dir/bundle" && start_daemon image runc run --bundle "$dir/bundle" "$IMG_ID" ) ||
		{ fail "runc run failed: $(tail -n 5 "$STATE/logs/image.log" | tr '\n' ' ')"; img_stop; return; }
	if ! wait_for 60 "the container's /readyz (cache synced)" img_ready "$health"; then
		fail "the container is not ready with its cache synced within 60s: $(tail -n 5 "$STATE/logs/image.log" | tr '\n' ' ')"
		img_stop; return
	fi
	t_ready=$((($(date +%s%N) - t0) / 1000000))
	pid=$(runc state "$IMG_ID" | jq -r .pid)
	bad=$(img_confinement "$pid")
	if [ -n "$bad" ]; then
		fail "the container does not run as the chart's securityContext says: $bad"; img_stop; return
	fi
	if ! out=$(bash "$E2E_DIR/cluster.sh" webhook-register "$port" 2>&1); then
		fail "the API server does not call the container (a placement over the limit not refused): ${out:0:300}"
		bash "$E2E_DIR/cluster.sh" webhook-register >/dev/null 2>&1; img_stop; return
	fi
	fresh_ns $ns
	fit=$(node_usage $node | jq '(.limit - .declared) / 1048576 | floor')
	a0=$(img_reviews "$health" allowed) d0=$(img_reviews "$health" denied)
	if ! out=$(pod_json fits $ns "$((fit / 2))Mi" 1 $node | kc create -f - 2>&1); then
		fail "a $((fit / 2))Mi pod on $node (${fit}Mi free under the limit) was refused: $out"
	elif out=$(pod_json too-much $ns "$((fit - fit / 2 + 1))Mi" 1 $node | kc create -f - 2>&1); then
		fail "$((fit - fit / 2 + 1))Mi more on $node (1Mi past the limit) was admitted"
	elif ! grep -qF "$DENIED_POD" <<<"$out" || ! grep -q 'percent limit' <<<"$out"; then
		fail "$((fit - fit / 2 + 1))Mi more on $node refused, but not for the threshold: ${out:0:300}"
	else
		a1=$(img_reviews "$health" allowed) d1=$(img_reviews "$health" denied)
		sizes="archive $(($(stat -c %s "$IMAGE_ARCHIVE") / 1048576)) MiB, unpacked $(($(du -sb "$dir/bundle/rootfs" | cut -f1) / 1048576)) MiB"
		if [ $((a1 - a0)) -lt 1 ] || [ $((d1 - d0)) -lt 1 ]; then
			fail "the container's /metrics did not count the two placements (allowed +$((a1 - a0)), denied +$((d1 - d0))): another webhook answered"
		elif [ -n "$(over_threshold)" ]; then
			fail "node over threshold: $(over_threshold)"
		else
			pass "image $digest ($sizes) unpacked by umoci in ${unpack_ms}ms, runc run to /readyz synced in ${t_ready}ms as 65532:65532, read-only root, no capabilities, no new privileges, seccomp RuntimeDefault, certificate and kubeconfig read-only, host network; through it the API server admitted $((fit / 2))Mi on $node and refused $((fit - fit / 2 + 1))Mi more: ${out:0:200}"
		fi
	fi
	bash "$E2E_DIR/cluster.sh" webhook-register >/dev/null 2>&1 || log "test 18: the suite's webhook could not be registered again"
	img_stop
	rm -rf "$dir"
	drop_ns $ns
}

# --- 24. inferred demand (issue 19): pods in real projects' shapes, shared and exclusive cards -

# Nodes of nodes/infer/ (not created by cluster.sh up), created here and deleted at the end;
# the pods are workloads/infer/*.yaml (README there: which project's shape each one is).
INFER_NODES="gpu-ts-1x gpu-excl-8x"
infer_nodes_ready() {
	local n
	for n in $INFER_NODES; do
		[ "$(kc get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] || return 1
	done
}
infer_nodes_gone() { ! kc get node $INFER_NODES -o name 2>/dev/null | grep -q .; }
# infer_create FILE NS NODE [NAME]: create workloads/infer/FILE on NODE (renamed NAME); the
# API server's answer (kubectl's stdout and stderr: warnings included) on stdout, 0 if admitted.
infer_create() {
	sed -e "s/nodeName: NODE/nodeName: $3/" "$E2E_DIR/workloads/infer/$1" |
		if [ -n "${4:-}" ]; then sed -e "0,/^  name: .*/s//  name: $4/"; else cat; fi |
		kc create -n "$2" -f - 2>&1
}
# infer_expect FILE NS NODE NAME WANT TEXT: admitted (WANT=1) or refused by the webhook (0), the
# answer containing TEXT; appends to bad otherwise.
infer_expect() {
	local out rc=0
	out=$(infer_create "$1" "$2" "$3" "$4") || rc=1
	if [ "$5" = 1 ] && [ $rc -ne 0 ]; then
		bad="$bad; $4 on $3 refused: ${out:0:300}"
	elif [ "$5" = 0 ] && { [ $rc -eq 0 ] || ! grep -qF "$DENIED_POD" <<<"$out"; }; then
		bad="$bad; $4 on $3 not refused by the webhook: ${out:0:300}"
	elif [ -n "$6" ] && ! grep -qF -- "$6" <<<"$out"; then
		bad="$bad; $4 on $3: the answer lacks \"$6\": ${out:0:400}"
	else
		seen="$seen
  $4 on $3: $( [ "$5" = 1 ] && echo admitted || echo refused)${6:+ ($6)}"
	fi
}

test_infer() {
	CURRENT="24 inferred demand: real-world pod shapes on time-sliced and exclusive cards"
	local ns=e2e-infer out bad="" seen="" i
	if ! out=$(kc create -f "$E2E_DIR/nodes/infer/" 2>&1) || ! wait_for 60 "nodes $INFER_NODES Ready (kwok)" infer_nodes_ready; then
		fail "nodes $INFER_NODES not created or not Ready: ${out:0:300}"
		kc delete node $INFER_NODES --ignore-not-found >/dev/null 2>&1
		return
	fi
	fresh_ns $ns
	# gpu-ts-1x: one H100 (79.6Gi, limit 71.7Gi), 4 time-slices: each pod counts what it takes.
	infer_expect tgi.yaml $ns gpu-ts-1x tgi 1 ""
	infer_expect vllm-shell.yaml $ns gpu-ts-1x vllm-shell 1 ""
	infer_expect kserve-vllm.yaml $ns gpu-ts-1x kserve-llama-predictor 1 ""
	infer_expect hami.yaml $ns gpu-ts-1x hami-vgpu 0 "; counted as 10Gi: nvidia.com/gpumem 10240Mi per GPU"
	infer_expect vllm-docs.yaml $ns gpu-ts-1x vllm-docs 0 "counted as 73.3Gi: vllm's default --gpu-memory-utilization 0.92 of this node's 79.6Gi card"
	infer_expect cuda-vectoradd.yaml $ns gpu-ts-1x cuda-vectoradd 0 "declares no GPU memory, and the GPUs of gpu-ts-1x are shared (time-sliced) with 3 other pod(s)"
	infer_expect kai.yaml $ns gpu-ts-1x kai-fraction 1 ""
	# The engines' shares as the webhook counted them, in its log (the last review of each).
	for i in tgi vllm-shell kserve-llama-predictor; do
		grep -F "\"pod\":\"$i\"" "$STATE/logs/webhook.log" | grep -qF '"demand":"counted as' ||
			bad="$bad; no demand field in the webhook's log line for $i"
	done
	# gpu-excl-8x: eight unshared H100s. A KubeRay worker is admitted, its env copied into a
	# non-GPU init container ignored with a warning; then a stock vLLM pod and seven undeclared
	# 1-GPU pods take the 8 cards, and a ninth finds none.
	infer_expect kuberay-worker.yaml $ns gpu-excl-8x raycluster-gpu-worker 1 "container \"wait-gcs-ready\" declares GPU_MEMORY_LIMIT but asks for no nvidia.com/gpu"
	kc delete pod -n $ns raycluster-gpu-worker --wait=true >/dev/null 2>&1
	infer_expect vllm-docs.yaml $ns gpu-excl-8x vllm-docs-excl 1 ""
	for i in 1 2 3 4 5 6 7; do infer_expect cuda-vectoradd.yaml $ns gpu-excl-8x "vectoradd-$i" 1 ""; done
	infer_expect cuda-vectoradd.yaml $ns gpu-excl-8x vectoradd-9th 0 "pods that take their cards already hold 8 of the node's 8 unshared GPUs"
	out=$(metrics | grep '^gpu_memory_guard_pods_by_demand_source' | tr '\n' ' ')
	grep -q 'source="engine"} [1-9]' <<<"$out" && grep -q 'source="whole-card"} [1-9]' <<<"$out" ||
		bad="$bad; gpu_memory_guard_pods_by_demand_source lacks engine or whole-card pods: ${out:0:300}"
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	else
		pass "each admitted or refused by what it will take:$seen
  metric: $out"
	fi
	drop_ns $ns
	kc delete node $INFER_NODES --ignore-not-found >/dev/null 2>&1
	wait_for 60 "nodes $INFER_NODES deleted" infer_nodes_gone || log "nodes $INFER_NODES still there after 60s"
}

# --- 25. DRA (issue 21): GPUs allocated by the real kube-scheduler's DRA plugin -----------------

# kwok runs no DRA driver, but ResourceSlices are API objects: workloads/dra/ publishes the
# fake nodes' GPUs as NVIDIA's driver would (gpu.nvidia.com, pool = node, gpu-<minor>, capacity
# memory), and the suite's kube-scheduler allocates claims from them (consumable capacity,
# KEP-5075, is on by default since 1.36; DRA-backed extended resources, KEP-5004, GA in 1.37).
DRA_NODES="gpu-dra-1x gpu-dra-mixed gpu-dra-ts"
dra_nodes_ready() {
	local n
	for n in $DRA_NODES; do
		[ "$(kc get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] || return 1
	done
}
dra_nodes_gone() { ! kc get node $DRA_NODES -o name 2>/dev/null | grep -q .; }
# dra_pod NAME NS NODE template|claim CLAIM [COMMAND] [MEM]: a pod the scheduler places on NODE
# (nodeSelector) with one claim (from a ResourceClaimTemplate, or a ResourceClaim by name); no
# GPU resource. COMMAND (words): its container's command, in a vLLM image (kwok runs nothing).
dra_pod() {
	jq -n --arg name "$1" --arg ns "$2" --arg node "$3" --arg how "$4" --arg claim "$5" --arg cmd "${6:-}" --arg mem "${7:-}" '
	{apiVersion: "v1", kind: "Pod",
	 metadata: {name: $name, namespace: $ns, labels: {"app.kubernetes.io/part-of": "gmg-e2e"}},
	 spec: {terminationGracePeriodSeconds: 0, nodeSelector: {"kubernetes.io/hostname": $node},
	   tolerations: [{key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule"}],
	   resourceClaims: [if $how == "template" then {name: "gpu", resourceClaimTemplateName: $claim}
	                    else {name: "gpu", resourceClaimName: $claim} end],
	   containers: [{name: "main", image: "registry.k8s.io/pause:3.10",
	     resources: {claims: [{name: "gpu"}]}} +
	     (if $cmd == "" then {} else {image: "vllm/vllm-openai:v0.9.2", command: ($cmd | split(" "))} end) +
	     (if $mem == "" then {} else {env: [{name: "GPU_MEMORY_LIMIT", value: $mem}]} end)]}}'
}
bound_to() { [ "$(kc get pod -n "$1" "$2" -o jsonpath='{.spec.nodeName}' 2>/dev/null)" = "$3" ]; }
# The webhook's gauge of the node's counted GPU memory (pods and DRA claims), bytes.
dra_declared() { metrics | awk -v n="gpu_memory_guard_node_declared_bytes{node=\"$1\"}" '$1 == n { print $2 }'; }
dra_capacity() { metrics | awk -v n="gpu_memory_guard_node_capacity_bytes{node=\"$1\"}" '$1 == n { print $2 }'; }
dra_slices_seen() { metrics | grep -q '^gpu_memory_guard_cache_objects{resource="resourceslices"} [2-9]'; }
dra_declared_is() { [ "$(dra_declared "$1")" = "$2" ]; }
dra_has_capacity() { [ -n "$(dra_capacity "$1")" ]; }
dra_refused() { fs_messages "$1" "$2" | grep -qF "$DENIED_BINDING"; } # NS POD
# dra_place NAME NS NODE template|claim CLAIM: create, wait up to 60 s for the Binding; appends
# to bad unless bound.
dra_place() {
	local out
	if ! out=$(dra_pod "$@" | kc create -f - 2>&1); then
		bad="$bad; $1 not created: ${out:0:300}"; return 1
	fi
	wait_for 60 "$1 bound to $3" bound_to "$2" "$1" "$3" && return 0
	bad="$bad; $1 not bound to $3: $(fs_messages "$2" "$1" | tail -n 1 | cut -c1-300)"
	return 1
}
dra_drop_pods() { # NS NAMES...: delete, wait until gone (their template claims with them)
	local ns=$1; shift
	kc delete pod -n "$ns" "$@" --grace-period=0 --wait=true --timeout=60s >/dev/null 2>&1 || true
}

test_dra() {
	CURRENT="25 DRA: slices and claims counted (issue 21)"
	local ns=e2e-dra out bad="" seen="" gi=1073741824 h100=$((81559 * 1048576)) i d msg
	if ! out=$(kc create -f "$E2E_DIR/nodes/dra/" 2>&1) || ! wait_for 60 "nodes $DRA_NODES Ready (kwok)" dra_nodes_ready; then
		fail "nodes $DRA_NODES not created or not Ready: ${out:0:300}"
		kc delete node $DRA_NODES --ignore-not-found >/dev/null 2>&1
		return
	fi
	fresh_ns $ns
	if ! out=$(kc apply -f "$E2E_DIR/workloads/dra/deviceclass.yaml" -f "$E2E_DIR/workloads/dra/slice-gpu-dra-1x.yaml" \
		-f "$E2E_DIR/workloads/dra/slice-gpu-dra-mixed.yaml" -f "$E2E_DIR/workloads/dra/slice-gpu-dra-ts.yaml" 2>&1) ||
		! out=$(kc apply -n $ns -f "$E2E_DIR/workloads/dra/templates.yaml" 2>&1); then
		fail "DRA objects not created: ${out:0:400}"
		drop_ns $ns; kc delete node $DRA_NODES --ignore-not-found >/dev/null 2>&1
		return
	fi
	wait_for 30 "the webhook's cache holds the ResourceSlices" dra_slices_seen || bad="$bad; the webhook's cache has not listed the ResourceSlices"
	# Capacity from the slices: 79.6Gi on the DRA-only node; the mixed node sums its
	# device-plugin card (GFD labels) and its DRA card.
	wait_for 30 "gpu-dra-1x's capacity gauge" dra_has_capacity gpu-dra-1x || true
	[ "$(dra_capacity gpu-dra-1x)" = "$h100" ] || bad="$bad; gpu-dra-1x capacity gauge $(dra_capacity gpu-dra-1x), want $h100 (the slice's memory)"
	[ "$(dra_capacity gpu-dra-mixed)" = "$((2 * h100))" ] || bad="$bad; gpu-dra-mixed capacity gauge $(dra_capacity gpu-dra-mixed), want $((2 * h100)) (device plugin + DRA)"
	seen="$seen
  capacity from slices: gpu-dra-1x $(dra_capacity gpu-dra-1x), gpu-dra-mixed $(dra_capacity gpu-dra-mixed) bytes"

	# (b) one claim (30Gi share) shared by 3 pods: counted once, so 19Gi more is admitted
	# (30 + 19 = 49Gi; per pod it would be 109Gi) and the gauge says 49Gi.
	for i in 1 2 3; do dra_place shared-$i $ns gpu-dra-1x claim shared-30gi || true; done
	out=$(kc get resourceclaim -n $ns shared-30gi -o jsonpath='{.status.reservedFor[*].name}' 2>&1)
	[ "$(wc -w <<<"$out")" = 3 ] || bad="$bad; shared-30gi reservedFor: '$out', want 3 pods"
	dra_place plus-19 $ns gpu-dra-1x template share-19gi || true
	wait_for 20 "declared 49Gi on gpu-dra-1x" dra_declared_is gpu-dra-1x $((49 * gi)) ||
		bad="$bad; gpu-dra-1x declared gauge $(dra_declared gpu-dra-1x), want $((49 * gi)) (the shared claim once)"
	seen="$seen
  a claim shared by 3 pods counted once: 30Gi + 19Gi = $(dra_declared gpu-dra-1x) bytes"
	dra_drop_pods $ns shared-1 shared-2 shared-3 plus-19
	kc delete resourceclaim -n $ns shared-30gi --wait=true --timeout=60s >/dev/null 2>&1 || true
	wait_for 30 "gpu-dra-1x free again" dra_declared_is gpu-dra-1x 0 || bad="$bad; gpu-dra-1x still declares $(dra_declared gpu-dra-1x) after the pods and claim were deleted"

	# (c) consumable capacity: 4 x 19Gi fit the device's 79.6Gi (the scheduler allocates all
	# four), the guard refuses the fourth Binding (76Gi > 90% = 71.7Gi).
	for i in 1 2 3; do dra_place share-$i $ns gpu-dra-1x template share-19gi || true; done
	out=$(dra_pod share-4 $ns gpu-dra-1x template share-19gi | kc create -f - 2>&1) || bad="$bad; share-4 not created: $out"
	if wait_for 40 "share-4 refused by the webhook" dra_refused $ns share-4; then
		msg=$(fs_messages $ns share-4 | grep -F "$DENIED_BINDING" | tail -n 1)
		seen="$seen
  4 x 19Gi: 3 bound, the 4th refused at its Binding: ${msg:0:400}"
	else
		bad="$bad; share-4 not refused by the webhook (bound to '$(kc get pod -n $ns share-4 -o jsonpath='{.spec.nodeName}')'): $(fs_messages $ns share-4 | tail -n 1 | cut -c1-300)"
	fi
	bound_to $ns share-4 gpu-dra-1x && bad="$bad; share-4 was bound"
	# Gone before the next checks: the scheduler keeps retrying it, its claim allocated for a
	# moment each time.
	dra_drop_pods $ns share-4
	wait_for 30 "57Gi counted on gpu-dra-1x" dra_declared_is gpu-dra-1x $((57 * gi)) ||
		bad="$bad; gpu-dra-1x declared gauge $(dra_declared gpu-dra-1x) with 3 x 19Gi, want $((57 * gi))"
	# The report (it lists the slices and claims itself) counts them as the webhook does.
	if ! out=$("$BINARY" report --kubeconfig "$STATE/kubeconfig" --threshold "$THRESHOLD" -o json 2>&1); then
		bad="$bad; the report failed: ${out:0:300}"
	else
		d=$(jq -c '.nodes[] | select(.name == "gpu-dra-1x") | [.capacityBytes, .declaredBytes]' <<<"$out")
		[ "$d" = "[$h100,$((57 * gi))]" ] || bad="$bad; the report's gpu-dra-1x [capacity, declared] $d, want [$h100,$((57 * gi))]"
		seen="$seen
  report: gpu-dra-1x [capacity, declared] $d"
	fi

	# (a) the DRA pods' memory counted for a device-plugin-style pod (nvidia.com/gpu and
	# GPU_MEMORY_LIMIT, spec.nodeName): 57Gi of claims + 15Gi = 72Gi is refused, 14Gi admitted.
	if out=$(pod_json dp-15 $ns 15Gi 1 gpu-dra-1x | kc create -f - 2>&1); then
		bad="$bad; dp-15 (57Gi + 15Gi > 71.7Gi) admitted"
	elif ! grep -qF "$DENIED_POD" <<<"$out"; then
		bad="$bad; dp-15 failed, not by the webhook: ${out:0:300}"
	else
		seen="$seen
  device-plugin pod beside 57Gi of claims: 15Gi refused (${out:0:300})"
	fi
	if ! out=$(pod_json dp-14 $ns 14Gi 1 gpu-dra-1x | kc create --dry-run=server -f - 2>&1); then
		bad="$bad; dp-14 (57Gi + 14Gi fits 71.7Gi) refused: ${out:0:300}"
	else
		seen="$seen, 14Gi admitted"
	fi
	kc delete pod -n $ns dp-15 --ignore-not-found >/dev/null 2>&1
	dra_drop_pods $ns share-1 share-2 share-3
	wait_for 30 "gpu-dra-1x free again" dra_declared_is gpu-dra-1x 0 || bad="$bad; gpu-dra-1x still declares $(dra_declared gpu-dra-1x) after the share pods were deleted"

	# (e) a DRA pod's container's own figure (issue 21): vLLM --gpu-memory-utilization 0.85 on a
	# 19Gi share takes 0.85 of the whole H100 (67.7Gi), so beside a 19Gi share pod its Binding
	# is refused (19Gi + 67.7Gi > 71.7Gi) though the two shares (38Gi) fit.
	dra_place plain-19 $ns gpu-dra-1x template share-19gi || true
	out=$(dra_pod vllm-19 $ns gpu-dra-1x template share-19gi "vllm serve m --gpu-memory-utilization 0.85" | kc create -f - 2>&1) || bad="$bad; vllm-19 not created: $out"
	if wait_for 40 "vllm-19 refused by the webhook" dra_refused $ns vllm-19; then
		msg=$(fs_messages $ns vllm-19 | grep -F "$DENIED_BINDING" | tail -n 1)
		grep -qF "its containers' own figure" <<<"$msg" || bad="$bad; vllm-19's refusal does not name its own figure: ${msg:0:500}"
		seen="$seen
  vLLM 0.85 on a 19Gi share beside a 19Gi share: refused at its Binding: ${msg:0:500}"
	else
		bad="$bad; vllm-19 not refused by the webhook (bound to '$(kc get pod -n $ns vllm-19 -o jsonpath='{.spec.nodeName}')'): $(fs_messages $ns vllm-19 | tail -n 1 | cut -c1-300)"
	fi
	dra_drop_pods $ns vllm-19 plain-19
	wait_for 30 "gpu-dra-1x free again" dra_declared_is gpu-dra-1x 0 || bad="$bad; gpu-dra-1x still declares $(dra_declared gpu-dra-1x) after plain-19 and vllm-19 were deleted"
	# ... and the other way round: the vLLM pod alone is bound (67.7Gi fits), then a plain 19Gi
	# share is refused beside it (the vLLM pod's claim counts its figure).
	dra_place vllm-first $ns gpu-dra-1x template share-19gi "vllm serve m --gpu-memory-utilization 0.85" || true
	out=$(dra_pod plain-after $ns gpu-dra-1x template share-19gi | kc create -f - 2>&1) || bad="$bad; plain-after not created: $out"
	if wait_for 40 "plain-after refused by the webhook" dra_refused $ns plain-after; then
		msg=$(fs_messages $ns plain-after | grep -F "$DENIED_BINDING" | tail -n 1)
		seen="$seen
  a 19Gi share beside the bound vLLM pod: refused at its Binding: ${msg:0:400}; declared gauge $(dra_declared gpu-dra-1x)"
	else
		bad="$bad; plain-after not refused beside vllm-first (bound to '$(kc get pod -n $ns plain-after -o jsonpath='{.spec.nodeName}')')"
	fi
	dra_drop_pods $ns plain-after vllm-first
	wait_for 30 "gpu-dra-1x free again" dra_declared_is gpu-dra-1x 0 || bad="$bad; gpu-dra-1x still declares $(dra_declared gpu-dra-1x) after vllm-first was deleted"

	# (f) a whole device time-sliced by its claim's config (NVIDIA's GpuConfig, sharing
	# TimeSlicing; issue 21): the pods naming the claim share the card, so their own figures are
	# summed on it within the threshold: 2 x 30Gi bound (60Gi <= 71.7Gi), a third 30Gi refused at
	# its Binding (90Gi), and a pod with no figure refused beside them (UndeclaredOnSharedCard).
	if ! out=$(kc apply -n $ns -f "$E2E_DIR/workloads/dra/claim-timesliced.yaml" 2>&1); then
		bad="$bad; claim ts-gpu not created: ${out:0:300}"
	else
		dra_place ts-1 $ns gpu-dra-ts claim ts-gpu "" 30Gi || true
		dra_place ts-2 $ns gpu-dra-ts claim ts-gpu "" 30Gi || true
		out=$(kc get resourceclaim -n $ns ts-gpu -o json 2>&1)
		d=$(jq -r '[.status.allocation.devices.config[]?.opaque.parameters.sharing.strategy] | join(",")' <<<"$out" 2>/dev/null)
		[ "$d" = TimeSlicing ] || bad="$bad; ts-gpu's allocation config strategy '$d', want TimeSlicing"
		for i in 3 bare; do
			out=$(dra_pod ts-$i $ns gpu-dra-ts claim ts-gpu "" "$([ $i = 3 ] && echo 30Gi)" | kc create -f - 2>&1) || bad="$bad; ts-$i not created: $out"
			if wait_for 40 "ts-$i refused by the webhook" dra_refused $ns ts-$i; then
				msg=$(fs_messages $ns ts-$i | grep -F "$DENIED_BINDING" | tail -n 1)
				grep -qF "time-sliced" <<<"$msg" || bad="$bad; ts-$i's refusal does not name the time-sliced device: ${msg:0:500}"
				if [ $i = bare ]; then
					grep -qF "declares no GPU memory" <<<"$msg" || bad="$bad; ts-bare's refusal is not for its missing figure: ${msg:0:500}"
				fi
				seen="$seen
  time-sliced claim, 2 x 30Gi bound, ts-$i refused at its Binding: ${msg:0:400}"
			else
				bad="$bad; ts-$i not refused by the webhook (bound to '$(kc get pod -n $ns ts-$i -o jsonpath='{.spec.nodeName}')'): $(fs_messages $ns ts-$i | tail -n 1 | cut -c1-300)"
			fi
			dra_drop_pods $ns ts-$i
		done
		dra_drop_pods $ns ts-1 ts-2
		kc delete resourceclaim -n $ns ts-gpu --wait=true --timeout=60s >/dev/null 2>&1 || true
	fi

	# (d) KEP-5004: nvidia.com/gpu on a node that advertises none, backed by the DeviceClass's
	# extendedResourceName: the scheduler makes the claim; admitted, counted once (79.6Gi, not
	# also as its nvidia.com/gpu unit), and a device-plugin pod beside it is refused.
	if ! out=$(kc patch deviceclass gpu.nvidia.com --type merge -p '{"spec":{"extendedResourceName":"nvidia.com/gpu"}}' 2>&1); then
		bad="$bad; DeviceClass extendedResourceName not accepted (KEP-5004 off?): ${out:0:300}"
	elif ! out=$(pod_json ext-gpu $ns "" 1 "" gpu-dra-1x | kc create -f - 2>&1); then
		bad="$bad; ext-gpu not created: ${out:0:300}"
	elif ! wait_for 60 "ext-gpu bound to gpu-dra-1x" bound_to $ns ext-gpu gpu-dra-1x; then
		bad="$bad; ext-gpu (nvidia.com/gpu by DRA) not bound: $(fs_messages $ns ext-gpu | tail -n 1 | cut -c1-400)"
	else
		d=$(kc get pod -n $ns ext-gpu -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}')
		[ -n "$d" ] || bad="$bad; ext-gpu has no status.extendedResourceClaimStatus"
		wait_for 20 "declared 79.6Gi on gpu-dra-1x" dra_declared_is gpu-dra-1x $h100 ||
			bad="$bad; gpu-dra-1x declared gauge $(dra_declared gpu-dra-1x) with the KEP-5004 pod, want $h100 (once)"
		if out=$(pod_json dp-10 $ns 10Gi 1 gpu-dra-1x | kc create --dry-run=server -f - 2>&1); then
			bad="$bad; dp-10 admitted beside the KEP-5004 pod's whole device"
		elif ! grep -qF "$DENIED_POD" <<<"$out"; then
			bad="$bad; dp-10 failed, not by the webhook: ${out:0:300}"
		fi
		seen="$seen
  KEP-5004 pod admitted (claim $d), counted $(dra_declared gpu-dra-1x) bytes; a 10Gi pod beside it refused: ${out:0:300}"
	fi
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	else
		pass "DRA counted:$seen"
	fi
	drop_ns $ns
	kc delete -f "$E2E_DIR/workloads/dra/slice-gpu-dra-1x.yaml" -f "$E2E_DIR/workloads/dra/slice-gpu-dra-mixed.yaml" \
		-f "$E2E_DIR/workloads/dra/slice-gpu-dra-ts.yaml" \
		-f "$E2E_DIR/workloads/dra/deviceclass.yaml" --ignore-not-found >/dev/null 2>&1
	kc delete node $DRA_NODES --ignore-not-found >/dev/null 2>&1
	wait_for 60 "nodes $DRA_NODES deleted" dra_nodes_gone || log "nodes $DRA_NODES still there after 60s"
}

# --- 21. the report's numbers are the webhook's ----------------------------------------------

# 21 (issue 11): `gpu-memory-guard report -o json` read with the suite's kubeconfig. On gpu-l4-0
# (a 6Gi pod there: the node's limit binds) and gpu-a100-0 (8 GPUs: one GPU's limit binds), a
# pod declaring exactly the report's largestFitBytes is admitted by the webhook (server dry run,
# spec.nodeName) and one byte more is refused; the report's declaredBytes equal usage.jq's from
# the API's pods. Then `kubectl gpu-memory --node gpu-l4-0` (the plugin: a kubectl-gpu_memory
# link on PATH) lists that pod.
test_report() {
	CURRENT="21 report agrees with the webhook"
	local ns=e2e-report out json node fit decl want bad="" seen="" plugin
	fresh_ns $ns
	if ! out=$(pod_json resident $ns 6Gi 1 gpu-l4-0 | kc create -f - 2>&1); then
		fail "a 6Gi pod on gpu-l4-0 was refused: $out"; drop_ns $ns; return
	fi
	if ! json=$("$BINARY" report --kubeconfig "$STATE/kubeconfig" --threshold "$THRESHOLD" -o json 2>&1); then
		fail "the report failed: $json"; drop_ns $ns; return
	fi
	for node in gpu-l4-0 gpu-a100-0; do
		fit=$(jq -r --arg n $node '.nodes[] | select(.name == $n) | .largestFitBytes' <<<"$json")
		decl=$(jq -r --arg n $node '.nodes[] | select(.name == $n) | .declaredBytes' <<<"$json")
		want=$(cluster_usage "$THRESHOLD" $node | jq -r .declared)
		if ! [[ "$fit" =~ ^[0-9]+$ ]] || [ "$fit" -le 1048576 ]; then
			bad="$bad; $node: largest fit '$fit'"; continue
		fi
		[ "$decl" = "$want" ] || bad="$bad; $node: the report declares $decl, the API's pods $want"
		out=$(pod_json fit $ns "$fit" 1 $node | kc create --dry-run=server -f - 2>&1) ||
			bad="$bad; $node: $fit bytes (the largest fit) refused: $out"
		if out=$(pod_json over $ns "$((fit + 1))" 1 $node | kc create --dry-run=server -f - 2>&1); then
			bad="$bad; $node: $((fit + 1)) bytes (one more than the largest fit) admitted"
		elif ! grep -qF "$DENIED_POD" <<<"$out"; then
			bad="$bad; $node: $((fit + 1)) bytes failed, but not by the webhook: $out"
		fi
		seen="$seen$node: $fit admitted, $((fit + 1)) refused, declared $decl; "
	done
	plugin=$(mktemp -d)
	ln -s "$BINARY" "$plugin/kubectl-gpu_memory"
	out=$(PATH="$plugin:$PATH" KUBECONFIG="$STATE/kubeconfig" "$TOOLS_BIN/kubectl" gpu-memory --node gpu-l4-0 2>&1) ||
		bad="$bad; kubectl gpu-memory failed: $out"
	grep -q "^$ns  *resident " <<<"$out" || bad="$bad; kubectl gpu-memory --node gpu-l4-0 does not list $ns/resident: $out"
	rm -rf "$plugin"
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "${seen}kubectl gpu-memory lists the node's pod"
	fi
	drop_ns $ns
}

# --- 26. client authentication: the API server presents its certificate, a forger has none ----

# The suite's webhook requires a client certificate on POST /validate (lib.sh, webhook_launch),
# which kube-apiserver presents through its AdmissionConfiguration (cluster.sh). Issue 20's
# attack 2, a forged pod CREATE review for a made-up 14Gi pod with nodeName, is refused with 403
# whether it comes without a certificate or with one of the cluster's CA (the admin's); a real
# pod's review, sent by the API server, is judged (a fitting pod admitted, an overfull one
# denied by the webhook); only the forger's attempts count in client_auth_failures_total.
client_auth_failures() {
	metrics | awk '$1 == "gpu_memory_guard_client_auth_failures_total{route=\"admission\"}" {v = $2} END {printf "%d", v + 0}'
}
forged_review() { # CURL_CERT_ARGS...: prints the HTTP status
	pod_json ghost-1 default 14Gi 1 gpu-h100-b | jq '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
	  request: {uid: "forged-1", kind: {group: "", version: "v1", kind: "Pod"},
	    resource: {group: "", version: "v1", resource: "pods"}, name: "ghost-1", namespace: "default",
	    operation: "CREATE", userInfo: {username: "nobody"}, object: (.metadata.uid = "u-ghost"), dryRun: false}}' |
		curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$PKI/webhook-ca.crt" \
			-H 'Content-Type: application/json' "$@" --data-binary @- "https://127.0.0.1:$WEBHOOK_PORT/validate"
}
test_client_auth() {
	CURRENT="26 client authentication"
	local ns=e2e-clientauth out a0 a1 c1 c2
	fresh_ns $ns
	a0=$(client_auth_failures)
	c1=$(forged_review)
	c2=$(forged_review --cert "$PKI/admin.crt" --key "$PKI/admin.key")
	a1=$(client_auth_failures)
	if [ "$c1" != 403 ] || [ "$c2" != 403 ]; then
		fail "a forged review was not refused with 403: without a certificate HTTP $c1, with the cluster CA's admin certificate HTTP $c2"
	elif ! out=$(pod_json fits $ns 10Gi 1 gpu-h100-b | kc create -f - 2>&1); then
		fail "a fitting 10Gi pod on gpu-h100-b was refused (the API server's review not authenticated?): $out"
	elif out=$(pod_json over $ns 80Gi 1 gpu-h100-b | kc create -f - 2>&1) || ! grep -qF "$DENIED_POD" <<<"$out"; then
		fail "an 80Gi pod on gpu-h100-b was not refused by the webhook itself: $out"
	elif [ "$(client_auth_failures)" != "$((a0 + 2))" ] || [ "$a1" != "$((a0 + 2))" ]; then
		fail "client_auth_failures_total{route=\"admission\"} went $a0 -> $a1 -> $(client_auth_failures), want +2 (the forger's two attempts only)"
	elif [ -n "$(over_threshold)" ]; then
		fail "node over threshold: $(over_threshold)"
	else
		pass "forged reviews refused with 403 (no certificate; the cluster CA's admin certificate); the API server's own reviews authenticated and judged (10Gi admitted, 80Gi denied by the webhook); client_auth_failures_total{route=\"admission\"} +2"
	fi
	drop_ns $ns
}

# --- run -----------------------------------------------------------------------------------

log "e2e: running tests (cluster up after $((SECONDS - START))s)"
# timed N TEST_FUNCTION: runs it, logs its duration (settle included) and keeps it for the end.
DURATIONS=""
timed() {
	local n=$1 t0
	t0=$(now_ms)
	SETTLE_MS=0
	"$2"
	t0=$((($(now_ms) - t0 + 500) / 1000))
	log "e2e: test $n took ${t0}s (settling after it $((SETTLE_MS / 1000)).$((SETTLE_MS % 1000 / 100))s)"
	DURATIONS="$DURATIONS $n:${t0}s"
}
want 1 && timed 1 test_scale
want 2 && timed 2 test_nodename
want 3 && timed 3 test_dryrun
want 4 && timed 4 test_ordinary
want 5 && timed 5 test_annotation
want 6 && timed 6 test_parallel
want 7 && timed 7 test_outage
want 8 && timed 8 test_freed
want 9 && timed 9 test_cache
want 10 && timed 10 test_scale_pods
want 11 && timed 11 test_apiserver_restart
want 12 && timed 12 test_shared_reservations
want 13 && timed 13 test_extender_case
want 14 && timed 14 test_extender_scale
want 15 && timed 15 test_extender_second
want 16 && timed 16 test_extender_safety_net
want 17 && timed 17 test_sharing
want 18 && timed 18 test_image
want 19 && timed 19 test_faults
want 20 && timed 20 test_soak
want 21 && timed 21 test_report
want 22 && timed 22 test_policy_crd
want 23 && timed 23 test_policy_apply
want 24 && timed 24 test_infer
want 25 && timed 25 test_dra
want 26 && timed 26 test_client_auth

if [ -n "$BESIDE_PID" ]; then
	log "e2e: waiting for tests $BESIDE (beside, log $BESIDE_LOG)"
	beside_wait 3600
	brc=$(cat "$STATE/beside.rc" 2>/dev/null)
	brc=${brc:-1}
	BESIDE_PID=""
	echo "---- tests $BESIDE, run beside the others on a cluster of their own: ----"
	cat "$BESIDE_LOG"
	echo "---- end of tests $BESIDE ----"
	CURRENT="tests $BESIDE (beside)"
	verdict=$(tail -n 1 "$BESIDE_LOG")
	if [[ $verdict =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
		PASSED=$((PASSED + BASH_REMATCH[1]))
		FAILED=$((FAILED + BASH_REMATCH[2]))
		[ "$brc" -eq 0 ] || [ "${BASH_REMATCH[2]}" -ne 0 ] || fail "their run.sh exited $brc after: $verdict"
	else
		fail "their run.sh ended without a verdict (exit $brc), last line: $verdict"
	fi
fi
if ! daemon_alive webhook; then
	CURRENT="webhook process"
	fail "the webhook died during the suite; last log lines: $(tail -n 5 "$STATE/logs/webhook.log" | tr '\n' ' ')"
fi
if [ "$FAILED" -ne 0 ]; then
	log "webhook log: $STATE/logs/webhook.log (last lines below)"
	tail -n 15 "$STATE/logs/webhook.log" >&2 || true
fi
# Tear down before the verdict, so that "N passed, M failed" is the last line printed.
rc=0
[ "$FAILED" -eq 0 ] || rc=1
trap - EXIT
cleanup $rc
log "e2e: done in $((SECONDS - START))s; per test (number:seconds):$DURATIONS"
echo "$PASSED passed, $FAILED failed"
exit $rc
