#!/usr/bin/env bash
# Attack suite: hostile and malformed input against the real gpu-memory-guard binary over TLS on
# loopback, backed by the API server TEST DOUBLE (test/integration/apiserver_double*).
#
#   test/attack/attack.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN TEST_DATA_DIR
#
# Every check here passes on the current code: it is a regression net for what held up under
# attack (wrong JSON types, NUL bytes, case-folded keys, body caps, chunked bodies, query strings,
# content types, methods, TLS versions, slow clients, concurrent bindings to one node, API server
# failures, SIGTERM under load). For every review that decodes, the answer must be HTTP 200 with
# apiVersion admission.k8s.io/v1, kind AdmissionReview and response.uid == request.uid.
#
# Bounded: every client call has a timeout, loops have fixed counts, only 127.0.0.1 is used, and
# every process started here is stopped by its pid on exit. Needs bash, curl, jq, openssl.
# GMG_KEEP_TMP=1 keeps the scratch directory (logs, certificates).
set -u

BIN=${1:?usage: attack.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN TEST_DATA_DIR}
DOUBLE=${2:?usage: attack.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN TEST_DATA_DIR}
DATA=${3:?usage: attack.sh GPU_MEMORY_GUARD_BIN APISERVER_DOUBLE_BIN TEST_DATA_DIR}
for tool in curl jq openssl; do
	command -v "$tool" >/dev/null || {
		echo "attack: $tool is needed" >&2
		exit 1
	}
done

T=$(mktemp -d "${TMPDIR:-/tmp}/gmg-attack-XXXXXX")
GMG_PID= DOUBLE_PID=
FAILS=0 CHECKS=0

cleanup() {
	[ -n "$GMG_PID" ] && kill "$GMG_PID" 2>/dev/null
	[ -n "$DOUBLE_PID" ] && kill "$DOUBLE_PID" 2>/dev/null
	wait 2>/dev/null
	if [ "${GMG_KEEP_TMP:-0}" = 1 ]; then
		echo "attack: kept $T" >&2
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

pass() { CHECKS=$((CHECKS + 1)); }
fail() {
	CHECKS=$((CHECKS + 1))
	FAILS=$((FAILS + 1))
	echo "FAIL: $*" >&2
}

# ---------------------------------------------------------------------------------------------
# Set-up: certificates, the API server double with two fresh nodes, the binary.
# Node atk-n1 / atk-n2: 1 GPU of 10240 MiB, so a 90% budget of 9Gi.
cat >"$T/state.json" <<'EOF'
{"nodes": [
 {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "atk-n1", "labels":
   {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "10240"}},
  "status": {"allocatable": {"nvidia.com/gpu": "1"}}},
 {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "atk-n2", "labels":
   {"nvidia.com/gpu.count": "1", "nvidia.com/gpu.memory": "10240"}},
  "status": {"allocatable": {"nvidia.com/gpu": "1"}}},
 {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "atk-nolabels"}, "status": {}}
], "pods": [
 {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "atk-unbound", "namespace": "inference",
   "uid": "uid-atk-unbound"}, "spec": {"containers": [{"name": "main", "image": "x",
   "resources": {"limits": {"nvidia.com/gpu": "1"}},
   "env": [{"name": "GPU_MEMORY_LIMIT", "value": "4Gi"}]}]}, "status": {"phase": "Pending"}}
]}
EOF

"$BIN" certs --out-dir "$T/certs" --ip 127.0.0.1 >/dev/null || {
	echo "attack: cannot make certificates" >&2
	exit 1
}
mkdir -p "$T/api"
"$DOUBLE" --dir "$T/api" --state "$DATA" --state "$T/state.json" >"$T/api/url" 2>"$T/api/log" &
DOUBLE_PID=$!
for _ in $(seq 100); do
	[ -s "$T/api/url" ] && [ -s "$T/api/kubeconfig" ] && break
	sleep 0.1
done
API=$(head -n 1 "$T/api/url")
[ -n "$API" ] || {
	echo "attack: the API server double did not start: $(cat "$T/api/log")" >&2
	exit 1
}
API_TOKEN=$(cat "$T/api/token")

