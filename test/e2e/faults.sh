# shellcheck shell=bash
# e2e test 19 (issue 12, "faults on the real control plane"), sourced by run.sh, which provides
# kc, pod_json, rr_* (test 12's replicas behind rrproxy), over_threshold, now_ms, log, pass, fail.
#
# Two webhook replicas with shared reservations behind rrproxy (as a Service spreads
# connections), run as a pod runs them: the API identity is a ServiceAccount token read from a
# file (kubeconfig `tokenFile`, re-read on each use), the serving certificate is read through a
# `..data` symlink that is swapped atomically (as the kubelet updates a Secret volume). Three
# flows of placements (pods created with nodeName, one after the other in each flow) run all
# along on fresh 40Gi nodes (limit 36Gi):
#   steady-a, steady-b: 1Gi each, the pod 6 before deleted: never near the limit, so each must
#     be admitted, or refused fail-closed (the API server or its storage could not be asked);
#   edge: 4Gi each until refused for the threshold, then the oldest is deleted: the node stays
#     at its limit, so an admission that should not have been is seen by the oracle.
# Faults, one after the other, each followed by a few seconds of flow:
#   1. etcd paused (SIGSTOP) 5 s, then resumed (SIGCONT);
#   2. a replica killed (SIGKILL), then started again;
#   3. the serving certificate replaced (new key, same CA);
#   4. the token replaced and the old one revoked (its bound Secret deleted).
# Checks: no node over its threshold (sampled every second from the API, and at the end); every
# placement got a verdict (admitted or refused by the webhook) except those in flight on the
# killed replica; steady placements refused only fail-closed, and only around a fault; every
# review the replicas answered within the webhook's timeoutSeconds (their review_duration
# histogram); the new certificate served by both replicas; no API call refused as unauthorized
# after the token swap, and the old token refused by the API server (so the check can fail).
# Reported: per fault, the time from its end to the next admitted placement, and the verdicts.

FA_NS=e2e-faults
FA_SA=gmg-faults

# The API as the suite's admin, with curl (a kubectl per placement costs more CPU than the
# webhook and the API server together, and would slow the flows down on a loaded machine).
fa_api() { curl -s --max-time 30 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }

# fa_pod_json NAME MEMORY NODE: pod_json's pod (1 GPU, nodeName) in $FA_NS, written by printf
# (no jq per placement: the flows should spend their time in the API server and the webhook).
fa_pod_json() {
	printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"%s","labels":{"app.kubernetes.io/part-of":"gmg-e2e"}},"spec":{"terminationGracePeriodSeconds":0,"nodeName":"%s","tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}],"containers":[{"name":"main","image":"registry.k8s.io/pause:3.10","env":[{"name":"GPU_MEMORY_LIMIT","value":"%s"}],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}' \
		"$1" "$FA_NS" "$3" "$2"
}

