# shellcheck shell=bash
# e2e test 22 (GPUMemoryPolicy CRD), sourced by run.sh, which provides kc, log, pass, fail,
# REPO_ROOT and E2E_DIR.
#
# What the API server alone does with GPUMemoryPolicy objects (the webhook does not read them
# yet, docs/policies.md): cluster.sh installed manifests/crd-gpumemorypolicy.yaml and it is
# Established; the chart's crds/ copy is the same file and a server dry run accepts it; every
# example of examples/policies/ is accepted (server dry run); each bad policy of PO_BAD is
# refused at kubectl apply with the message of the schema or CEL rule that catches it (what
# kubectl said is printed), and is not stored; a good policy is created, defaulted (mode
# enforce), its status written through the status subresource shows in `kubectl get gmp`'s
# columns, and it is deleted.
# Each step can fail: applied against the CRD without its x-kubernetes-validations, the CEL rows
# of the table are admitted and reported as such.

PO_CRD=gpumemorypolicies.gpu-memory-guard.io

# Bad policies, one a line: what | spec (YAML flow) | a substring of the API server's refusal.
PO_BAD=$(
	cat <<'EOF'
threshold 1.5|{threshold: 1.5}|spec.threshold in body should be less than or equal to 1
threshold 0|{threshold: 0}|spec.threshold in body should be greater than 0
mode "strict"|{mode: strict}|spec.mode: Unsupported value: "strict"
duplicate tier names|{tiers: [{name: batch, namespaces: [ml]}, {name: batch, namespaces: [ci]}]}|tier names must be unique in a policy
tier with no criterion|{tiers: [{name: batch, maxShare: 0.5}]}|a tier needs at least one criterion
yield to an unknown tier|{tiers: [{name: batch, namespaces: [ml], yield: {tier: realtime, above: 0.8}}]}|yield.tier must name another tier of this policy
yield to a tier without maxShare|{tiers: [{name: realtime, priorityClassNames: [realtime]}, {name: batch, priorityClassNames: [batch], yield: {tier: realtime, above: 0.8}}]}|yield.tier must name a tier that has a maxShare
In without values|{nodeSelector: {matchExpressions: [{key: nvidia.com/gpu.product, operator: In}]}}|values: must be given (at least one) when operator is In or NotIn
Exists with values|{tiers: [{name: lab, podSelector: {matchExpressions: [{key: team, operator: Exists, values: [a]}]}}]}|values: must not be given when operator is Exists or DoesNotExist
maxShare 0|{tiers: [{name: realtime, priorityClassNames: [realtime], maxShare: 0}]}|spec.tiers[0].maxShare in body should be greater than 0
EOF
)

po_object() { # NAME SPEC
	printf 'apiVersion: gpu-memory-guard.io/v1alpha1\nkind: GPUMemoryPolicy\nmetadata: {name: %s}\nspec: %s\n' "$1" "$2"
}

# The table: prints "what: kubectl's words" per row; PO_ERR names the rows not refused as
# expected, PO_SEEN counts the rows.
po_bad_table() {
	local what spec want out i=0
	while IFS='|' read -r -u 3 what spec want; do
		i=$((i + 1))
		if out=$(po_object "e2e-bad-$i" "$spec" | kc apply -f - 2>&1); then
			PO_ERR="$PO_ERR; $what admitted ($out)"
			printf '     22 ADMITTED, %s: %s\n' "$what" "$out"
			kc delete gmp "e2e-bad-$i" --ignore-not-found >/dev/null 2>&1
			continue
		fi
		out=$(tr '\n' ' ' <<<"$out")
		printf '     22 refused, %s: %s\n' "$what" "$out"
		if [[ $out != *"$want"* ]]; then
			PO_ERR="$PO_ERR; $what refused without \"$want\": $out"
		elif kc get gmp "e2e-bad-$i" >/dev/null 2>&1; then
			PO_ERR="$PO_ERR; $what refused, yet stored"
		fi
	done 3<<<"$PO_BAD"
	PO_SEEN=$i
}