# The attacks below drive the API server path (--cache off): its failure modes are the ones the
# API server's state decides. The watch cache has integration tests of its own. --undeclared
# refuse: the declaration attacks prove the strict refusals (an env that is not a list of
# GPU_MEMORY_LIMIT entries is no declaration); infer has test/integration/test_infer.c.
start_gmg() {
	: >"$T/gmg.log"
	ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$BIN" serve --listen 127.0.0.1:0 \
		--health-listen 127.0.0.1:0 --tls-cert-file "$T/certs/tls.crt" \
		--tls-key-file "$T/certs/tls.key" --kubeconfig "$T/api/kubeconfig" \
		--cache off --undeclared refuse --connection-timeout 3s --drain-timeout 1s \
		--shutdown-timeout 3s "$@" \
		2>"$T/gmg.log" &
	GMG_PID=$!
	for _ in $(seq 150); do
		grep -q '"msg":"serving"' "$T/gmg.log" && break
		kill -0 "$GMG_PID" 2>/dev/null || break
		sleep 0.1
	done
	PORT=$(grep '"msg":"serving"' "$T/gmg.log" | head -n 1 | jq -r .listen_port)
	HPORT=$(grep '"msg":"serving"' "$T/gmg.log" | head -n 1 | jq -r .health_port)
	[ -n "$PORT" ] && [ "$PORT" != null ] || {
		echo "attack: the binary did not start:" >&2
		cat "$T/gmg.log" >&2
		exit 1
	}
}
start_gmg
URL="https://127.0.0.1:$PORT"
CURL=(curl -sS --cacert "$T/certs/ca.crt" -m 20)

# POST the file $1 with Content-Type $2 to path $3; prints "HTTPCODE" and leaves the body in
# $T/out.
post_file() {
	"${CURL[@]}" -o "$T/out" -w '%{http_code}' -H "Content-Type: $2" --data-binary "@$1" \
		"$URL$3" 2>/dev/null
}

# review NAME FILE WANT UID: WANT is 400 (a text/plain 400), or allow / deny / any (an
# AdmissionReview with response.uid == UID).
review() {
	local name=$1 file=$2 want=$3 uid=${4:-} code
	code=$(post_file "$file" application/json /validate)
	if [ "$want" = 400 ]; then
		[ "$code" = 400 ] && pass || fail "$name: want 400, got $code: $(head -c 200 "$T/out")"
		return
	fi
	if [ "$code" != 200 ]; then
		fail "$name: want 200, got $code: $(head -c 200 "$T/out")"
		return
	fi
	if ! jq -e --arg uid "$uid" '.apiVersion == "admission.k8s.io/v1" and
	        .kind == "AdmissionReview" and .response.uid == $uid and
	        (.response.allowed | type) == "boolean"' "$T/out" >/dev/null 2>&1; then
		fail "$name: not an AdmissionReview with uid $uid: $(head -c 300 "$T/out")"
		return
	fi
	case $want in
	allow) jq -e '.response.allowed == true' "$T/out" >/dev/null ||
		fail "$name: want allowed: $(jq -c .response "$T/out")" ;;
	deny) jq -e '.response.allowed == false and (.response.status.message | length) > 0' \
		"$T/out" >/dev/null || fail "$name: want denied with a message: $(jq -c .response "$T/out")" ;;
	esac
	pass
}

# Review builders (jq, so the JSON is well formed unless a case wants it otherwise).
# gpu_pod NAME MEM NODE [GPUS]
gpu_pod() {
	jq -nc --arg n "$1" --arg m "$2" --arg node "$3" --arg g "${4:-1}" '{apiVersion: "v1",
	  kind: "Pod", metadata: {name: $n, namespace: "atk"}, spec: ({containers: [{name: "c",
	  image: "x", resources: {limits: {"nvidia.com/gpu": $g}},
	  env: [{name: "GPU_MEMORY_LIMIT", value: $m}]}]} + (if $node == "" then {} else
	  {nodeName: $node} end))}'
}
# pod_review UID POD_JSON [DRYRUN]
pod_review() {
	jq -nc --arg uid "$1" --argjson pod "$2" --argjson dry "${3:-false}" '{apiVersion:
	  "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: $uid, kind: {group: "",
	  version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"},
	  name: $pod.metadata.name, namespace: "atk", operation: "CREATE", object: $pod,
	  dryRun: $dry}}'
}
# binding_review UID POD NODE [DRYRUN] [NS]
binding_review() {
	jq -nc --arg uid "$1" --arg pod "$2" --arg node "$3" --argjson dry "${4:-false}" \
		--arg ns "${5:-atk}" '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
	  request: {uid: $uid, kind: {group: "", version: "v1", kind: "Binding"}, resource:
	  {group: "", version: "v1", resource: "pods"}, subResource: "binding", name: $pod,
	  namespace: $ns, operation: "CREATE", dryRun: $dry, object: {kind: "Binding",
	  apiVersion: "v1", metadata: {name: $pod, namespace: $ns}, target: {kind: "Node",
	  name: $node}}}}'
}