# fa_place FLOW NAME MEMORY NODE LOG: one placement; appends
# "START_MS END_MS FLOW NAME admitted|threshold|failclosed|error MESSAGE" to LOG; 0 if admitted.
fa_place() {
	local t0 out code verdict
	t0=$(now_ms)
	out=$(fa_pod_json "$2" "$3" "$4" | fa_api -H 'Content-Type: application/json' -X POST \
		--data-binary @- -w '\n%{http_code}' "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$FA_NS/pods")
	code=${out##*$'\n'}
	[ "$code" = 201 ] || out=$(jq -r '.message? // empty' <<<"${out%$'\n'*}" 2>/dev/null | tr '\n' ' ')
	# A refusal's HTTP status is the webhook's (403 for the threshold, 500 when it fails closed):
	# the verdict is read from the message.
	if [ "$code" = 201 ]; then
		verdict=admitted out=""
	elif grep -qF "$DENIED_POD" <<<"$out"; then
		if grep -q 'percent limit' <<<"$out"; then verdict=threshold; else verdict=failclosed; fi
	else
		verdict=error
	fi
	echo "$t0 $(now_ms) $1 $2 $verdict HTTP ${code:-none} ${out:0:300}" >>"$5"
	[ $verdict = admitted ]
}

fa_delete() { fa_api -o /dev/null -X DELETE "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$FA_NS/pods/$1?gracePeriodSeconds=0"; }

# fa_steady FLOW NODE DIR: 1Gi placements until DIR/stop; the pod 6 before is deleted.
fa_steady() {
	local i=0
	while [ ! -e "$3/stop" ]; do
		i=$((i + 1))
		fa_place "$1" "$1-$i" 1Gi "$2" "$3/placements"
		[ $i -le 6 ] || fa_delete "$1-$((i - 6))"
		sleep 0.1
	done
}

# fa_edge NODE DIR: 4Gi placements until DIR/stop; refused for the threshold: the oldest goes.
fa_edge() {
	local i=0 held=()
	while [ ! -e "$2/stop" ]; do
		i=$((i + 1))
		if fa_place edge "edge-$i" 4Gi "$1" "$2/placements"; then
			held+=("edge-$i")
		elif tail -n 1 "$2/placements" | awk '$5 == "threshold" { ok = 1 } END { exit !ok }' && [ ${#held[@]} -gt 0 ]; then
			fa_delete "${held[0]}"
			held=("${held[@]:1}")
			sleep 0.5 # the deletion reaches the webhook's cache
		fi
		sleep 0.1
	done
}

# fa_token SECRET FILE: a token of the ServiceAccount bound to Secret SECRET (deleting the Secret
# revokes it), written to FILE atomically (a rename, as the kubelet's projected volume does).
fa_token() {
	kc create secret generic "$1" -n "$WEBHOOK_NAMESPACE" >/dev/null || return 1
	kc create token $FA_SA -n "$WEBHOOK_NAMESPACE" --bound-object-kind Secret \
		--bound-object-name "$1" --duration 1h >"$2.tmp" && mv -f "$2.tmp" "$2"
}

# fa_cert DIR VERSION: a new serving key and certificate from the webhook CA in DIR/..VERSION,
# then DIR/..data pointed at it atomically (a Secret volume's update). Prints the serial.
fa_cert() {
	local d="$1/..$2"
	mkdir -p "$d"
	openssl req -new -newkey rsa:2048 -nodes -keyout "$d/tls.key" -subj "/CN=gpu-memory-guard" \
		-out "$d/tls.csr" 2>/dev/null &&
		printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,DNS:gpu-memory-guard.%s.svc\n' \
			"$WEBHOOK_NAMESPACE" >"$d/tls.ext" &&
		openssl x509 -req -in "$d/tls.csr" -CA "$PKI/webhook-ca.crt" -CAkey "$PKI/webhook-ca.key" \
			-CAcreateserial -sha256 -days 1 -extfile "$d/tls.ext" -out "$d/tls.crt" 2>/dev/null || return 1
	ln -sfn "..$2" "$1/..data.tmp" && mv -T "$1/..data.tmp" "$1/..data" || return 1
	openssl x509 -in "$d/tls.crt" -noout -serial | cut -d= -f2
}

# The serial of the certificate served on 127.0.0.1:PORT.
fa_served_serial() {
	openssl s_client -connect "127.0.0.1:$1" -servername localhost </dev/null 2>/dev/null |
		openssl x509 -noout -serial 2>/dev/null | cut -d= -f2
}
fa_serves() { [ "$(fa_served_serial "${RR_PORT[1]}")" = "$1" ] && [ "$(fa_served_serial "${RR_PORT[2]}")" = "$1" ]; }

# fa_recovery LOG SINCE_MS: ms from SINCE_MS to the end of the first placement admitted that
# started after it ("-" when none).
fa_recovery() {
	awk -v t="$2" '$1 >= t && $5 == "admitted" { d = $2 - t; if (best == "" || d < best) best = d } END { print (best == "" ? "-" : best) }' "$1"
}

# Reviews the replicas answered in more than the webhook's timeoutSeconds (their histograms:
# count minus the bucket le = timeoutSeconds; the killed replica's answers before the kill are
# not in them).
fa_slow_reviews() {
	local t=${GMG_WEBHOOK_TIMEOUT:-5}
	echo $(($(rr_metric gpu_memory_guard_review_duration_seconds_count) - $(rr_metric gpu_memory_guard_review_duration_seconds_bucket "le=\"$t\"")))
}

fa_unauthorized() { rr_metric gpu_memory_guard_api_requests_total 'code="401"'; }

# fa_setup DIR: the replicas' identity (a ServiceAccount with the suite's webhook permissions:
# pods, nodes read; Leases in the webhook's namespace), its token file and kubeconfig, the
# serving certificate directory, three fresh nodes, and 2 replicas behind rrproxy in place of the
# suite's webhook. Problems go to FA_BAD.
fa_setup() {
	local dir=$1 i
	FA_BAD="" RR_NODES="" FA_CERT_V=1 FA_TOKEN_V=1
	fresh_ns $FA_NS
	kc apply -f - >/dev/null <<EOF || FA_BAD="$FA_BAD; RBAC objects not created"
apiVersion: v1
kind: ServiceAccount
metadata: {name: $FA_SA, namespace: $WEBHOOK_NAMESPACE}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpu-memory-guard-e2e-faults}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpu-memory-guard-e2e}
subjects: [{kind: ServiceAccount, name: $FA_SA, namespace: $WEBHOOK_NAMESPACE}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: gpu-memory-guard-e2e-faults, namespace: $WEBHOOK_NAMESPACE}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: gpu-memory-guard-e2e-faults, namespace: $WEBHOOK_NAMESPACE}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: gpu-memory-guard-e2e-faults}
subjects: [{kind: ServiceAccount, name: $FA_SA, namespace: $WEBHOOK_NAMESPACE}]
EOF
	fa_token gmg-faults-token-1 "$dir/token" || FA_BAD="$FA_BAD; no token for $FA_SA"
	cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $FA_SA
  user:
    tokenFile: $dir/token