PO_GOOD='apiVersion: gpu-memory-guard.io/v1alpha1
kind: GPUMemoryPolicy
metadata: {name: e2e-good}
spec:
  nodeSelector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-L4-SHARED}}
  threshold: 0.85
  tiers:
  - {name: realtime, priorityClassNames: [realtime], maxShare: 0.6}
  - {name: batch, namespaces: [batch], yield: {tier: realtime, above: 0.8}}'

# A good policy created, defaulted, its status shown by the printer columns, deleted. Prints
# kubectl get gmp; PO_ERR says what went wrong, PO_ROW is the policy's row.
po_lifecycle() {
	local name=e2e-good out cols now
	if ! out=$(kc apply -f - <<<"$PO_GOOD" 2>&1); then
		PO_ERR="$PO_ERR; a good policy was refused: $out"
		return
	fi
	out=$(kc get gmp $name -o jsonpath='{.spec.mode}')
	[ "$out" = enforce ] || PO_ERR="$PO_ERR; spec.mode not defaulted to enforce: '$out'"
	# As the webhook will write it: through the status subresource.
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	out=$(kc patch gmp $name --subresource=status --type=merge -p "{\"status\": {\"observedGeneration\": 1, \"nodes\": 1,
	  \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\", \"reason\": \"Applied\", \"message\": \"e2e\",
	  \"lastTransitionTime\": \"$now\", \"observedGeneration\": 1}]}}" 2>&1) ||
		PO_ERR="$PO_ERR; status write refused: $out"
	cols=$(kc get gmp 2>&1)
	printf '     22 kubectl get gmp:\n%s\n' "$(sed 's/^/       /' <<<"$cols")"
	grep -qE '^NAME +MODE +THRESHOLD +NODES +READY +AGE$' <<<"$cols" ||
		PO_ERR="$PO_ERR; kubectl get gmp columns: $cols"
	grep -qE "^$name +enforce +0\.85 +1 +True +[0-9]+[smh]$" <<<"$cols" ||
		PO_ERR="$PO_ERR; kubectl get gmp row (want: $name enforce 0.85 1 True AGE): $cols"
	PO_ROW=$(grep "^$name " <<<"$cols" | tr -s ' ')
	out=$(kc delete gmp $name --wait=true 2>&1) || PO_ERR="$PO_ERR; delete failed: $out"
	! kc get gmp $name >/dev/null 2>&1 || PO_ERR="$PO_ERR; $name still there after delete"
}