n=0
# case WANT UID JSON-TEXT: write the text to a file and review it.
case_text() {
	n=$((n + 1))
	printf '%s' "$3" >"$T/case$n.json"
	review "case $n ($(printf '%s' "$3" | head -c 80))" "$T/case$n.json" "$1" "$2"
}

# ---------------------------------------------------------------------------------------------
# 1. Envelope: no readable uid is a 400; a readable uid is always echoed.
case_text 400 "" '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}'
case_text 400 "" '{"request":{"uid":null}}'
case_text 400 "" '{"request":{"UID":"x","operation":"CREATE"}}'
case_text 400 "" '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}'
case_text 400 "" '{"request":null}'
case_text 400 "" '{"request":[{"uid":"x"}]}'
case_text 400 "" '[1,2]'
case_text 400 "" 'not json'
case_text 400 "" '{"request":{"uid":"a"}} trailing'
case_text 400 "" '{"request":{"uid":""}}'
case_text 400 "" "{\"request\":{\"uid\":\"$(printf 'a%.0s' $(seq 129))\"}}"
case_text 400 "" "{\"request\":{\"uid\":\"u\",\"object\":$(printf '[%.0s' $(seq 2000))$(printf ']%.0s' $(seq 2000))}}"
printf '{"request":{"uid":"u-nul","operation":"CREATE"}}\0' >"$T/nul.json"
review "NUL byte in body" "$T/nul.json" 400
: >"$T/empty.json"
review "empty body" "$T/empty.json" 400
case_text any "u-128-$(printf 'a%.0s' $(seq 122))" \
	"{\"request\":{\"uid\":\"u-128-$(printf 'a%.0s' $(seq 122))\",\"operation\":\"UPDATE\"}}"
case_text allow u-dup '{"request":{"uid":"u-dup","uid":"other","operation":"UPDATE"}}'
case_text deny u-obj-array '{"request":{"uid":"u-obj-array","operation":"CREATE","object":[]}}'
case_text deny u-obj-str '{"request":{"uid":"u-obj-str","operation":"CREATE","object":"x"}}'
case_text deny u-op-num '{"request":{"uid":"u-op-num","operation":1}}'
case_text deny u-dry-str '{"request":{"uid":"u-dry-str","operation":"CREATE","dryRun":"true"}}'
case_text deny u-kind '{"kind":"Foo","request":{"uid":"u-kind","operation":"CREATE"}}'
case_text allow u-update-bad '{"request":{"uid":"u-update-bad","operation":"UPDATE","object":[]}}'
case_text any u-nest "{\"request\":{\"uid\":\"u-nest\",\"operation\":\"CREATE\",\"object\":{\"x\":$(printf '[%.0s' $(seq 900))$(printf ']%.0s' $(seq 900))}}}"
case_text deny u-long-name "$(pod_review u-long-name "$(gpu_pod "$(printf 'a%.0s' $(seq 300))" 1Gi atk-n1)")"

# 2. Wrong types inside the pod: answered, never a crash; a GPU container whose declaration
# cannot be read is refused.
POD=$(gpu_pod p 1Gi atk-n1)
mut() { pod_review "$1" "$(jq -c "$2" <<<"$POD")" true; }
case_text any u-ctr-obj "$(mut u-ctr-obj '.spec.containers = {"a": 1}')"
case_text any u-ctr-str "$(mut u-ctr-str '.spec.containers = ["a", 1, null, []]')"
case_text any u-spec-str "$(mut u-spec-str '.spec = "x"')"
case_text deny u-env-num "$(mut u-env-num '.spec.containers[0].env[0].value = 24')"
case_text deny u-env-obj "$(mut u-env-obj '.spec.containers[0].env = {"name": "GPU_MEMORY_LIMIT"}')"
case_text deny u-valuefrom "$(mut u-valuefrom '.spec.containers[0].env[0] |= {name, valueFrom: {}}')"
case_text any u-lim-arr "$(mut u-lim-arr '.spec.containers[0].resources.limits = [1]')"
case_text any u-lim-num "$(mut u-lim-num '.spec.containers[0].resources.limits = 7')"
i=0
# The only cap is 10^15 units (demand.h): thousands of time-slice replicas are valid counts.
for g in '-1' '1.5' '"1e400"' '"NaN"' '"-1"' '"1.5"' '"abc"' '"9999999999999999"' '" 1"' '"+1"' '""' \
	null true '[]' '{}' 1e308 '"1e-3"' 1e16; do
	i=$((i + 1))
	case_text deny "u-gpu-$i" "$(mut "u-gpu-$i" ".spec.containers[0].resources.limits[\"nvidia.com/gpu\"] = $g")"