contexts:
- name: faults
  context:
    cluster: e2e
    user: $FA_SA
current-context: faults
EOF
	mkdir -p "$dir/tls"
	fa_cert "$dir/tls" v1 >/dev/null || FA_BAD="$FA_BAD; first serving certificate not made"
	ln -s ..data/tls.crt "$dir/tls/tls.crt" && ln -s ..data/tls.key "$dir/tls/tls.key"
	rr_node fa-steady-a && rr_node fa-steady-b && rr_node fa-edge || FA_BAD="$FA_BAD; nodes not created"
	[ -z "$FA_BAD" ] || return 1
	PICKED="$PICKED $WEBHOOK_PORT $WEBHOOK_HEALTH_PORT"
	free_port RR_PROXY_PORT
	RR_PORT=() RR_HEALTH=()
	for i in 1 2; do free_port "RR_PORT[$i]"; free_port "RR_HEALTH[$i]"; done
	bash "$E2E_DIR/cluster.sh" webhook-stop
	RR_EXTRA_FLAGS="--kubeconfig $dir/kubeconfig --tls-cert-file $dir/tls/tls.crt --tls-key-file $dir/tls/tls.key --tls-reload-interval 1s"
	if ! rr_start 2; then
		FA_BAD="$FA_BAD; 2 replicas and the proxy did not start: $(tail -n 3 "$STATE/logs/replica-1.log" "$STATE/logs/rrproxy.log" 2>/dev/null | tr '\n' ' ')"
		return 1
	fi
	FA_UNAUTH0=$(fa_unauthorized)
	FA_RELOADS0=$(rr_metric gpu_memory_guard_certificate_reloads_total 'result="success"')
	: >"$dir/over" && : >"$dir/placements" && : >"$dir/marks"
}

# fa_flows DIR: the oracle (every second) and the three flows, in the background (FA_PIDS).
fa_flows() {
	FA_PIDS=()
	(while [ ! -e "$1/stop" ]; do over_threshold >>"$1/over" 2>/dev/null; sleep 1; done) &
	FA_PIDS+=($!)
	fa_steady steady-a fa-steady-a "$1" &
	FA_PIDS+=($!)
	fa_steady steady-b fa-steady-b "$1" &
	FA_PIDS+=($!)
	fa_edge fa-edge "$1" &
	FA_PIDS+=($!)
}
fa_flows_stop() { touch "$1/stop" && wait "${FA_PIDS[@]}" 2>/dev/null; }