test_policy_crd() {
	CURRENT="22 GPUMemoryPolicy CRD"
	local out bad="" chart="$REPO_ROOT/helm/gpu-memory-guard/crds/gpumemorypolicy.yaml" \
		crd="$REPO_ROOT/manifests/crd-gpumemorypolicy.yaml" f n=0
	PO_ERR="" PO_SEEN=0 PO_ROW=""
	out=$(kc get crd $PO_CRD -o jsonpath='{.status.conditions[?(@.type=="Established")].status} {.spec.scope} {.spec.names.shortNames}' 2>&1)
	[ "$out" = 'True Cluster ["gmp"]' ] || bad="$bad; CRD not Established, cluster-scoped, short name gmp: $out"
	cmp -s "$crd" "$chart" || bad="$bad; the chart's crds/gpumemorypolicy.yaml differs from manifests/crd-gpumemorypolicy.yaml"
	out=$(kc apply --dry-run=server -f "$chart" 2>&1) || bad="$bad; the chart's CRD refused by a server dry run: $out"
	for f in "$REPO_ROOT"/examples/policies/*.yaml; do
		out=$(kc apply --dry-run=server -f "$f" 2>&1) || bad="$bad; example $(basename "$f") refused: $out"
		n=$((n + $(grep -c 'created (server dry run)' <<<"$out")))
	done
	[ "$n" -ge 4 ] || bad="$bad; the examples held $n policies, expected at least 4"
	po_bad_table
	po_lifecycle
	bad="$bad$PO_ERR"
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	else
		pass "CRD Established (chart's crds/ identical, server dry run accepted); $n example policies accepted; $PO_SEEN bad policies refused at kubectl apply with the expected messages; a good policy created, defaulted to enforce, status through the subresource, listed by kubectl get gmp ($PO_ROW), deleted"
	fi
}

# --- 23. (issue 11) the webhook applies GPUMemoryPolicy objects ---------------------------------
#
# Through the real API server and the running webhook (no restart): the seed's example
# (examples/policies/realtime-batch.yaml, on the H100 nodes) refuses a realtime pod over its
# 60 percent share and, once realtime declares more than 80 percent of that share, a batch pod,
# while a pod of no tier is admitted; switched to audit, the same batch pod is admitted and the
# API server's audit log holds the webhook's auditAnnotations entry
# (pods.gpu-memory-guard.io/audit-violations) and the webhook counts it; switched to warn, it is
# admitted with kubectl's warning, and refused again back in enforce; the policy's status
# (observedGeneration, nodes, Ready) follows each edit; an enforcing threshold
# policy on the A100 node refuses what the flags admit; deleting the policies restores the flags.
# Every verdict is kubectl's (server dry runs, one real create); the webhook's pid is unchanged.

PA_NS=e2e-policy

pa_pod() { # NAME MEMORY GPUS NODE PRIORITY_CLASS(or "")
	pod_json "$1" $PA_NS "$2" "$3" "$4" | jq --arg pc "$5" 'if $pc == "" then . else .spec.priorityClassName = $pc end'
}
pa_dry() { pa_pod "$@" | kc create --dry-run=server -f - 2>&1; }
pa_dry_denied() { # GREP NAME MEMORY GPUS NODE PC: refused with GREP in the message
	local out
	out=$(pa_dry "${@:2}") && return 1
	grep -qF "$1" <<<"$out"
}
pa_dry_allowed() { pa_dry "$@" >/dev/null; }
pa_dry_warns() { # GREP NAME MEMORY GPUS NODE PC: admitted, with GREP in kubectl's warning
	local out
	out=$(pa_dry "${@:2}") || return 1
	grep '^Warning:' <<<"$out" | grep -qF "$1"
}
pa_status() { # NAME: "observedGeneration nodes ReadyStatus ReadyReason", as the webhook wrote it
	kc get gmp "$1" -o jsonpath='{.status.observedGeneration} {.status.nodes} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}'
}
pa_status_is() { [ "$(pa_status "$1")" = "$2" ]; }
pa_audit_total() { metrics | awk '/^gpu_memory_guard_policy_audit_violations_total/ {s += $2} END {print s + 0}'; }

test_policy_apply() {
	CURRENT="23 GPUMemoryPolicy applied by the webhook"
	local bad="" out t0 lag_apply lag_audit a0 a1 node=gpu-h100-a a100=gpu-a100-0 audit_line h100s status_row warn_out
	fresh_ns $PA_NS
	kc create priorityclass realtime --value=1000 >/dev/null 2>&1
	kc create priorityclass batch --value=100 >/dev/null 2>&1
	# Before: the flags (90 percent) admit a 48Gi realtime pod on the 79.6Gi H100.
	pa_dry_allowed rt-probe 48Gi 1 $node realtime || bad="$bad; 48Gi realtime refused before any policy"
	out=$(kc apply -f "$REPO_ROOT/examples/policies/realtime-batch.yaml" 2>&1) || bad="$bad; example refused: $out"
	t0=$SECONDS
	# realtime budget: 60 percent of 81559Mi = 47.8Gi
	if ! wait_for 30 "the realtime tier to apply" pa_dry_denied 'tier "realtime"' rt-probe 48Gi 1 $node realtime; then
		bad="$bad; 48Gi realtime still not refused by its tier 30s after the policy: $(pa_dry rt-probe 48Gi 1 $node realtime)"
	fi
	lag_apply=$((SECONDS - t0))
	# Its status, written by the webhook: observedGeneration, the H100 nodes it selects, Ready.
	h100s=$(kc get nodes -l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-SHARED -o name | grep -c .)
	wait_for 20 "the policy's status" pa_status_is realtime-batch "1 $h100s True Applied" ||
		bad="$bad; status of realtime-batch is '$(pa_status realtime-batch)', want '1 $h100s True Applied'"
	status_row=$(kc get gmp realtime-batch --no-headers 2>&1 | tr -s ' ')
	# 40Gi of realtime placed: above 80 percent of its share (38.2Gi).
	out=$(pa_pod rt-0 40Gi 1 $node realtime | kc create -f - 2>&1) || bad="$bad; 40Gi realtime refused: $out"
	wait_for 30 "batch to yield" pa_dry_denied 'yields to tier "realtime"' batch-probe 1Gi 1 $node batch ||
		bad="$bad; 1Gi batch not refused with realtime at 40Gi: $(pa_dry batch-probe 1Gi 1 $node batch)"
	grep -qF "$DENIED_POD" <<<"$(pa_dry batch-probe 1Gi 1 $node batch)" || bad="$bad; the batch refusal is not the webhook's"
	pa_dry_allowed plain 20Gi 1 $node "" || bad="$bad; a 20Gi pod of no tier refused: $(pa_dry plain 20Gi 1 $node "")"
	# Audit: the same batch pod admitted, the breach in the API server's audit log and counted.
	a0=$(pa_audit_total)
	kc patch gmp realtime-batch --type=merge -p '{"spec": {"mode": "audit"}}' >/dev/null
	t0=$SECONDS
	wait_for 30 "audit mode" pa_dry_allowed batch-probe 1Gi 1 $node batch ||
		bad="$bad; batch still refused 30s after mode audit: $(pa_dry batch-probe 1Gi 1 $node batch)"
	lag_audit=$((SECONDS - t0))
	wait_for 20 "the status of generation 2" pa_status_is realtime-batch "2 $h100s True Applied" ||
		bad="$bad; after the edit, status of realtime-batch is '$(pa_status realtime-batch)', want '2 $h100s True Applied'"
	out=$(pa_pod batch-0 1Gi 1 $node batch | kc create -f - 2>&1) || bad="$bad; batch-0 refused in audit mode: $out"
	a1=$(pa_audit_total)
	[ "$a1" -gt "$a0" ] || bad="$bad; gpu_memory_guard_policy_audit_violations_total $a0 -> $a1"
	audit_line=""
	wait_for 15 "the audit log entry" bash -c "grep -F '\"name\":\"batch-0\"' '$STATE/logs/audit.log' | grep -qF 'pods.gpu-memory-guard.io/audit-violations'" &&
		audit_line=$(grep -F '"name":"batch-0"' "$STATE/logs/audit.log" | grep -F 'pods.gpu-memory-guard.io/audit-violations' | head -n 1 |
			jq -r '.annotations["pods.gpu-memory-guard.io/audit-violations"]' 2>/dev/null)
	[[ $audit_line == *'GPUMemoryPolicy "realtime-batch" (audit)'*'yields to tier "realtime"'* ]] ||
		bad="$bad; no audit-violations annotation for batch-0 in the API server's audit log (got: '$audit_line'; $(grep -c . "$STATE/logs/audit.log" 2>/dev/null) lines)"
	# Warn: admitted, and kubectl shows the refusal's words as a warning; then enforce again.
	kc patch gmp realtime-batch --type=merge -p '{"spec": {"mode": "warn"}}' >/dev/null
	warn_out=""
	wait_for 30 "warn mode" pa_dry_warns 'yields to tier "realtime"' batch-probe 1Gi 1 $node batch &&
		warn_out=$(pa_dry batch-probe 1Gi 1 $node batch | grep '^Warning:' | head -n 1)
	[[ $warn_out == *'yields to tier "realtime"'* ]] ||
		bad="$bad; warn mode: no kubectl warning with the yield for a batch dry run: $(pa_dry batch-probe 1Gi 1 $node batch)"
	kc patch gmp realtime-batch --type=merge -p '{"spec": {"mode": "enforce"}}' >/dev/null
	wait_for 30 "enforce again" pa_dry_denied 'yields to tier "realtime"' batch-probe 1Gi 1 $node batch ||
		bad="$bad; back in enforce mode, 1Gi batch not refused"
	kc delete gmp realtime-batch --wait=true >/dev/null 2>&1
	# An enforcing threshold policy on the A100 node (8 x 38.6Gi): 120Gi there, 40Gi more is
	# 160Gi, over 50 percent (154.4Gi) and under the flags' 90 percent.
	out=$(pa_pod a100-0 120Gi 8 $a100 "" | kc create -f - 2>&1) || bad="$bad; 120Gi on $a100 refused: $out"
	pa_dry_allowed a100-probe 40Gi 8 $a100 "" || bad="$bad; 40Gi more on $a100 refused under the flags"
	kc apply -f - >/dev/null <<<'apiVersion: gpu-memory-guard.io/v1alpha1
kind: GPUMemoryPolicy
metadata: {name: e2e-a100-half}
spec:
  nodeSelector: {matchLabels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB}}
  threshold: 0.5'
	wait_for 30 "the A100 policy" pa_dry_denied 'GPUMemoryPolicy "e2e-a100-half"' a100-probe 40Gi 8 $a100 "" ||
		bad="$bad; 40Gi more on $a100 not refused by e2e-a100-half: $(pa_dry a100-probe 40Gi 8 $a100 "")"
	# The report reads the policy too: its limit and largest fit there are the webhook's.
	local json fit src limit
	if ! json=$("$BINARY" report --kubeconfig "$STATE/kubeconfig" --threshold "$THRESHOLD" -o json 2>&1); then
		bad="$bad; the report failed: $json"
	else
		fit=$(jq -r --arg n $a100 '.nodes[] | select(.name == $n) | .largestFitBytes' <<<"$json")
		src=$(jq -r --arg n $a100 '.nodes[] | select(.name == $n) | "\(.thresholdSource) \(.thresholdPolicy)"' <<<"$json")
		limit=$(jq -r --arg n $a100 '.nodes[] | select(.name == $n) | .limitBytes' <<<"$json")
		[ "$src" = "policy e2e-a100-half" ] || bad="$bad; the report's threshold source on $a100: '$src'"
		if ! [[ $fit =~ ^[0-9]+$ ]] || [ "$fit" -le 1048576 ]; then
			bad="$bad; the report's largest fit on $a100: '$fit'"
		else
			pa_dry_allowed a100-fit "$fit" 1 $a100 "" || bad="$bad; the report's largest fit $fit refused on $a100"
			pa_dry_denied "$DENIED_POD" a100-over "$((fit + 1))" 1 $a100 "" ||
				bad="$bad; one byte more than the report's largest fit ($((fit + 1))) not refused by the webhook on $a100"
		fi
	fi
	kc delete gmp e2e-a100-half --wait=true >/dev/null 2>&1
	wait_for 30 "the flags again" pa_dry_allowed a100-probe 40Gi 8 $a100 "" ||
		bad="$bad; 40Gi more on $a100 still refused after the policy was deleted"
	[ "$(cat "$STATE/pids/webhook.pid")" = "$WEBHOOK_PID" ] && kill -0 "$WEBHOOK_PID" || bad="$bad; the webhook was restarted or died"
	kc delete priorityclass realtime batch >/dev/null 2>&1
	drop_ns $PA_NS
	if [ -n "$bad" ]; then
		fail "${bad#; }"
	else
		pass "seed example applied without restart in ${lag_apply}s (kubectl get gmp: $status_row; observedGeneration 1 then 2 after the edit): 48Gi realtime refused by its tier, 1Gi batch refused while realtime declares 40Gi, 20Gi of no tier admitted; audit mode (in ${lag_audit}s): batch admitted, the API server's audit log has pods.gpu-memory-guard.io/audit-violations \"${audit_line:0:160}...\", metric $a0 -> $a1; warn mode: admitted with kubectl's \"${warn_out:0:90}...\"; enforce again: refused; e2e-a100-half refused 40Gi more on $a100 that the flags admit (the report: limit $limit bytes from the policy, largest fit $fit admitted, one byte more refused), and deleting it restored them"
	fi
}
