#!/usr/bin/env bash
# End-to-end suite: the webhook binary against a real kube-apiserver, scheduler,
# controller-manager and kwok nodes (test/e2e/cluster.sh): the seven tests of issue 3, an
# eighth (capacity of a deleted pod is free once the grace period is over, long before the TTL),
# a ninth (placements from the watch cache make no API call), a tenth (the same among 16,000 pods;
# GMG_E2E_SCALE_PODS sets the count) and an eleventh (kube-apiserver restarted mid-run).
#
# Usage: run.sh /abs/path/to/gpu-memory-guard [TEST_NUMBER...]
# Every verdict is read back from the API (pods, events, kubectl's own errors); per-node usage is
# recomputed from `kubectl get pods -o json` by usage.jq, never taken from the webhook's logs.
# Prints PASS/FAIL per test with the reason, then "N passed, M failed"; exits 1 on any failure.
# The cluster lives in its own state folder (so a demo cluster left up is not disturbed) and is
# torn down on exit; GMG_E2E_KEEP=1 keeps it up for a look.
set -uo pipefail

BINARY=${1:-}
[ -n "$BINARY" ] && [ -x "$BINARY" ] || { echo "usage: $0 /abs/path/to/gpu-memory-guard [TEST...]" >&2; exit 2; }
shift
ONLY=" $* "
# Always a state folder of its own: an inherited GMG_E2E_STATE (after `eval "$(cluster.sh env)"`)
# names somebody's cluster, which this suite must neither reuse nor tear down.
GMG_E2E_STATE=$(mktemp -d "${TMPDIR:-/tmp}/gmg-e2e-run.XXXXXX")
export GMG_E2E_STATE
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
# So that a test's deleted pods cannot count in the next one, the suite pauses a little longer
# than the grace period after each test (settle); test 8 checks the grace period is enough.
GRACE=5
SETTLE=${GMG_E2E_SETTLE:-$((GRACE + 1))}

log "e2e: building or reusing the control-plane tools"
GMG_TOOLS_BIN=$(bash "$E2E_DIR/build-tools.sh" | tail -n 1) || die "building the tools failed"
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
want() { case "$ONLY" in "  ") return 0 ;; *" $1 "*) return 0 ;; *) return 1 ;; esac; }

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

fresh_ns() { kc create namespace "$1" >/dev/null; }
drop_ns() {
	kc delete namespace "$1" --wait=true --timeout=120s >/dev/null 2>&1 || log "namespace $1 not gone after 120s"
	sleep "$SETTLE" # see GRACE
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

now_ms() { echo $(($(date +%s%N) / 1000000)); }

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

api_reads() { # the webhook's GET and LIST calls so far (watches excluded)
	curl -sf --max-time 5 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/metrics" |
		awk '/^gpu_memory_guard_api_requests_total\{verb="(get|list)"/ {s += $NF} END {print s + 0}'
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
		pass "$n nodeName placements on $node admitted with 0 API reads (api_requests_total{verb=get|list} $reads0 -> $reads1; $((rev1 - rev0)) pod reviews)"
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

# --- run -----------------------------------------------------------------------------------

log "e2e: running tests (cluster up after $((SECONDS - START))s)"
want 1 && test_scale
want 2 && test_nodename
want 3 && test_dryrun
want 4 && test_ordinary
want 5 && test_annotation
want 6 && test_parallel
want 7 && test_outage
want 8 && test_freed
want 9 && test_cache
want 10 && test_scale_pods
want 11 && test_apiserver_restart

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
log "e2e: done in $((SECONDS - START))s"
echo "$PASSED passed, $FAILED failed"
exit $rc
