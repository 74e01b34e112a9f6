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