done
case_text any u-gpu-0 "$(mut u-gpu-0 '.spec.containers[0].resources.limits["nvidia.com/gpu"] = "0"')"
for g in '"4096"' '"1e3"' '"3k"' 1025; do
	i=$((i + 1))
	case_text any "u-gpu-$i" "$(mut "u-gpu-$i" ".spec.containers[0].resources.limits[\"nvidia.com/gpu\"] = $g")"
done
# A JSON number too large for a double (cJSON saturates): refused, not wrapped.
case_text deny u-gpu-big "$(mut u-gpu-big '.spec.containers[0].resources.limits["nvidia.com/gpu"] = 7' |
	sed 's/"nvidia.com\/gpu":7/"nvidia.com\/gpu":1e400/')"
case_text deny u-300 "$(mut u-300 '.spec.containers = [range(300) as $i | .spec.containers[0] | .name = "c\($i)"]')"
case_text any u-256 "$(mut u-256 '.spec.containers = [range(256) as $i | {name: "c\($i)", image: "x"}]')"
case_text deny u-init-only "$(mut u-init-only '.spec.initContainers = .spec.containers | .spec.containers = [{name: "app"}] | .spec.initContainers[0].env = []')"

# 3. Quantities: exact grammar, overflow refused.
i=0
for q in 1e18Ei 0.0000001 -0 '1Gi ' ' 1Gi' "$(printf '9%.0s' $(seq 65))" 1e400 NaN Inf 0x10 1KI 1gi 1K \
	1e 16Ei 18446744073709551616 0.5e1Mi -1Gi '' 24; do
	i=$((i + 1))
	case_text deny "u-q-$i" "$(mut "u-q-$i" ".spec.containers[0].env[0].value = \"$q\"")"
done
i=0
for q in +1Gi 1.5Gi 1.Gi .5Gi 1Mi 1048576 1e7 2M 0.5Gi 1e9; do
	i=$((i + 1))
	case_text allow "u-qok-$i" "$(mut "u-qok-$i" ".spec.containers[0].env[0].value = \"$q\"")"
done

# 4. Names with slashes, dots and percent signs never reach another API path and never pass.
case_text deny u-node-slash "$(mut u-node-slash '.spec.nodeName = "../atk-n1" | .spec.containers[0].env[0].value = "100Gi"')"
case_text deny u-node-dotdot "$(mut u-node-dotdot '.spec.nodeName = ".." | .spec.containers[0].env[0].value = "100Gi"')"
case_text deny u-node-pct "$(mut u-node-pct '.spec.nodeName = "atk-n1%2F..%2F" | .spec.containers[0].env[0].value = "100Gi"')"
case_text deny u-bind-unknown-node "$(binding_review u-bind-unknown-node atk-unbound no-such-node false inference)"
case_text deny u-bind-pod-dotdot "$(binding_review u-bind-pod-dotdot .. atk-n1)"
case_text deny u-bind-ns-dotdot "$(binding_review u-bind-ns-dotdot chat-7b-0 atk-n1 false ..)"
case_text deny u-bind-nolabels "$(binding_review u-bind-nolabels atk-unbound atk-nolabels false inference)"
# A Binding of a pod already bound (chat-7b-0, on gpu-node-a): the API server answers 409, so it
# is allowed reserving nothing (AlreadyBound), whatever its node.
case_text allow u-bind-bound "$(binding_review u-bind-bound chat-7b-0 no-such-node false inference)"
case_text deny u-bind-noname '{"request":{"uid":"u-bind-noname","operation":"CREATE","subResource":"binding","resource":{"group":"","resource":"pods"},"namespace":"atk","object":{"kind":"Binding","target":{"kind":"Node","name":"atk-n1"}}}}'
case_text deny u-target-arr '{"request":{"uid":"u-target-arr","operation":"CREATE","subResource":"binding","resource":{"group":"","resource":"pods"},"name":"p","namespace":"atk","object":{"kind":"Binding","target":[]}}}'
case_text deny u-over "$(pod_review u-over "$(gpu_pod big 100Gi atk-n1)" true)"
case_text allow u-fits "$(pod_review u-fits "$(gpu_pod small 1Gi atk-n1)" true)"