# The faults. Each appends "KIND START_MS END_MS FIGURE_MS" to DIR/marks.
fa_etcd_pause() { # DIR: etcd stopped 5 s; FIGURE: SIGSTOP to SIGCONT
	local pid t0 t1
	pid=$(cat "$STATE/pids/etcd.pid")
	t0=$(now_ms)
	kill -STOP "$pid"
	sleep 5
	kill -CONT "$pid"
	t1=$(now_ms)
	echo "etcd $t0 $t1 $((t1 - t0))" >>"$1/marks"
}

fa_kill() { # DIR: replica-1 SIGKILLed, started again 2 s later; FIGURE: kill to ready
	local victim t0 t1
	victim=$(cat "$STATE/pids/replica-1.pid")
	disown "$victim" 2>/dev/null # no "Killed" line from bash: the kill is the test's
	kill -KILL "$victim"
	t0=$(now_ms)
	sleep 2
	# shellcheck disable=SC2046 # rr_flags is a list of flags
	webhook_launch replica-1 "${RR_PORT[1]}" "${RR_HEALTH[1]}" "$BINARY" $(rr_flags) || FA_BAD="$FA_BAD; replica-1 not started again"
	wait_for 60 "replica-1 ready again" rr_replica_ready "${RR_HEALTH[1]}" || FA_BAD="$FA_BAD; replica-1 not ready again within 60s"
	t1=$(now_ms)
	echo "kill $t0 $t1 $((t1 - t0))" >>"$1/marks"
}

fa_cert_swap() { # DIR: a new serving key and certificate; FIGURE: swap to served by both
	local serial t0 t1
	FA_CERT_V=$((FA_CERT_V + 1))
	serial=$(fa_cert "$1/tls" "v$FA_CERT_V") || { FA_BAD="$FA_BAD; serving certificate v$FA_CERT_V not made"; return; }
	t0=$(now_ms)
	if ! wait_for 20 "both replicas serving certificate $serial" fa_serves "$serial"; then
		FA_BAD="$FA_BAD; 20s after the swap the replicas serve $(fa_served_serial "${RR_PORT[1]}") and $(fa_served_serial "${RR_PORT[2]}"), not $serial"
	fi
	t1=$(now_ms)
	rm -rf "$1/tls/..v$((FA_CERT_V - 1))"
	echo "cert $t0 $t1 $((t1 - t0))" >>"$1/marks"
}

fa_token_swap() { # DIR: a new token, the old one revoked; FIGURE: swap to the old one refused
	local old t0 t1 prev=$FA_TOKEN_V
	FA_TOKEN_V=$((FA_TOKEN_V + 1))
	old=$(cat "$1/token")
	t0=$(now_ms)
	fa_token "gmg-faults-token-$FA_TOKEN_V" "$1/token" || { FA_BAD="$FA_BAD; token $FA_TOKEN_V not made"; return; }
	kc delete secret "gmg-faults-token-$prev" -n "$WEBHOOK_NAMESPACE" --wait=true >/dev/null || FA_BAD="$FA_BAD; the old token's Secret not deleted"
	# The API server must refuse the old token now (else the swap proves nothing).
	wait_for 20 "the old token refused" bash -c "! curl -sf --max-time 3 --cacert '$PKI/ca.crt' -H 'Authorization: Bearer $old' https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$WEBHOOK_NAMESPACE/pods >/dev/null" ||
		FA_BAD="$FA_BAD; the API server still accepts the revoked token $prev"
	t1=$(now_ms)
	echo "token $t0 $t1 $((t1 - t0))" >>"$1/marks"
}