# ---------------------------------------------------------------------------------------------
# 5. HTTP: methods, paths, query strings, content types, sizes, chunked bodies, keep-alive.
GOOD="$T/good.json"
pod_review u-http "$(gpu_pod small 1Gi atk-n1)" true >"$GOOD"
expect_code() { # NAME WANT GOT
	[ "$2" = "$3" ] && pass || fail "$1: want HTTP $2, got $3: $(head -c 200 "$T/out")"
}
for m in GET PUT DELETE PATCH OPTIONS; do
	code=$("${CURL[@]}" -o "$T/out" -w '%{http_code}' -X "$m" -H 'Content-Type: application/json' \
		--data-binary "@$GOOD" "$URL/validate" 2>/dev/null)
	expect_code "method $m" 405 "$code"
done
for p in / /validate/ /VALIDATE //validate /x/../validate; do
	code=$("${CURL[@]}" --path-as-is -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "@$GOOD" "$URL$p" 2>/dev/null)
	expect_code "path $p" 404 "$code"
done
for p in '/validate?timeout=10s' '/validate?' '/valid%61te'; do
	code=$(post_file "$GOOD" application/json "$p")
	expect_code "path $p" 200 "$code"
	jq -e '.response.uid == "u-http"' "$T/out" >/dev/null 2>&1 && pass || fail "path $p: uid"
done
for ct in 'application/json; charset=utf-8' 'APPLICATION/JSON' 'application/json;charset=UTF-8' \
	'application/json ; charset=utf-8'; do
	code=$(post_file "$GOOD" "$ct" /validate)
	expect_code "Content-Type $ct" 200 "$code"
done
for ct in text/plain application/jsonx application/json-patch+json \
	application/x-www-form-urlencoded 'multipart/form-data; boundary=x'; do
	code=$(post_file "$GOOD" "$ct" /validate)
	expect_code "Content-Type $ct" 400 "$code"
done
code=$("${CURL[@]}" -o "$T/out" -w '%{http_code}' -H 'Content-Type:' --data-binary "@$GOOD" \
	"$URL/validate" 2>/dev/null)
expect_code "no Content-Type" 400 "$code"
code=$("${CURL[@]}" --http1.0 -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary "@$GOOD" "$URL/validate" 2>/dev/null)
expect_code "HTTP/1.0" 200 "$code"