# fa_check DIR: FA_FAIL gets the first problem ("" when none); FA_SUMMARY the verdict counts.
fa_check() {
	local dir=$1 over slow unauth reloads n admitted threshold failclosed errors
	slow=$(fa_slow_reviews)
	unauth=$(fa_unauthorized)
	reloads=$(rr_metric gpu_memory_guard_certificate_reloads_total 'result="success"')
	over=$(sort -u "$dir/over"; over_threshold)
	n=$(wc -l <"$dir/placements")
	admitted=$(awk '$5 == "admitted"' "$dir/placements" | wc -l)
	threshold=$(awk '$5 == "threshold"' "$dir/placements" | wc -l)
	failclosed=$(awk '$5 == "failclosed"' "$dir/placements" | wc -l)
	errors=$(awk '$5 == "error"' "$dir/placements" | wc -l)
	# No verdict: only a placement in flight when replica-1 was killed (its connection broke,
	# or the API server's pooled one to it). Fail-closed: only while etcd was paused, or the 5 s
	# after (a Lease write that waited for it). Windows from DIR/marks.
	local stray_err stray_fc steady_thr
	stray_err=$(awk 'NR == FNR { if ($1 == "kill") ks[++nk] = $2; next }
		$5 == "error" { ok = 0; for (i = 1; i <= nk; i++) if ($1 <= ks[i] + 2000 && $2 >= ks[i]) ok = 1; if (!ok) { print; exit } }' "$dir/marks" "$dir/placements")
	stray_fc=$(awk 'NR == FNR { if ($1 == "etcd") { a[++ne] = $2; b[ne] = $3 } next }
		$5 == "failclosed" { ok = 0; for (i = 1; i <= ne; i++) if ($2 >= a[i] && $1 <= b[i] + 5000) ok = 1; if (!ok) { print; exit } }' "$dir/marks" "$dir/placements")
	steady_thr=$(awk '$3 ~ /^steady/ && $5 == "threshold"' "$dir/placements" | head -n 1)
	FA_SUMMARY="$n placements in 3 flows ($admitted admitted, $threshold refused for the threshold on the full node, $failclosed fail-closed, $errors without a verdict at a kill)"
	FA_FAIL=""
	if [ -n "$FA_BAD" ]; then
		FA_FAIL="${FA_BAD#; }"
	elif [ -n "$over" ]; then
		FA_FAIL="node over its threshold: $(head -n 3 <<<"$over" | tr '\n' ' ')"
	elif [ -n "$stray_err" ]; then
		FA_FAIL="a placement got no verdict from the webhook away from a kill: ${stray_err:0:400}"
	elif [ -n "$stray_fc" ]; then
		FA_FAIL="a placement refused fail-closed away from an etcd pause: ${stray_fc:0:400}"
	elif [ -n "$steady_thr" ]; then
		FA_FAIL="a 1Gi placement on a near-empty node refused for the threshold: ${steady_thr:0:400}"
	elif [ "$slow" -ne 0 ]; then
		FA_FAIL="$slow reviews answered in more than the webhook's timeoutSeconds (${GMG_WEBHOOK_TIMEOUT:-5}s)"
	elif [ "$unauth" -ne "$FA_UNAUTH0" ]; then
		FA_FAIL="$((unauth - FA_UNAUTH0)) API calls refused as unauthorized (a revoked token used?)"
	elif grep -q '^cert ' "$dir/marks" && [ "$reloads" -le "$FA_RELOADS0" ]; then
		FA_FAIL="certificate_reloads_total{result=success} did not grow ($FA_RELOADS0 -> $reloads)"
	elif [ "$threshold" -eq 0 ] || [ "$admitted" -lt 30 ]; then
		FA_FAIL="the flow did not exercise the limit: $admitted admitted, $threshold refused for the threshold of $n"
	fi
}

# fa_recoveries DIR: per fault in DIR/marks, "KIND FIGURE ms, next admitted N ms after its end".
fa_recoveries() {
	local kind t0 t1 took
	while read -r kind t0 t1 took; do
		echo "$kind ${took}ms, next admitted $(fa_recovery "$1/placements" "$t1")ms after"
	done <"$1/marks" | paste -sd ';' | sed 's/;/; /g'
}

test_faults() {
	CURRENT="19 faults under a steady flow: etcd paused, replica killed, certificate and token replaced"
	local dir
	dir=$(mktemp -d)
	if ! fa_setup "$dir"; then
		fail "${FA_BAD#; }"
		fa_cleanup "$dir"
		return
	fi
	fa_flows "$dir"
	sleep 4
	fa_etcd_pause "$dir"
	sleep 6
	fa_kill "$dir"
	sleep 4
	fa_cert_swap "$dir"
	sleep 4
	fa_token_swap "$dir"
	sleep 6
	fa_flows_stop "$dir"
	fa_check "$dir"
	log "test 19: placements: $(awk '{ print $3, $5 }' "$dir/placements" | sort | uniq -c | tr -s ' ' | paste -sd ',')"
	if [ -n "$FA_FAIL" ]; then
		fail "$FA_FAIL"
	else
		pass "$FA_SUMMARY, no node over its threshold, every review answered within ${GMG_WEBHOOK_TIMEOUT:-5}s, no API call unauthorized; faults (etcd: SIGSTOP to SIGCONT; kill: SIGKILL to restarted and ready; cert: swap to served by both; token: swap to the old one refused): $(fa_recoveries "$dir")"
	fi
	fa_cleanup "$dir"
}

# fa_cleanup DIR: back to the suite's webhook and configuration; the test's objects go.
fa_cleanup() {
	local n
	RR_EXTRA_FLAGS=""
	[ "$RR_REPLICAS" -eq 0 ] || rr_stop
	bash "$E2E_DIR/cluster.sh" webhook-start --binary "$BINARY" || log "faults: the suite's webhook did not start again"
	WEBHOOK_PID=$(cat "$STATE/pids/webhook.pid" 2>/dev/null)
	kc delete pods -n $FA_NS --all --grace-period=0 --force --wait=false >/dev/null 2>&1
	for n in $RR_NODES; do
		kc delete node "$n" --wait=false >/dev/null 2>&1
		kc delete lease -n "$WEBHOOK_NAMESPACE" "$n" --ignore-not-found >/dev/null 2>&1
	done
	RR_NODES=""
	kc delete clusterrolebinding gpu-memory-guard-e2e-faults --ignore-not-found >/dev/null 2>&1
	kc delete role,rolebinding -n "$WEBHOOK_NAMESPACE" gpu-memory-guard-e2e-faults --ignore-not-found >/dev/null 2>&1
	kc delete serviceaccount $FA_SA -n "$WEBHOOK_NAMESPACE" --ignore-not-found >/dev/null 2>&1
	kc get secrets -n "$WEBHOOK_NAMESPACE" -o name 2>/dev/null | grep '/gmg-faults-token-' |
		xargs -r "$TOOLS_BIN/kubectl" --kubeconfig "$STATE/kubeconfig" delete -n "$WEBHOOK_NAMESPACE" >/dev/null 2>&1
	rm -rf "$1"
	drop_ns $FA_NS
}

# --- 20. the soak ----------------------------------------------------------------------------
# Test 19's replicas and flows for GMG_E2E_SOAK_SECONDS (120 in `make test`; `make soak`: 1800),
# with one of 19's faults every GMG_E2E_SOAK_FAULT_EVERY seconds (30), in turn: etcd paused,
# replica-1 killed (first: the flow then goes to replica-2), etcd paused, certificate replaced,
# token replaced. Every 10 s each replica's RSS, open descriptors, threads and reviews answered
# are sampled (/proc and its metrics). Checks 19's, and that replica-2 (never killed, carrying
# the flow after the first fault) stays flat after warm-up (its first sample past a quarter of
# the run, and at least 30 s after the first fault, against its last): descriptors within +8,
# RSS within +25 percent + 8 MiB. The samples are printed as a table (stderr, and GMG_E2E_SOAK_FIGURES if
# set: docs/soak.md keeps one).
SOAK_SECONDS=${GMG_E2E_SOAK_SECONDS:-120}
SOAK_FAULT_EVERY=${GMG_E2E_SOAK_FAULT_EVERY:-30}

# fa_stats DIR ELAPSED_S: "ELAPSED REPLICA PID RSS_KIB THREADS FDS REVIEWS" per live replica.
fa_stats() {
	local i pid
	for i in 1 2; do
		pid=$(cat "$STATE/pids/replica-$i.pid" 2>/dev/null) || continue
		[ -r "/proc/$pid/status" ] || continue
		echo "$2 replica-$i $pid $(awk '/^VmRSS:/ { r = $2 } /^Threads:/ { t = $2 } END { print r + 0, t + 0 }' "/proc/$pid/status") $(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l) $(curl -sf --max-time 5 "http://127.0.0.1:${RR_HEALTH[$i]}/metrics" | awk '/^gpu_memory_guard_reviews_total/ { s += $NF } END { print s + 0 }')"
	done >>"$1/stats"
}

test_soak() {
	CURRENT="20 soak: ${SOAK_SECONDS}s of placements and deletions, a fault every ${SOAK_FAULT_EVERY}s"
	# The kill first: the API server keeps one connection to the webhook (through rrproxy, as
	# through a Service), so one replica carries the flow; killing replica-1 moves it to replica-2
	# for the rest of the run, the replica whose figures must stay flat.
	local dir t0 next_stats=0 next_fault k=0 elapsed faults=(fa_kill fa_etcd_pause fa_cert_swap fa_token_swap)
	dir=$(mktemp -d)
	if ! fa_setup "$dir"; then
		fail "${FA_BAD#; }"
		fa_cleanup "$dir"
		return
	fi
	: >"$dir/stats"
	fa_flows "$dir"
	t0=$SECONDS
	next_fault=$SOAK_FAULT_EVERY
	while elapsed=$((SECONDS - t0)) && [ "$elapsed" -lt "$SOAK_SECONDS" ]; do
		if [ "$elapsed" -ge "$next_stats" ]; then
			fa_stats "$dir" "$elapsed"
			next_stats=$((next_stats + 10))
		fi
		if [ "$elapsed" -ge "$next_fault" ] && [ "$elapsed" -lt $((SOAK_SECONDS - 10)) ]; then
			"${faults[$((k % 4))]}" "$dir"
			k=$((k + 1))
			next_fault=$((next_fault + SOAK_FAULT_EVERY))
		fi
		sleep 1
	done
	fa_stats "$dir" "$((SECONDS - t0))"
	fa_flows_stop "$dir"
	fa_check "$dir"
	# Flat after warm-up: replica-2's samples.
	local warm last flat
	local w=$((SOAK_FAULT_EVERY + 30))
	[ $((SOAK_SECONDS / 4)) -le $w ] || w=$((SOAK_SECONDS / 4))
	warm=$(awk -v w="$w" '$2 == "replica-2" && $1 >= w { print; exit }' "$dir/stats")
	last=$(awk '$2 == "replica-2"' "$dir/stats" | tail -n 1)
	flat=$(awk -v a="$warm" -v b="$last" 'BEGIN {
		split(a, w, " "); split(b, l, " ")
		if (w[1] == "" || l[1] == "" || w[1] == l[1]) { print "too few samples after warm-up"; exit }
		if (w[3] != l[3]) { print "replica-2 restarted (pid " w[3] " -> " l[3] ")"; exit }
		if (l[6] > w[6] + 8) printf "descriptors %d at %ds -> %d at %ds; ", w[6], w[1], l[6], l[1]
		if (l[4] > w[4] * 1.25 + 8192) printf "RSS %d KiB at %ds -> %d KiB at %ds; ", w[4], w[1], l[4], l[1]
	}')
	{
		echo "| s | replica | pid | RSS MiB | threads | fds | reviews |"
		echo "|---|---|---|---|---|---|---|"
		awk '{ printf "| %s | %s | %s | %.1f | %s | %s | %s |\n", $1, $2, $3, $4 / 1024, $5, $6, $7 }' "$dir/stats"
	} >"$dir/figures.md"
	sed 's/^/test 20: /' "$dir/figures.md" >&2
	[ -z "${GMG_E2E_SOAK_FIGURES:-}" ] || cp "$dir/figures.md" "$GMG_E2E_SOAK_FIGURES"
	if [ -n "$FA_FAIL" ]; then
		fail "$FA_FAIL"
	elif [ -n "$flat" ]; then
		fail "replica-2 not flat after warm-up: ${flat%; }"
	else
		pass "$FA_SUMMARY over ${SOAK_SECONDS}s with $k faults ($(awk '{ print $1 }' "$dir/marks" | sort | uniq -c | awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }')); no node over its threshold, every review within ${GMG_WEBHOOK_TIMEOUT:-5}s; replica-2 flat after warm-up: $(awk -v a="$warm" -v b="$last" 'BEGIN { split(a, w, " "); split(b, l, " "); printf "RSS %.1f -> %.1f MiB, descriptors %d -> %d, threads %d -> %d (%ds -> %ds)", w[4] / 1024, l[4] / 1024, w[6], l[6], w[5], l[5], w[1], l[1] }')"
	fi
	fa_cleanup "$dir"
}