# A body of exactly 7 MiB is read; one byte more is 413, with Content-Length or chunked.
MAX=$((7 * 1024 * 1024))
pad_to() { # SIZE OUT: the good review padded with a "pad" field to exactly SIZE bytes
	local base len
	base=$(cat "$GOOD")
	base=${base%\}}
	len=$((${#base} + 8 + 2)) # ,"pad":" and "}
	{
		printf '%s,"pad":"' "$base"
		head -c $(($1 - len)) /dev/zero | tr '\0' a
		printf '"}'
	} >"$2"
}
pad_to "$MAX" "$T/max.json"
pad_to $((MAX + 1)) "$T/over.json"
[ "$(stat -c %s "$T/max.json")" = "$MAX" ] && pass || fail "padding: $(stat -c %s "$T/max.json")"
code=$(post_file "$T/max.json" application/json /validate)
expect_code "exactly 7 MiB" 200 "$code"
code=$(post_file "$T/over.json" application/json /validate)
expect_code "7 MiB + 1" 413 "$code"
code=$("${CURL[@]}" -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
	-H 'Transfer-Encoding: chunked' --data-binary "@$T/max.json" "$URL/validate" 2>/dev/null)
expect_code "chunked exactly 7 MiB" 200 "$code"
code=$("${CURL[@]}" -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
	-H 'Transfer-Encoding: chunked' --data-binary "@$T/over.json" "$URL/validate" 2>/dev/null)
expect_code "chunked 7 MiB + 1" 413 "$code"
code=$("${CURL[@]}" -o "$T/out" -w '%{http_code}' -H 'Content-Type: application/json' \
	-H 'Transfer-Encoding: chunked' --data-binary "@$GOOD" "$URL/validate" 2>/dev/null)
expect_code "chunked small" 200 "$code"
# Content-Length far over the cap, body never sent: 413 at once.
code=$( (printf 'POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 999999999999\r\n\r\n'
	sleep 2) | timeout 10 openssl s_client -quiet -connect "127.0.0.1:$PORT" 2>/dev/null |
	head -n 1 | tr -d '\r' | cut -d' ' -f2)
expect_code "Content-Length 999999999999" 413 "$code"

# Keep-alive: 20 reviews on one connection, every answer the right uid.
args=()
for k in $(seq 20); do
	args+=(-o "$T/ka$k" "$URL/validate")
done
"${CURL[@]}" -w '%{num_connects}\n' -H 'Content-Type: application/json' --data-binary "@$GOOD" \
	"${args[@]}" >"$T/ka.connects" 2>/dev/null
connects=$(awk '{ s += $1 } END { print s + 0 }' "$T/ka.connects")
ok=0
for k in $(seq 20); do
	jq -e '.response.uid == "u-http"' "$T/ka$k" >/dev/null 2>&1 && ok=$((ok + 1))
done
[ "$ok" = 20 ] && [ "$connects" = 1 ] && pass ||
	fail "keep-alive: $ok of 20 answers over $connects connections (want 20 over 1)"

# TLS 1.0 / 1.1 refused, 1.2 / 1.3 served; plain HTTP on the TLS port gets no HTTP answer.
# (SECLEVEL=0 so that the client itself is willing to speak the old versions.)
for v in tls1 tls1_1; do
	echo | timeout 10 openssl s_client -connect "127.0.0.1:$PORT" "-$v" -cipher 'DEFAULT@SECLEVEL=0' \
		>"$T/tls.out" 2>&1
	grep -q 'Cipher is (NONE)' "$T/tls.out" && pass || fail "$v not refused: $(grep -m1 Protocol "$T/tls.out")"
done
for v in tls1_2 tls1_3; do
	echo | timeout 10 openssl s_client -connect "127.0.0.1:$PORT" "-$v" >"$T/tls.out" 2>&1
	grep -q 'Cipher is (NONE)' "$T/tls.out" && fail "$v refused" || pass
done
code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
	--data-binary "@$GOOD" "http://127.0.0.1:$PORT/validate" 2>/dev/null)
[ "$code" = 000 ] && pass || fail "plain HTTP on the TLS port answered $code"

# Slow clients: a stalled header, a stalled body and a TCP connection without a TLS hello are
# closed by the connection timeout (3 s here), and do not stop other reviews meanwhile.
stall() { # WHAT TO-SEND: keep a TLS connection open after sending $2, until the server closes
	(printf '%b' "$2"; exec sleep 15) 2>/dev/null | timeout 25 openssl s_client -quiet -connect "127.0.0.1:$PORT" \
		>/dev/null 2>&1
}
t0=$(date +%s)
stall header 'POST /validate HTTP/1.1\r\nHost: x\r\n' &
s1=$!
stall body 'POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"request":' &
s2=$!
(exec 3<>"/dev/tcp/127.0.0.1/$PORT" && exec sleep 15) 2>/dev/null &
s3=$!
sleep 0.5
code=$(post_file "$GOOD" application/json /validate)
expect_code "review while slow clients stall" 200 "$code"
wait "$s1" "$s2"
dt=$(($(date +%s) - t0))
[ "$dt" -lt 20 ] && pass || fail "stalled TLS clients kept for ${dt}s (connection timeout 3s)"
kill "$s3" 2>/dev/null
wait "$s3" 2>/dev/null

# ---------------------------------------------------------------------------------------------
# 6. Concurrency: 30 pods of 1Gi bound concurrently to atk-n2 (budget 9Gi), with dry-run copies
# and retries of the same pods mixed in: at most 9 distinct pods admitted, and exactly 9 since
# nothing else is there.
for k in $(seq 0 29); do
	pod=$(gpu_pod "cc-$k" 1Gi "")
	code=$(curl -sS -m 10 --cacert "$T/api/ca.crt" -o /dev/null -w '%{http_code}' \
		-H "Authorization: Bearer $API_TOKEN" -H 'Content-Type: application/json' \
		--data-binary "$pod" "$API/api/v1/namespaces/atk/pods" 2>/dev/null)
	[ "$code" = 201 ] || [ "$code" = 200 ] || fail "creating pod cc-$k in the double: $code"
done
mkdir -p "$T/cc"
jobs_file="$T/cc/jobs"
: >"$jobs_file"
for k in $(seq 0 29); do
	binding_review "cc-$k" "cc-$k" atk-n2 >"$T/cc/cc-$k.json"
	echo "cc-$k" >>"$jobs_file"
	if [ $((k % 3)) = 0 ]; then
		binding_review "cc-$k-dry" "cc-$k" atk-n2 true >"$T/cc/cc-$k-dry.json"
		echo "cc-$k-dry" >>"$jobs_file"
	fi
	if [ $((k % 4)) = 0 ]; then
		binding_review "cc-$k-retry" "cc-$k" atk-n2 >"$T/cc/cc-$k-retry.json"
		echo "cc-$k-retry" >>"$jobs_file"
	fi
done
export URL T
shuf "$jobs_file" 2>/dev/null >"$jobs_file.shuf" || cp "$jobs_file" "$jobs_file.shuf"
xargs -P 24 -I{} curl -sS --cacert "$T/certs/ca.crt" -m 30 -o "$T/cc/{}.out" \
	-H 'Content-Type: application/json' --data-binary "@$T/cc/{}.json" "$URL/validate" \
	<"$jobs_file.shuf" 2>/dev/null
admitted=0 bad=0
declare -A seen=()
while read -r job; do
	if ! jq -e --arg uid "$job" '.apiVersion == "admission.k8s.io/v1" and
	        .kind == "AdmissionReview" and .response.uid == $uid' "$T/cc/$job.out" >/dev/null 2>&1; then
		bad=$((bad + 1))
		continue
	fi
	case $job in *-dry) continue ;; esac
	pod=${job%-retry}
	if jq -e '.response.allowed == true' "$T/cc/$job.out" >/dev/null && [ -z "${seen[$pod]:-}" ]; then
		seen[$pod]=1
		admitted=$((admitted + 1))
	fi
done <"$jobs_file"
[ "$bad" = 0 ] && pass || fail "concurrency: $bad answers without the right envelope / uid"
# Never more than the budget; at least some (a few may be denied when a loaded machine spends
# the review budget waiting for the node's lock, which is the documented fail-closed path).
[ "$admitted" -le 9 ] && [ "$admitted" -ge 3 ] && pass ||
	fail "concurrency: $admitted distinct 1Gi pods admitted on a 9Gi budget (want 3..9)"
echo "attack: concurrency: $admitted of 30 pods admitted on atk-n2" >&2

# ---------------------------------------------------------------------------------------------
# 7. The API server cannot be asked: denied with a message, uid echoed, in bounded time.
placement="$T/place.json"
pod_review u-fail "$(gpu_pod fail-pod 1Gi atk-n1)" >"$placement"
for code_in in 500 401 404 410; do
	curl -sS -m 10 --cacert "$T/api/ca.crt" -X POST "$API/_double/fail?code=$code_in" >/dev/null 2>&1
	review "API server answers $code_in" "$placement" deny u-fail
done
curl -sS -m 10 --cacert "$T/api/ca.crt" -X POST "$API/_double/fail?code=0" >/dev/null 2>&1
curl -sS -m 10 --cacert "$T/api/ca.crt" -X POST "$API/_double/delay?ms=5000" >/dev/null 2>&1
t0=$(date +%s)
review "API server slower than --api-timeout" "$placement" deny u-fail
dt=$(($(date +%s) - t0))
[ "$dt" -le 10 ] && pass || fail "slow API server: answered after ${dt}s"
case_text allow u-update-slow '{"request":{"uid":"u-update-slow","operation":"UPDATE","resource":{"group":"","resource":"pods"}}}'
curl -sS -m 10 --cacert "$T/api/ca.crt" -X POST "$API/_double/delay?ms=0" >/dev/null 2>&1

# ---------------------------------------------------------------------------------------------
# 8. SIGTERM under load: exit status 0, in bounded time, no sanitizer report.
load_pids=()
for k in $(seq 8); do
	(for _ in $(seq 40); do
		curl -sS --cacert "$T/certs/ca.crt" -m 10 -o /dev/null -H 'Content-Type: application/json' \
			--data-binary "@$GOOD" "$URL/validate" 2>/dev/null
	done) &
	load_pids+=($!)
done
sleep 1
t0=$(date +%s)
kill -TERM "$GMG_PID"
for _ in $(seq 400); do
	kill -0 "$GMG_PID" 2>/dev/null || break
	sleep 0.1
done
if kill -0 "$GMG_PID" 2>/dev/null; then
	fail "SIGTERM under load: still running after 40s"
	kill -KILL "$GMG_PID"
fi
wait "$GMG_PID"
rc=$?
GMG_PID=
dt=$(($(date +%s) - t0))
[ "$rc" = 0 ] && pass || fail "SIGTERM under load: exit status $rc"
[ "$dt" -le 20 ] && pass || fail "SIGTERM under load: exit after ${dt}s (drain 1s + shutdown 3s)"
wait "${load_pids[@]}" 2>/dev/null
if grep -qE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|ThreadSanitizer' "$T/gmg.log"; then
	fail "sanitizer report in the binary's log:"
	grep -E -A 20 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$T/gmg.log" | head -n 40 >&2
else
	pass
fi
if grep -v '^{' "$T/gmg.log" | grep -q .; then
	fail "non-JSON lines in the log: $(grep -v '^{' "$T/gmg.log" | head -n 3)"
else
	pass
fi

# ---------------------------------------------------------------------------------------------
# 9. Regressions for bugs this suite found (fixed): A, a Binding naming pod "." read the pod
# list and was allowed; B, queue time outside the review budget; C, SIGTERM not bounded with
# reviews queued.
{
	start_gmg --workers 8
	URL="https://127.0.0.1:$PORT"
	# Bug A: a Binding for the pod "." (or any name the client's dot-segment removal turns into
	# a collection path) reads GET .../namespaces/NS/pods/ = a PodList, which is taken for a pod
	# without GPUs and allowed (fail open). The fetched object should be a Pod named as asked.
	case_text deny u-bind-dot "$(binding_review u-bind-dot . atk-n1)"

	# Bug B: time spent waiting for a review worker is not part of the review budget: with a slow
	# API server, 48 concurrent placements on 8 workers are answered after up to ~12 s, past the
	# API server's 10 s webhook timeout.
	curl -sS -m 10 --cacert "$T/api/ca.crt" -X POST "$API/_double/delay?ms=3000" >/dev/null 2>&1
	mkdir -p "$T/q"
	for k in $(seq 48); do
		pod_review "q-$k" "$(gpu_pod "q-$k" 1Gi atk-n1)" true >"$T/q/q-$k.json"
	done
	seq 48 | xargs -P 48 -I{} curl -sS --cacert "$T/certs/ca.crt" -m 40 -o "$T/q/{}.out" \
		-w '%{time_total}\n' -H 'Content-Type: application/json' \
		--data-binary "@$T/q/q-{}.json" "$URL/validate?timeout=10s" >"$T/q/times" 2>/dev/null
	late=$(awk '$1 > 10 { n++ } END { print n + 0 }' "$T/q/times")
	[ "$late" = 0 ] && pass || fail "bug B: $late of 48 reviews answered after 10 s (queue wait outside the budget)"

	# Bug C: SIGTERM with reviews queued behind a slow API server: the workers drain the whole
	# queue, so the exit is not bounded by --drain-timeout + --shutdown-timeout (1 s + 3 s).
	for k in $(seq 48); do
		curl -sS --cacert "$T/certs/ca.crt" -m 40 -o /dev/null -H 'Content-Type: application/json' \
			--data-binary "@$T/q/q-$k.json" "$URL/validate" 2>/dev/null &
	done
	sleep 1
	t0=$(date +%s)
	kill -TERM "$GMG_PID"
	for _ in $(seq 600); do
		kill -0 "$GMG_PID" 2>/dev/null || break
		sleep 0.1
	done
	dt=$(($(date +%s) - t0))
	kill -KILL "$GMG_PID" 2>/dev/null
	wait "$GMG_PID" 2>/dev/null
	GMG_PID=
	[ "$dt" -le 8 ] && pass || fail "bug C: exit ${dt}s after SIGTERM (drain 1s + shutdown 3s)"
	curl -sS -m 10 --cacert "$T/api/ca.crt" -X POST "$API/_double/delay?ms=0" >/dev/null 2>&1
}

echo "attack: $CHECKS checks, $FAILS failed" >&2
[ "$FAILS" = 0 ]
