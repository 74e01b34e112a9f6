#!/usr/bin/env bash
# Install proof: the install paths of issue 4 (Helm chart, plain manifests, certificates, image)
# checked against a real kube-apiserver (test/e2e/cluster.sh up --no-webhook, in a state folder of
# its own).
#
# Usage: install-proof.sh /abs/path/to/gpu-memory-guard
#
# 1. Static: the Dockerfile runs CI's dependency script and the Makefile's CMake lines (its
#    cmake RUN line is run here, in the .dockerignore-filtered context), and its runtime stage
#    installs a package for every library the binary links; `make image` (tools/image/build.sh)
#    reads from that stage the same packages, USER, ENTRYPOINT, CMD, EXPOSE and LABEL keys.
# 2. Chart without a cluster: helm lint (every certificate mode, scheduler.enabled),
#    values.schema.json refuses bad values, cert-manager mode renders the cainjector annotation
#    (and the second scheduler's caFile), reservations local is refused with more than one
#    replica.
# 3. Server-side dry runs: manifests/ (kubectl apply -f and -k), helm template (also with
#    scheduler.enabled: the extender's URL is the Service's, its caData the render's CA); the
#    chart (with --include-crds: its crds/ folder) and manifests/ render the same objects, the
#    GPUMemoryPolicy CRD and the ClusterRole's read-only rule on gpumemorypolicies included; the
#    chart's crds/gpumemorypolicy.yaml is byte-identical to manifests/crd-gpumemorypolicy.yaml.
# 4. Helm path: helm install with clientConfig switched to a URL; the stored Deployment and
#    webhook configuration carry every designed setting; the binary runs on the host with the
#    chart's own args, the chart Secret's cert/key and a token of the chart's ServiceAccount;
#    placements admitted and refused by pod CREATE, by the scheduler's binding and by the legacy
#    bindings resource; the API server refuses what the ClusterRole does not allow (policies:
#    get/list/watch only, no status write); the CRD (deleted first) is installed by helm install
#    from crds/ and Established, and left in place by helm uninstall; shared
#    reservations (issue 8): the Deployment passes --reservations=shared and the release
#    namespace, an admitted placement leaves the node's Lease holding the pod, and the
#    ServiceAccount may get/create/update Leases in that namespace only (can-i, and real writes
#    elsewhere refused with 403); helm upgrade keeps the caBundle; a rotated serving certificate
#    is served without restart and shows in the expiry metric.
#    Second scheduler (issue 9, installed with scheduler.enabled): Deployment, PDB, RBAC (can-i)
#    as stored; the real kube-scheduler runs on the host with the Deployment's command and the
#    installed KubeSchedulerConfiguration (only clientConnection.kubeconfig added: a token of its
#    ServiceAccount), becomes leader with a second instance standing by; a GPU pod with
#    schedulerName gpu-memory-guard preferring a memory-full node is bound where it fits on its
#    first attempt (extender metrics, no Binding denied), binpack picks the fullest node that
#    fits, a pod that fits nowhere stays Pending with the extender's reasons; failover to the
#    standby, which binds a new pod; no RBAC denial in the scheduler logs.
# 5. Manifests path: the same with certificates from `gpu-memory-guard certs`, the documented
#    one-line apply, and the chart's existingSecret mode on that Secret. Then the optional
#    manifests/scheduler/ (sched_manifest_checks): dry runs, the same objects as the chart's
#    scheduler.enabled, the real kube-scheduler run from it.
# 6. Webhook down: GPU placements fail closed, an undeclared MIG pod's CREATE is sent (refused),
#    ordinary pod CREATE is not sent, bindings wait, and the webhook's own namespace and
#    kube-system still schedule.
#
# Prints PASS/FAIL per check, then "N passed, M failed"; exits 1 on any failure.
# GMG_E2E_KEEP=1 keeps the cluster up afterwards.
set -uo pipefail

BINARY=${1:-}
[ -n "$BINARY" ] && [ -x "$BINARY" ] || {
	echo "usage: $0 /abs/path/to/gpu-memory-guard" >&2
	exit 2
}
export GMG_E2E_STATE=${GMG_E2E_STATE:-$(mktemp -d "${TMPDIR:-/tmp}/gmg-install-proof.XXXXXX")}
# Ports of its own (lib.sh, free_port): `make test` runs it beside the e2e suite's two clusters
# (20000-23999, 24000-27999).
export GMG_E2E_PORTS=${GMG_E2E_PORTS:-28000-31999}
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

CHART="$REPO_ROOT/helm/gpu-memory-guard"
MANIFESTS="$REPO_ROOT/manifests"
NS=gpu-memory-guard # the chart's release namespace and the manifests' namespace
RELEASE=gpu-memory-guard
SA=gpu-memory-guard
SECRET=gpu-memory-guard-tls
TEST_NS=gmg-install-proof
KUBE_VERSION="" # the local control plane's version: its kube-apiserver's, once built (main)
DENIED_POD='admission webhook "pods.gpu-memory-guard.io" denied the request'
WORK="$STATE/install-proof"
PASSED=0
FAILED=0
HOST_PID=""

pass() { PASSED=$((PASSED + 1)); printf 'PASS %s\n' "$1"; }
fail() {
	FAILED=$((FAILED + 1))
	printf 'FAIL %s\n' "$1"
	[ -z "${2:-}" ] || printf '     %s\n' "$2" | head -n 8
}
# check NAME COMMAND...: PASS when COMMAND succeeds; its output is shown on failure.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}

teardown() {
	local rc=$?
	stop_host_scheduler 1
	stop_host_scheduler 2
	stop_host_scheduler 3 # sched_manifest_checks
	stop_host_webhook
	if [ "${GMG_E2E_KEEP:-0}" = 1 ]; then
		log "cluster kept up: GMG_E2E_STATE=$STATE $E2E_DIR/cluster.sh env"
	else
		bash "$E2E_DIR/cluster.sh" down >/dev/null 2>&1 || true
		case $STATE in */gmg-install-proof.*) rm -rf "$STATE" ;; esac
	fi
	exit $rc
}

# --- 1. static checks (no container engine here) --------------------------------------------

# The Makefile's `build` recipe lines, with $(BUILD) as the Dockerfile's "build" folder.
makefile_cmake_lines() {
	sed -n '/^build: /,/^$/p' "$REPO_ROOT/Makefile" | grep -E '^\s+cmake ' |
		sed -e 's/^\s*//' -e 's/\$(BUILD)/build/g' -e 's/ -j \$(JOBS)//' -e 's/\s*$//'
}

dockerfile_cmake_lines() {
	# RUN cmake ... \ && cmake ... : one line per cmake call, -j/--target/version call dropped.
	sed -n '/^FROM .* AS builder/,/^FROM /p' "$REPO_ROOT/Dockerfile" |
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -E '^RUN cmake ' |
		sed -e 's/^RUN //' -e 's/ && /\n/g' | sed -e 's/^\s*//' | grep -E '^cmake ' |
		sed -e 's/ -j "\$(nproc)"//' -e 's/ --target [^ ]*//' -e 's/\s*$//'
}

check_dockerfile_build() {
	local mk df
	mk=$(makefile_cmake_lines)
	df=$(dockerfile_cmake_lines)
	[ -n "$mk" ] || { echo "no cmake lines found in the Makefile's build target"; return 1; }
	[ "$mk" = "$df" ] || { printf 'Makefile:\n%s\nDockerfile:\n%s\n' "$mk" "$df"; return 1; }
	grep -qE '^RUN bash \.ci/install-deps\.sh$' "$REPO_ROOT/Dockerfile" ||
		{ echo "the builder does not run .ci/install-deps.sh"; return 1; }
}

# Every DT_NEEDED library of the binary must come from a package the runtime stage installs
# (or from libc6, which debian:12-slim has).
check_dockerfile_runtime_libs() {
	local runtime lib path pkg missing=""
	runtime=$(sed -n '/^FROM debian:\${DEBIAN_SLIM_TAG}/,$p' "$REPO_ROOT/Dockerfile" |
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep 'apt-get install' | tr ' ' '\n' |
		grep -E '^[a-z0-9][a-z0-9.+-]+$')
	for lib in $(objdump -p "$BINARY" | awk '/NEEDED/ {print $2}'); do
		path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
		[ -n "$path" ] || { missing="$missing $lib(unresolved)"; continue; }
		pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n1 | cut -d: -f1)
		[ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -n1 | cut -d: -f1)
		case " libc6 $(echo $runtime) " in *" $pkg "*) ;; *) missing="$missing $lib($pkg)" ;; esac
	done
	grep -qE '^USER [0-9]+(:[0-9]+)?$' "$REPO_ROOT/Dockerfile" || missing="$missing USER-not-numeric"
	grep -q '^ENTRYPOINT \["/usr/local/bin/gpu-memory-guard"\]' "$REPO_ROOT/Dockerfile" ||
		missing="$missing ENTRYPOINT"
	[ -z "$missing" ] || { echo "not covered by the runtime stage:$missing"; return 1; }
}

# `make image` (tools/image/build.sh, no container engine) reads the Dockerfile's runtime stage and
# stops on an instruction it does not reproduce: what it reads must be what the Dockerfile says
# (the same packages, so the DT_NEEDED check above covers the image too; USER, ENTRYPOINT, CMD,
# EXPOSE; every LABEL key).
check_image_matches_dockerfile() {
	local spec runtime stage want got
	spec=$(bash "$REPO_ROOT/tools/image/build.sh" --spec) || return 1
	stage=$(sed -n '/^FROM debian:\${DEBIAN_SLIM_TAG}/,$p' "$REPO_ROOT/Dockerfile" |
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
	runtime=$(grep -oE -- '--no-install-recommends [^&]*' <<<"$stage" | tr ' ' '\n' | tail -n +2 |
		grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort -u)
	got=$(awk '$1 == "package" { print $2 }' <<<"$spec" | sort -u)
	[ -n "$runtime" ] && [ "$runtime" = "$got" ] ||
		{ printf 'Dockerfile packages: %s\nmake image packages: %s\n' "$(echo $runtime)" "$(echo $got)"; return 1; }
	want=$(sed -n 's/^USER //p' <<<"$stage")
	got=$(awk '$1 == "user" { print $2 }' <<<"$spec")
	[ "$want" = "$got" ] || { echo "USER $want, make image $got"; return 1; }
	want=$(sed -n 's/^ENTRYPOINT //p; s/^CMD //p' <<<"$stage" | jq -c .)
	got=$(awk '$1 == "entrypoint" || $1 == "cmd" { print $2 }' <<<"$spec")
	[ "$want" = "$got" ] || { printf 'ENTRYPOINT/CMD %s, make image %s\n' "$want" "$got"; return 1; }
	want=$(sed -n 's/^EXPOSE //p' <<<"$stage" | tr ' ' '\n' | grep -v '^$')
	got=$(awk '$1 == "expose" { print $2 }' <<<"$spec")
	[ "$want" = "$got" ] || { echo "EXPOSE $(echo $want), make image $(echo $got)"; return 1; }
	want=$(grep -oE '[a-z0-9.-]+="' <<<"$stage" | tr -d '="' | sort)
	got=$(awk '$1 == "label" { sub(/=.*/, "", $2); print $2 }' <<<"$spec" | sort)
	[ "$want" = "$got" ] || { printf 'LABEL keys %s, make image %s\n' "$(echo $want)" "$(echo $got)"; return 1; }
}

# The build context as `docker build` would send it: the working tree's files minus
# .dockerignore (root-relative patterns and **/ patterns, as Docker matches them).
docker_context() { # DEST
	local dest=$1 pats=() p f keep
	while IFS= read -r p; do
		p=${p%%#*}
		p=$(echo "$p" | sed 's/[[:space:]]*$//')
		[ -n "$p" ] && pats+=("$p")
	done <"$REPO_ROOT/.dockerignore"
	(cd "$REPO_ROOT" && git ls-files -co --exclude-standard) | while IFS= read -r f; do
		keep=1
		for p in "${pats[@]}"; do
			case $p in
			'**/'*) [[ $(basename "$f") == ${p#'**/'} ]] && keep=0 ;;
			*) [[ $f == $p || $f == $p/* ]] && keep=0 ;;
			esac
		done
		[ $keep = 0 ] || echo "$f"
	done | (cd "$REPO_ROOT" && tar -cf - -T -) | tar -xf - -C "$dest"
}

# The builder stage's RUN line that builds (after COPY . .), run as-is in that context.
check_dockerfile_builds_here() {
	local ctx="$STATE/docker-context" cmd
	rm -rf "$ctx" && mkdir -p "$ctx" && docker_context "$ctx" || return 1
	cmd=$(sed -n '/^FROM .* AS builder/,/^FROM /p' "$REPO_ROOT/Dockerfile" |
		sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -E '^RUN cmake ' | sed 's/^RUN //')
	[ -n "$cmd" ] || { echo "no cmake RUN line in the builder stage"; return 1; }
	(cd "$ctx" && bash -c "$cmd") 2>&1 | tail -n 5
	[ -x "$ctx/build/gpu-memory-guard" ] || { echo "no binary built from the context"; return 1; }
	rm -rf "$ctx"
}

# --- 2. chart without a cluster ---------------------------------------------------------------

helm_() { "$TOOLS_BIN/helm" "$@"; }

helm_template() { helm_ template "$RELEASE" "$CHART" --namespace "$NS" --kube-version "$KUBE_VERSION" "$@"; }

check_lint() {
	helm_ lint --strict "$CHART" --kube-version "$KUBE_VERSION" "$@"
}

# schema_rejects WHAT ARGS...: helm template must fail with a schema error.
schema_rejects() {
	local out
	if out=$(helm_template "$@" 2>&1); then
		echo "accepted: $*"
		return 1
	fi
	echo "$out" | grep -qiE 'schema|values don.t meet' || { echo "$out"; return 1; }
}

# reservations: local keeps reservations per replica, which cannot be exact across replicas
# (issue 8): the chart must refuse it with replicas > 1, saying why.
local_multi_refused() {
	local out
	if out=$(helm_template --set reservations=local 2>&1); then
		echo "rendered reservations=local with 2 replicas"
		return 1
	fi
	[[ $out == *"reservations: local keeps each replica's reservations in its own memory, so 2 replicas"* ]] ||
		{ echo "$out"; return 1; }
}

# reservations: local with one replica renders --reservations=local, no namespace flag and no
# Lease Role (nothing to write), and the API server accepts it.
local_single_ok() {
	local out
	out=$(helm_template --set reservations=local --set replicas=1 | kc apply --dry-run=server -o json -f -) ||
		return 1
	jq -e '[.items[] | select(.kind == "Role" or .kind == "RoleBinding")] == [] and
	  (.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args |
	    index("--reservations=local") != null and
	    all(.[]; startswith("--reservations-namespace") | not))' <<<"$out" >/dev/null ||
		{ jq -c '[.items[] | .kind]' <<<"$out"; return 1; }
}

check_cert_manager_render() {
	local out
	out=$(helm_template --set certificate.mode=certManager) || return 1
	echo "$out" | grep -q "cert-manager.io/inject-ca-from: $NS/$RELEASE" || { echo "no inject-ca-from"; return 1; }
	echo "$out" | grep -q '^kind: Certificate' || { echo "no Certificate"; return 1; }
	! echo "$out" | grep -q 'caBundle:' || { echo "caBundle rendered in certManager mode"; return 1; }
	out=$("$TOOLS_BIN/kubectl" kustomize "$REPO_ROOT/certs/cert-manager") || return 1
	[[ $out == *"cert-manager.io/inject-ca-from: $NS/gpu-memory-guard"* ]] ||
		{ echo "certs/cert-manager overlay lacks the annotation"; return 1; }
}

# --- helpers for the cluster checks ----------------------------------------------------------

apiserver_url() { echo "https://127.0.0.1:$APISERVER_PORT"; }

# A kubeconfig that authenticates as the ServiceAccount with a token from the TokenRequest API.
sa_kubeconfig() { # FILE
	local token
	token=$(kc create token "$SA" -n "$NS" --duration=2h) || return 1
	echo "$token" >"$WORK/token"
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: proof
  cluster:
    server: $(apiserver_url)
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $SA
  user:
    token: $token
contexts:
- name: proof
  context: {cluster: proof, user: $SA}
current-context: proof
EOF
	chmod 600 "$1"
}

# A folder laid out as the kubelet lays out a Secret volume: FILE -> ..data/FILE, ..data -> a
# timestamped folder; an update swaps ..data atomically. volume_update DIR CRT KEY [CA].
volume_update() {
	local dir=$1 ts
	ts="..$(date +%s%N)"
	mkdir -p "$dir/$ts"
	cp "$2" "$dir/$ts/tls.crt"
	cp "$3" "$dir/$ts/tls.key"
	[ -z "${4:-}" ] || cp "$4" "$dir/$ts/ca.crt"
	chmod 600 "$dir/$ts/tls.key"
	ln -sfn "$ts" "$dir/..data_tmp"
	mv -T "$dir/..data_tmp" "$dir/..data"
	ln -sfn ..data/tls.crt "$dir/tls.crt"
	ln -sfn ..data/tls.key "$dir/tls.key"
	[ -z "${4:-}" ] || ln -sfn ..data/ca.crt "$dir/ca.crt"
}

# The chart's (or manifests') container args, with the addresses, files and kubeconfig of the
# host run substituted: proves the binary accepts exactly the flags the install paths pass.
host_args() { # DEPLOYMENT_JSON_FILE
	jq -r '.spec.template.spec.containers[0].args[]' "$1" |
		grep -vE '^--(listen|health-listen|tls-cert-file|tls-key-file|kubeconfig|client-ca-file)(=|$)'
}

start_host_webhook() { # TLS_DIR KUBECONFIG DEPLOYMENT_JSON
	local args
	mapfile -t args < <(host_args "$3")
	[ "${args[0]:-}" = serve ] || { echo "the Deployment's args do not start with serve: ${args[*]}"; return 1; }
	# The chart's --client-ca-file is the mounted serving Secret's ca.crt: the same file here.
	if jq -e '.spec.template.spec.containers[0].args | index("--client-ca-file=/etc/gpu-memory-guard/tls/ca.crt")' "$3" >/dev/null; then
		args+=(--client-ca-file "$1/ca.crt")
	fi
	"$BINARY" "${args[@]}" --listen "127.0.0.1:$WEBHOOK_PORT" \
		--health-listen "127.0.0.1:$WEBHOOK_HEALTH_PORT" \
		--tls-cert-file "$1/tls.crt" --tls-key-file "$1/tls.key" --kubeconfig "$2" \
		>>"$STATE/logs/host-webhook.log" 2>&1 </dev/null &
	HOST_PID=$!
	wait_for 30 "the host webhook's /readyz" curl -sf --max-time 2 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/readyz" ||
		{ tail -n 5 "$STATE/logs/host-webhook.log"; return 1; }
}

host_webhook() { # NAME TLS_DIR KUBECONFIG DEPLOYMENT_JSON
	local name=$1
	shift
	if start_host_webhook "$@" >"$WORK/host-webhook-start.out" 2>&1 && [ -n "$HOST_PID" ] &&
		kill -0 "$HOST_PID" 2>/dev/null; then
		pass "$name (pid $HOST_PID)"
	else
		fail "$name" "$(cat "$WORK/host-webhook-start.out")"
	fi
}

stop_host_webhook() {
	[ -n "$HOST_PID" ] || return 0
	kill -TERM "$HOST_PID" 2>/dev/null || true
	local i
	for i in $(seq 1 40); do kill -0 "$HOST_PID" 2>/dev/null || break; sleep 0.25; done
	kill -KILL "$HOST_PID" 2>/dev/null || true
	wait "$HOST_PID" 2>/dev/null || true
	HOST_PID=""
}

# gpu_pod NAME MEMORY [NODE_NAME] [HOSTNAME_SELECTOR]: a GPU pod as users write them.
gpu_pod() {
	jq -n --arg name "$1" --arg ns "$TEST_NS" --arg mem "$2" --arg node "${3:-}" --arg host "${4:-}" '
	{apiVersion: "v1", kind: "Pod", metadata: {name: $name, namespace: $ns},
	 spec: ({containers: [{name: "main", image: "registry.k8s.io/pause:3.10",
	          env: [{name: "GPU_MEMORY_LIMIT", value: $mem}],
	          resources: {limits: {"nvidia.com/gpu": "1"}}}],
	        tolerations: [{key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule"}]}
	       + (if $node != "" then {nodeName: $node} else {} end)
	       + (if $host != "" then {nodeSelector: {"kubernetes.io/hostname": $host}} else {} end))}'
}

# Placement over budget must be refused: the webhook configuration is in effect.
# (Output captured first: with pipefail, `kubectl ... | grep -q` fails whenever kubectl does.)
in_effect() {
	local out
	out=$(gpu_pod gmg-probe 1000Gi gpu-l4-0 | kc create --dry-run=server -f - 2>&1)
	[[ $out == *"$DENIED_POD"* ]]
}

served_fingerprint() {
	openssl s_client -connect "127.0.0.1:$WEBHOOK_PORT" -servername localhost </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null
}

create_pod() { gpu_pod "$@" | kc create -f -; }
# An unscheduled pod asking for one MIG slice, declaring nothing.
mig_pod() { # NAME
	jq -n --arg name "$1" --arg ns "$TEST_NS" '
	{apiVersion: "v1", kind: "Pod", metadata: {name: $name, namespace: $ns},
	 spec: {containers: [{name: "main", image: "registry.k8s.io/pause:3.10",
	          resources: {limits: {"nvidia.com/mig-1g.10gb": "1"}}}]}}'
}
pod_bound() { [ -n "$(kc -n "$TEST_NS" get pod "$1" -o jsonpath='{.spec.nodeName}')" ]; }
binding_denied() {
	kc -n "$TEST_NS" get events --field-selector "involvedObject.name=$1,reason=FailedScheduling" \
		-o jsonpath='{..message}' | grep -q 'admission webhook "bindings.gpu-memory-guard.io" denied the request'
}
no_pods() { [ -z "$(kc -n "$1" get pods -o name)" ]; }
serves() { [ "$(served_fingerprint)" = "$1" ]; }
deploy_args_have() { kc -n "$NS" get deploy "$RELEASE" -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -q -- "$1"; }
helm_ca_bundle_ok() {
	openssl verify -CAfile "$WORK/helm-ca.crt" "$WORK/helm.crt" &&
		openssl x509 -in "$WORK/helm.crt" -noout -checkhost "$RELEASE.$NS.svc" | grep -q 'does match' &&
		openssl x509 -in "$WORK/helm.crt" -noout -checkip 127.0.0.1 | grep -q 'does match'
}
template_apply() { helm_template "$@" | kc apply --dry-run=server -f -; }
bundle_is_ca() { [ "$BUNDLE" = "$(base64 -w0 "$CERTS/ca.crt")" ]; }
key_mode_600() { [ "$(stat -c %a "$CERTS/tls.key")" = 600 ]; }

# The Deployment as the API server stored it (fields it does not know would be dropped).
deploy_settings_kept() { # DEPLOYMENT_JSON
	jq -e '.spec.replicas == 2 and
	  .spec.strategy.rollingUpdate.maxUnavailable == 0 and .spec.strategy.rollingUpdate.maxSurge == 1 and
	  (.spec.template.spec | .priorityClassName == "system-cluster-critical" and
	    .securityContext.runAsNonRoot == true and .securityContext.runAsUser == 65532 and
	    .securityContext.seccompProfile.type == "RuntimeDefault" and
	    (.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution | length) == 1 and
	    (.volumes[] | select(.name == "tls") | .secret.secretName) == "gpu-memory-guard-tls" and
	    (.containers[0] |
	      .lifecycle.preStop.sleep.seconds == 5 and
	      .securityContext.readOnlyRootFilesystem == true and
	      .securityContext.allowPrivilegeEscalation == false and
	      .securityContext.capabilities.drop == ["ALL"] and
	      .livenessProbe.httpGet.path == "/healthz" and .readinessProbe.httpGet.path == "/readyz" and
	      .livenessProbe.httpGet.port == "http-health" and
	      (.resources.requests.cpu != null) and (.resources.limits.memory != null) and
	      ([.volumeMounts[] | select(.name == "tls") | .readOnly] == [true])))' "$1" >/dev/null
}

# The ValidatingWebhookConfiguration as stored: both webhooks, their rules and exclusions.
webhook_config_ok() { # BINDINGS_FAILURE_POLICY
	kc get validatingwebhookconfiguration gpu-memory-guard -o json | jq -e --arg bp "$1" --arg url "$URL" '
	  (.webhooks | length) == 2 and
	  all(.webhooks[]; .sideEffects == "None" and .admissionReviewVersions == ["v1"] and
	      .timeoutSeconds == 7 and .matchPolicy == "Equivalent" and .clientConfig.url == $url and
	      (.clientConfig.caBundle | length) > 0 and
	      (.namespaceSelector.matchExpressions[] | select(.key == "kubernetes.io/metadata.name") |
	        .operator == "NotIn" and (.values | index("kube-system") != null and index("gpu-memory-guard") != null))) and
	  (.webhooks[0] | .name == "pods.gpu-memory-guard.io" and .failurePolicy == "Fail" and
	      .rules[0].resources == ["pods"] and .rules[0].operations == ["CREATE"] and
	      (.matchConditions | length) == 2) and
	  (.webhooks[1] | .name == "bindings.gpu-memory-guard.io" and .failurePolicy == $bp and
	      .rules[0].resources == ["pods/binding", "bindings"] and (.matchConditions // [] | length) == 0)' >/dev/null
}

# The registered timeoutSeconds follows apiTimeout (3 x apiTimeout rounded up, plus 1) in both
# webhooks, and the Deployment passes the same number as --webhook-timeout (issue 24).
timeout_rendered() { # API_TIMEOUT WANT_SECONDS [MORE_HELM_ARGS...]
	local api=$1 want=$2
	shift 2
	helm_template --set "apiTimeout=$api" "$@" | kc apply --dry-run=server -o json -f - 2>/dev/null |
		jq -e --argjson t "$want" --arg arg "--webhook-timeout=${want}s" '
		  ([.items[] | select(.kind == "ValidatingWebhookConfiguration") | .webhooks[].timeoutSeconds] == [$t, $t]) and
		  ([.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args | index($arg)] | .[0] != null)' >/dev/null
}
# A registered timeout shorter than the review's deadline, or a deadline over the API server's
# 30 s maximum, is refused at render time, saying why.
timeout_refused() { # WHAT_THE_ERROR_SAYS HELM_ARGS...
	local want=$1 out
	shift
	if out=$(helm_template "$@" 2>&1); then
		echo "rendered: $*"
		return 1
	fi
	[[ $out == *"$want"* ]] || { echo "$out"; return 1; }
}

# Every `serve` flag is reachable from the chart (issue 24): each named value renders its flag,
# extraArgs are appended as given, and the server accepts the Deployment. Unset, none renders
# (same_objects compares the default render with manifests/).
SERVE_VALUES=(--set policies=off --set cache=watch --set cacheMaxStaleness=10s
	--set reservationGrace=7s --set unseenReservationTTL=31s --set threads=3 --set workers=12 --set connectionTimeout=20s
	--set tlsReloadInterval=5s --set certExpiryWarning=0 --set drainTimeout=4s
	--set shutdownTimeout=8s --set 'extraArgs={--scheduler-listen=:8081,--kubeconfig=/k/config}')
serve_flags_rendered() {
	helm_template "${SERVE_VALUES[@]}" | kc apply --dry-run=server -o json -f - 2>/dev/null |
		jq -e '[.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args][0] as $a |
		  ["--policies=off", "--cache=watch", "--cache-max-staleness=10s", "--reservation-grace=7s",
		   "--unseen-reservation-ttl=31s",
		   "--threads=3", "--workers=12", "--connection-timeout=20s", "--tls-reload-interval=5s",
		   "--cert-expiry-warning=0", "--drain-timeout=4s", "--shutdown-timeout=8s"] as $want |
		  all($want[]; . as $f | $a | index($f) != null) and
		  $a[-2:] == ["--scheduler-listen=:8081", "--kubeconfig=/k/config"]' >/dev/null
}
# Every flag of `serve --help` is either passed by the chart's Deployment template or reachable
# through a named value above or extraArgs (--kubeconfig, --scheduler-listen): the list below
# is the help's, so a new flag fails this until it is placed.
serve_flags_all_placed() {
	local flags f missing=""
	flags=$("$BINARY" --help | grep -oE '^  --[a-z-]+' | sed 's/^  //' | sort -u)
	for f in $flags; do
		case $f in
		--help | --kubeconfig | --scheduler-listen) continue ;; # extraArgs
		esac
		grep -q -- "- $f=" "$CHART/templates/deployment.yaml" || missing="$missing $f"
	done
	[ -z "$missing" ] || { echo "serve flags the chart cannot pass:$missing"; return 1; }
}

# The NetworkPolicy (issue 20): the webhook port from the control plane's CIDRs, the chart's
# scheduler pods and webhookFrom; the health port from the monitoring namespace; only Ingress.
netpol_rendered() {
	helm_template --set networkPolicy.enabled=true --set 'networkPolicy.controlPlaneCIDRs={10.0.0.0/16,192.168.1.0/24}' \
		--set scheduler.enabled=true --set 'networkPolicy.webhookFrom[0].podSelector.matchLabels.app=konnectivity-agent' |
		kc apply --dry-run=server -o json -f - 2>/dev/null | jq -e '
		  [.items[] | select(.kind == "NetworkPolicy")] as $p | ($p | length) == 1 and ($p[0].spec |
		    .policyTypes == ["Ingress"] and
		    .podSelector.matchLabels == {"app.kubernetes.io/name": "gpu-memory-guard", "app.kubernetes.io/instance": "gpu-memory-guard"} and
		    .ingress[0].ports == [{protocol: "TCP", port: 8443}] and
		    .ingress[0].from == [{ipBlock: {cidr: "10.0.0.0/16"}}, {ipBlock: {cidr: "192.168.1.0/24"}},
		      {podSelector: {matchLabels: {"app.kubernetes.io/name": "gpu-memory-guard-scheduler", "app.kubernetes.io/instance": "gpu-memory-guard"}}},
		      {podSelector: {matchLabels: {app: "konnectivity-agent"}}}] and
		    .ingress[1].ports == [{protocol: "TCP", port: 8080}] and
		    .ingress[1].from == [{namespaceSelector: {matchLabels: {"kubernetes.io/metadata.name": "monitoring"}}}])' >/dev/null
}
# The scheduler's client certificate: a Secret under the render's CA (clientAuth EKU), mounted
# at the path the configuration names; the webhook requires it on the extender routes.
sched_client_rendered() {
	local out
	out=$(helm_template --set scheduler.enabled=true | kc apply --dry-run=server -o json -f -) || return 1
	jq -r '.items[] | select(.kind == "Secret" and .metadata.name == "gpu-memory-guard-scheduler-client") | .data["tls.crt"]' <<<"$out" |
		base64 -d >"$WORK/sched-client-render.crt" || return 1
	jq -r '.items[] | select(.kind == "Secret" and .metadata.name == "gpu-memory-guard-ca") | .data["tls.crt"]' <<<"$out" |
		base64 -d >"$WORK/sched-client-render-ca.crt" || return 1
	openssl verify -purpose sslclient -CAfile "$WORK/sched-client-render-ca.crt" "$WORK/sched-client-render.crt" >/dev/null || return 1
	openssl x509 -noout -subject -in "$WORK/sched-client-render.crt" | grep -q 'CN *= *gpu-memory-guard-scheduler$' || return 1
	jq -e '[.items[] | select(.kind == "Deployment")] as $d |
	  ($d[] | select(.metadata.name == "gpu-memory-guard-scheduler") | .spec.template.spec |
	    (.volumes[] | select(.name == "client") | .secret.secretName) == "gpu-memory-guard-scheduler-client" and
	    (.containers[0].volumeMounts[] | select(.name == "client") | .mountPath) == "/etc/gpu-memory-guard/client") and
	  ($d[] | select(.metadata.name == "gpu-memory-guard") | .spec.template.spec.containers[0].args |
	    index("--client-auth-routes=extender") != null and index("--client-allowed-names=gpu-memory-guard-scheduler") != null)' \
		<<<"$out" >/dev/null
}
pass_nodes_rendered() {
	helm_template --set scheduler.extender.passNodes=3 | grep -q -- '- --scheduler-pass-nodes=3$' &&
		! helm_template | grep -q -- '--scheduler-pass-nodes'
}
client_admission_rendered() {
	helm_template --set scheduler.enabled=true --set clientAuth.admission=true --set 'clientAuth.allowedNames={kube-apiserver}' |
		kc apply --dry-run=server -o json -f - 2>/dev/null | jq -e '.items[] | select(.kind == "Deployment" and .metadata.name == "gpu-memory-guard") |
		  .spec.template.spec.containers[0].args | index("--client-auth-routes=admission,extender") != null and
		  index("--client-allowed-names=gpu-memory-guard-scheduler,kube-apiserver") != null' >/dev/null
}

# webhook.bindings.failurePolicy is configurable: the rendered and server-accepted value.
bindings_policy_rendered() { # POLICY
	helm_template --set "webhook.bindings.failurePolicy=$1" | kc apply --dry-run=server -o json -f - 2>/dev/null |
		jq -e --arg p "$1" '.items[] | select(.kind == "ValidatingWebhookConfiguration") |
		  .webhooks[1].failurePolicy == $p and .webhooks[0].failurePolicy == "Fail"' >/dev/null
}
webhook_pods() { [ "$(kc -n "$NS" get pods -l app.kubernetes.io/name=gpu-memory-guard -o name | wc -l)" -ge "$1" ]; }
pod_bound_in() { [ -n "$(kc -n "$1" get pod "$2" -o jsonpath='{.spec.nodeName}')" ]; }
# A pod that meets Pod Security "restricted", asks for no GPU and sets no nodeName.
create_plain_pod() { # NAMESPACE NAME
	jq -n --arg ns "$1" --arg name "$2" '{apiVersion: "v1", kind: "Pod",
	  metadata: {name: $name, namespace: $ns},
	  spec: {securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: "RuntimeDefault"}},
	         containers: [{name: "main", image: "registry.k8s.io/pause:3.10",
	           securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: ["ALL"]}}}]}}' |
		kc create -f -
}
binding_call_failed() {
	local out
	out=$(kc -n "$TEST_NS" get events --field-selector "involvedObject.name=$1,reason=FailedScheduling" -o jsonpath='{..message}')
	[[ $out == *'failed calling webhook "bindings.gpu-memory-guard.io"'* ]]
}

# The chart (default values, release gpu-memory-guard) and manifests/ must render the same
# objects, as the API server normalizes them (server-side dry run, defaults applied): webhooks
# without clientConfig, ClusterRole rules, the Lease Role and its binding, the pod spec (args
# included) without image and label selectors, Service ports, PDB, the CRD's spec (helm template
# leaves crds/ out unless --include-crds). Labels and the image tag may differ.
normalized() { # jq filter for one object, by kind
	jq -S '(.items // [.])[] | select(.kind != "Secret" and .kind != "Namespace") |
	if .kind == "ValidatingWebhookConfiguration" then {kind, w: (.webhooks | map(del(.clientConfig)))}
	elif .kind == "ClusterRole" then {kind, r: .rules}
	elif .kind == "CustomResourceDefinition" then {kind, n: .metadata.name, s: .spec}
	elif .kind == "ClusterRoleBinding" then {kind, r: .roleRef, s: .subjects}
	elif .kind == "Role" then {kind, n: .metadata.name, ns: .metadata.namespace, r: .rules}
	elif .kind == "RoleBinding" then {kind, n: .metadata.name, ns: .metadata.namespace, r: .roleRef, s: .subjects}
	elif .kind == "ServiceAccount" then {kind, a: .automountServiceAccountToken}
	elif .kind == "Deployment" then {kind, r: .spec.replicas, st: .spec.strategy,
	  p: (.spec.template.spec | del(.containers[].image) | del(.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[].podAffinityTerm.labelSelector))}
	elif .kind == "Service" then {kind, p: .spec.ports, t: .spec.type}
	elif .kind == "PodDisruptionBudget" then {kind, m: .spec.minAvailable}
	else {kind} end' | jq -s -S 'sort_by(.kind)'
}
same_objects() {
	helm_template --include-crds >"$WORK/chart.yaml" &&
		kc apply --dry-run=server -o json -f "$WORK/chart.yaml" | normalized >"$WORK/chart.norm.json" &&
		kc apply --dry-run=server -o json -f "$MANIFESTS" | normalized >"$WORK/manifests.norm.json" &&
		diff -u "$WORK/manifests.norm.json" "$WORK/chart.norm.json" || return 1
	jq -e '[.[] | .kind] | index("CustomResourceDefinition") != null' "$WORK/chart.norm.json" >/dev/null ||
		{ echo "no CustomResourceDefinition in the renders"; return 1; }
}

CRD_NAME=gpumemorypolicies.gpu-memory-guard.io
# The chart ships the CRD in crds/ (Helm installs that folder before templates and never
# upgrades nor deletes it), manifests/ as a resource: one file, two copies.
crd_copies_identical() {
	cmp "$CHART/crds/gpumemorypolicy.yaml" "$MANIFESTS/crd-gpumemorypolicy.yaml"
}
crd_established() {
	[ "$(kc get crd "$CRD_NAME" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>&1)" = True ]
}
crd_absent() { ! kc get crd "$CRD_NAME" >/dev/null 2>&1; }
# The stored CRD is the chart's file (as a server dry run of that file normalizes it).
crd_is_charts() {
	kc apply --dry-run=server -o json -f "$CHART/crds/gpumemorypolicy.yaml" | jq -S .spec >"$WORK/crd.want.json" &&
		kc get crd "$CRD_NAME" -o json | jq -S .spec >"$WORK/crd.got.json" &&
		diff -u "$WORK/crd.want.json" "$WORK/crd.got.json"
}

# The placement checks every install path must pass. $1 = label.
placement_checks() {
	local label=$1 out
	kc create namespace "$TEST_NS" >/dev/null 2>&1 || true
	# pod CREATE with nodeName: 20Gi fits on an 80 GB H100 (90% = 71.7Gi), then 60Gi more does not.
	check "$label: pod with nodeName within budget admitted" create_pod "$label-fits-0" 20Gi gpu-h100-a
	out=$(gpu_pod "$label-over-0" 60Gi gpu-h100-a | kc create -f - 2>&1)
	if echo "$out" | grep -q "$DENIED_POD" && echo "$out" | grep -q 'gpu-h100-a'; then
		pass "$label: pod with nodeName over budget refused with the message"
		printf '     %s\n' "$(echo "$out" | cut -c1-240)"
	else
		fail "$label: pod with nodeName over budget refused with the message" "$out"
	fi
	# The scheduler's binding: 40Gi binds to gpu-h100-b, then 60Gi more is refused at binding.
	create_pod "$label-bind-fits" 40Gi "" gpu-h100-b >/dev/null
	if wait_for 30 "$label-bind-fits bound" pod_bound "$label-bind-fits"; then
		pass "$label: binding within budget admitted (scheduled to gpu-h100-b)"
	else
		fail "$label: binding within budget admitted" "$(kc -n "$TEST_NS" get events --field-selector "involvedObject.name=$label-bind-fits" -o jsonpath='{..message}')"
	fi
	create_pod "$label-bind-over" 60Gi "" gpu-h100-b >/dev/null
	if wait_for 45 "a FailedScheduling event with the denial" binding_denied "$label-bind-over"; then
		out=$(kc -n "$TEST_NS" get pod "$label-bind-over" -o jsonpath='{.spec.nodeName}')
		if [ -z "$out" ]; then
			pass "$label: binding over budget refused (FailedScheduling names the webhook)"
		else
			fail "$label: binding over budget refused" "pod was bound to $out"
		fi
	else
		fail "$label: binding over budget refused" "$(kc -n "$TEST_NS" get events --field-selector "involvedObject.name=$label-bind-over" -o jsonpath='{..message}')"
	fi
	check "$label: legacy POST .../bindings over budget refused too" legacy_binding_refused "$label" gpu-h100-b
}

# POST /api/v1/namespaces/NS/bindings (the legacy top-level resource) for a pod no scheduler
# handles: the webhook configuration must cover it too, or it is a way around the check.
legacy_binding_refused() { # LABEL NODE
	local out pod="$1-legacy"
	gpu_pod "$pod" 60Gi | jq '.spec.schedulerName = "none"' | kc create -f - >/dev/null || return 1
	out=$(printf 'apiVersion: v1\nkind: Binding\nmetadata: {name: %s, namespace: %s}\ntarget: {apiVersion: v1, kind: Node, name: %s}\n' \
		"$pod" "$TEST_NS" "$2" | kc create -f - 2>&1)
	[[ $out == *'admission webhook "bindings.gpu-memory-guard.io" denied the request'* ]] ||
		{ echo "$out"; return 1; }
}

cleanup_test_pods() {
	kc -n "$TEST_NS" delete pods --all --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
	wait_for 30 "test pods gone" no_pods "$TEST_NS" || true
}

# The API server must refuse what the ClusterRole does not grant, and grant what it does.
rbac_checks() { # LABEL
	local label=$1 code
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$STATE/pki/ca.crt" \
		-H "Authorization: Bearer $(cat "$WORK/token")" "$(apiserver_url)/api/v1/secrets")
	if [ "$code" = 403 ]; then pass "$label: list secrets with the ServiceAccount token refused (403)"; else fail "$label: list secrets refused" "HTTP $code"; fi
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$STATE/pki/ca.crt" \
		-H "Authorization: Bearer $(cat "$WORK/token")" -X DELETE "$(apiserver_url)/api/v1/namespaces/$TEST_NS/pods/$label-fits-0")
	if [ "$code" = 403 ]; then pass "$label: delete pod with the ServiceAccount token refused (403)"; else fail "$label: delete pod refused" "HTTP $code"; fi
	code=$(kc auth can-i watch nodes --as "system:serviceaccount:$NS:$SA" 2>/dev/null)
	if [ "$code" = yes ]; then pass "$label: ServiceAccount may watch nodes"; else fail "$label: ServiceAccount may watch nodes" "$code"; fi
	# DRA (issue 21): read ResourceSlices and ResourceClaims, write neither.
	local r v got dra_bad=""
	for r in resourceslices.resource.k8s.io resourceclaims.resource.k8s.io; do
		for v in get list watch create update delete; do
			got=$(kc auth can-i "$v" "$r" --all-namespaces --as "system:serviceaccount:$NS:$SA" 2>/dev/null)
			case $v in get | list | watch) [ "$got" = yes ] || dra_bad="$dra_bad $v $r: $got;" ;; *) [ "$got" = no ] || dra_bad="$dra_bad $v $r: $got;" ;; esac
		done
	done
	if [ -z "$dra_bad" ]; then pass "$label: ServiceAccount may get, list, watch resourceslices and resourceclaims and write neither (can-i)"; else fail "$label: DRA RBAC" "$dra_bad"; fi
	policy_rbac_checks "$label"
}

# GPUMemoryPolicy objects: get, list, watch; no write of the spec; the status subresource: patch
# and update only (the status writer, ClusterRole gpu-memory-guard-policy-status).
policy_rbac_checks() { # LABEL
	local label=$1 v sub got want bad="" code
	for sub in "" status; do
		for v in get list watch create update patch delete deletecollection; do
			want=no
			case "$sub:$v" in :get | :list | :watch | status:patch | status:update) want=yes ;; esac
			got=$(kc auth can-i "$v" "$CRD_NAME" --subresource="$sub" --as "system:serviceaccount:$NS:$SA" 2>/dev/null)
			[ "$got" = "$want" ] || bad="$bad $v${sub:+ $sub}:$got(want $want)"
		done
	done
	if [ -z "$bad" ]; then
		pass "$label: ServiceAccount may get, list, watch gpumemorypolicies and write none, and patch or update only their status (can-i)"
	else
		fail "$label: ServiceAccount may get, list, watch gpumemorypolicies and write none, and patch or update only their status (can-i)" "$bad"
	fi
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$STATE/pki/ca.crt" \
		-H "Authorization: Bearer $(cat "$WORK/token")" "$(apiserver_url)/apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies")
	if [ "$code" = 200 ]; then pass "$label: list gpumemorypolicies with the ServiceAccount token (200)"; else fail "$label: list gpumemorypolicies with the ServiceAccount token" "HTTP $code"; fi
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$STATE/pki/ca.crt" \
		-H "Authorization: Bearer $(cat "$WORK/token")" -H 'Content-Type: application/json' -X POST \
		--data '{"apiVersion":"gpu-memory-guard.io/v1alpha1","kind":"GPUMemoryPolicy","metadata":{"name":"gmg-proof"},"spec":{}}' \
		"$(apiserver_url)/apis/gpu-memory-guard.io/v1alpha1/gpumemorypolicies")
	if [ "$code" = 403 ]; then pass "$label: creating a GPUMemoryPolicy with the ServiceAccount token refused (403)"; else fail "$label: creating a GPUMemoryPolicy refused" "HTTP $code"; fi
}

# The stored Deployment passes shared reservations in the webhook's own namespace.
deploy_shared_reservations() { # DEPLOYMENT_JSON
	jq -e --arg ns "$NS" '.spec.template.spec.containers[0].args as $a |
	  ($a | index("--reservations=shared")) != null and
	  ($a | index("--reservations-namespace=" + $ns)) != null' "$1" >/dev/null ||
		{ jq -c '.spec.template.spec.containers[0].args' "$1"; return 1; }
}

sa_can() { # VERB NAMESPACE|--all-namespaces: kubectl auth can-i on Leases as the ServiceAccount
	local where=(-n "$2")
	[ "$2" != --all-namespaces ] || where=(--all-namespaces)
	kc auth can-i "$1" leases.coordination.k8s.io "${where[@]}" --as "system:serviceaccount:$NS:$SA" 2>/dev/null
}

# A Lease write with the ServiceAccount's token: prints the HTTP status. METHOD NAMESPACE NAME.
sa_lease_write() {
	local url
	url="$(apiserver_url)/apis/coordination.k8s.io/v1/namespaces/$2/leases"
	[ "$1" = POST ] || url="$url/$3"
	curl -s -o "$WORK/lease-write.out" -w '%{http_code}' --max-time 5 --cacert "$STATE/pki/ca.crt" \
		-H "Authorization: Bearer $(cat "$WORK/token")" -H 'Content-Type: application/json' -X "$1" \
		--data "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"$3\",\"namespace\":\"$2\"}}" \
		"$url"
}

# Leases: exactly get, create, update in the webhook's namespace; nothing elsewhere.
lease_rbac_checks() { # LABEL
	local label=$1 v ns got want bad="" code
	for v in get create update list watch delete patch deletecollection; do
		case $v in get | create | update) want=yes ;; *) want=no ;; esac
		got=$(sa_can "$v" "$NS")
		[ "$got" = "$want" ] || bad="$bad $v:$got(want $want)"
	done
	if [ -z "$bad" ]; then
		pass "$label: ServiceAccount may get, create, update Leases in $NS and nothing more (can-i)"
	else
		fail "$label: ServiceAccount may get, create, update Leases in $NS and nothing more (can-i)" "$bad"
	fi
	bad=""
	for ns in kube-system default "$TEST_NS" --all-namespaces; do
		for v in get create update; do
			got=$(sa_can "$v" "$ns")
			[ "$got" = no ] || bad="$bad $v@$ns:$got"
		done
	done
	if [ -z "$bad" ]; then
		pass "$label: ServiceAccount may not get, create or update Leases in kube-system, default, $TEST_NS nor cluster-wide (can-i)"
	else
		fail "$label: ServiceAccount may not touch Leases outside $NS (can-i)" "$bad"
	fi
	code=$(sa_lease_write POST kube-system "gmg-proof-$label")
	if [ "$code" = 403 ]; then
		pass "$label: creating a Lease in kube-system with the ServiceAccount token refused (403)"
	else
		fail "$label: creating a Lease in kube-system refused" "HTTP $code $(head -c 300 "$WORK/lease-write.out")"
	fi
	code=$(sa_lease_write PUT default "gmg-proof-$label")
	if [ "$code" = 403 ]; then
		pass "$label: updating a Lease in default with the ServiceAccount token refused (403)"
	else
		fail "$label: updating a Lease in default refused" "HTTP $code $(head -c 300 "$WORK/lease-write.out")"
	fi
}

# The admitted pod is in the record of its node: Lease NODE in the webhook's namespace, label
# managed-by, annotation gpu-memory-guard.io/reservations holding an entry with the pod's
# namespace/name, its uid as stored, its declared bytes, and an expiry of the admission time
# plus TTL_MS: between creationTimestamp (whole seconds) + TTL and creationTimestamp + TTL +
# MAX_DELAY_MS (the admission's lag behind the CREATE: about a second for pod CREATE, the
# scheduling delay for a binding). A Binding's TTL is --reservation-ttl (60s, the default both
# install paths pass); a pod CREATE's --unseen-reservation-ttl (35s, the binary's default: the
# pod may never be stored), its entry marked "unseen" (issue 20).
lease_holds() { # NODE POD BYTES MAX_DELAY_MS TTL_MS UNSEEN(true|false)
	local uid created lease ttl=$5 unseen=$6
	uid=$(kc -n "$TEST_NS" get pod "$2" -o jsonpath='{.metadata.uid}') && [ -n "$uid" ] || return 1
	created=$(kc -n "$TEST_NS" get pod "$2" -o jsonpath='{.metadata.creationTimestamp}') || return 1
	created=$(($(date -d "$created" +%s) * 1000))
	lease=$(kc -n "$NS" get lease "$1" -o json) || return 1
	jq -e --arg pod "$TEST_NS/$2" --arg uid "$uid" --argjson bytes "$3" --argjson unseen "$unseen" \
		--argjson lo $((created + ttl)) --argjson hi $((created + ttl + $4)) '
	  .metadata.labels["app.kubernetes.io/managed-by"] == "gpu-memory-guard" and
	  (.metadata.annotations["gpu-memory-guard.io/reservations"] | fromjson |
	    any(.[]; .pod == $pod and .uid == $uid and .bytes == $bytes and
	        .expires >= $lo and .expires <= $hi and (.unseen // false) == $unseen))' \
		<<<"$lease" >/dev/null || { jq -c '{name: .metadata.name, labels: .metadata.labels, annotations: .metadata.annotations}' <<<"$lease"; return 1; }
}

# Every entry of every record in the webhook's namespace has expired (the helm path's pods are
# deleted: a record cannot tell a deleted pod from one not yet visible, so their entries count
# until their expiry, admission + TTL).
records_expired() {
	kc -n "$NS" get leases -o json | jq -e --argjson now "$(date +%s%3N)" '
	  all(.items[]; .metadata.annotations["gpu-memory-guard.io/reservations"] // "[]" | fromjson |
	    all(.[]; .expires < $now))' >/dev/null
}

# No record in the webhook's namespace names a pod of the given prefix (expired entries are
# pruned by the next write on their node).
records_without() { # POD_PREFIX
	local out
	out=$(kc -n "$NS" get leases -o json | jq -c --arg p "$TEST_NS/$1" '[.items[] |
	  {n: .metadata.name, e: (.metadata.annotations["gpu-memory-guard.io/reservations"] // "[]" | fromjson |
	    map(select(.pod | startswith($p))))} | select(.e != [])]') || return 1
	[ "$out" = "[]" ] || { echo "$out"; return 1; }
}

lease_record_checks() { # LABEL
	local label=$1
	check "$label: Lease gpu-h100-a in $NS holds the pod admitted by CREATE (uid, 20Gi, unseen, expiring at CREATE + 35 s)" \
		lease_holds gpu-h100-a "$label-fits-0" $((20 * 1024 * 1024 * 1024)) 3000 35000 true
	check "$label: Lease gpu-h100-b in $NS holds the pod admitted at binding (uid, 40Gi, expiring at binding + 60 s)" \
		lease_holds gpu-h100-b "$label-bind-fits" $((40 * 1024 * 1024 * 1024)) 45000 60000 false
}

# Rotation: new serving pair into the volume folder; the running webhook must serve it, and
# the API server (same CA) must still reach it.
rotation_check() { # LABEL TLS_DIR NEW_CRT NEW_KEY
	local label=$1 before after want
	before=$(served_fingerprint)
	want=$(openssl x509 -in "$3" -noout -fingerprint -sha256)
	volume_update "$2" "$3" "$4"
	if wait_for 45 "the rotated certificate served" serves "$want"; then
		after=$(served_fingerprint)
		if [ "$before" != "$after" ] && kill -0 "$HOST_PID" 2>/dev/null; then
			pass "$label: rotated serving certificate served without restart (pid $HOST_PID)"
		else
			fail "$label: rotated serving certificate served without restart" "before=$before after=$after"
		fi
	else
		fail "$label: rotated serving certificate served without restart" "served: $(served_fingerprint), want $want"
	fi
	check "$label: API server still reaches the webhook after rotation" wait_for 20 "denial after rotation" in_effect
	check "$label: expiry metric equals the served certificate's NotAfter" wait_for 10 "expiry metric" expiry_metric_is "$3"
}

# gpu_memory_guard_certificate_expiry_timestamp_seconds on /metrics = NotAfter of CRT.
expiry_metric_is() { # CRT
	local want got
	want=$(date -d "$(openssl x509 -in "$1" -noout -enddate | cut -d= -f2)" +%s) || return 1
	got=$(curl -sf --max-time 2 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/metrics" |
		awk '$1 == "gpu_memory_guard_certificate_expiry_timestamp_seconds" {printf "%d", $2}')
	[ -n "$got" ] && [ "$got" = "$want" ]
}

# The placements above needed pods get/list and nodes get; none may have been refused.
no_403_logged() {
	if grep -qiE '"(status|code)": ?403|forbidden' "$STATE/logs/host-webhook.log"; then
		fail "$1: the webhook's API calls were never refused (log has no 403)" \
			"$(grep -m3 -iE '403|forbidden' "$STATE/logs/host-webhook.log")"
	else
		pass "$1: the webhook's API calls were never refused (log has no 403)"
	fi
}

# --- the second scheduler (scheduler.enabled, issue 9) ----------------------------------------

SCHED=gpu-memory-guard-scheduler # its Deployment, ServiceAccount, ConfigMap and Lease
SCHED_NAME=gpu-memory-guard      # the profile's schedulerName
SCHED_PIDS=()

# yaml_json FILE: the YAML document in FILE as JSON, parsed by helm's own YAML library (fromYaml,
# sigs.k8s.io/yaml, as kube-scheduler reads it); no YAML tool is needed on the machine.
yaml_json() {
	local chart="$WORK/yaml-json" out
	if [ ! -d "$chart" ]; then
		mkdir -p "$chart/templates"
		printf 'apiVersion: v2\nname: yaml-json\nversion: 0.1.0\n' >"$chart/Chart.yaml"
		printf '%s\n' '{{ .Values.yaml | fromYaml | toJson }}' >"$chart/templates/out.json"
	fi
	out=$(helm_ template y "$chart" --set-file "yaml=$1" | grep -vE '^(---|#)') || return 1
	jq -e 'has("Error") | not' <<<"$out" >/dev/null || { echo "$out"; return 1; }
	echo "$out"
}

# The chart's KubeSchedulerConfiguration (JSON on stdout) from a ConfigMap as JSON on stdin.
sched_config_of() {
	jq -r '.data["config.yaml"]' >"$WORK/sched-config.yaml" && yaml_json "$WORK/sched-config.yaml"
}

# The rendered configuration carries every designed extender setting. CONFIG_JSON URL CA_B64.
# Field names are kube-scheduler config/v1's (k8s.io/kube-scheduler@v0.33 config/v1/types.go).
sched_config_ok() { # CONFIG_JSON URL CA_B64 [noclient: no client certificate configured]
	local tls='{caData: $ca, certFile: "/etc/gpu-memory-guard/client/tls.crt", keyFile: "/etc/gpu-memory-guard/client/tls.key"}'
	[ "${4:-}" = noclient ] && tls='{caData: $ca}'
	jq -e --arg url "$2" --arg ca "$3" --arg ns "$NS" --arg lease "$SCHED" --arg name "$SCHED_NAME" '
	  .apiVersion == "kubescheduler.config.k8s.io/v1" and .kind == "KubeSchedulerConfiguration" and
	  (has("clientConnection") | not) and
	  .leaderElection == {leaderElect: true, resourceLock: "leases", resourceName: $lease,
	    resourceNamespace: $ns, leaseDuration: "15s", renewDeadline: "10s", retryPeriod: "2s"} and
	  .profiles == [{schedulerName: $name}] and
	  .extenders == [{urlPrefix: $url, filterVerb: "filter", prioritizeVerb: "prioritize",
	    weight: 5, nodeCacheCapable: true,
	    managedResources: [{name: "nvidia.com/gpu", ignoredByScheduler: false}],
	    ignorable: false, httpTimeout: "6s", enableHTTPS: true, tlsConfig: '"$tls"'}]' \
		<<<"$1" >/dev/null || { jq -c . <<<"$1"; return 1; }
}

# helm template (scheduler.enabled, Service mode), accepted by a server-side dry run: the
# ConfigMap's extender points at the webhook Service over TLS and trusts the CA of the same
# render, which is also the webhook configuration's caBundle.
sched_template_ok() {
	local out cfg ca
	out=$(helm_template --set scheduler.enabled=true | kc apply --dry-run=server -o json -f -) || return 1
	ca=$(jq -r '.items[] | select(.kind == "Secret" and .metadata.name == "gpu-memory-guard-ca") | .data["tls.crt"]' <<<"$out")
	[ -n "$ca" ] && jq -e --arg ca "$ca" '.items[] | select(.kind == "ValidatingWebhookConfiguration") |
	  all(.webhooks[]; .clientConfig.caBundle == $ca)' <<<"$out" >/dev/null || { echo "CA mismatch"; return 1; }
	cfg=$(jq '.items[] | select(.kind == "ConfigMap" and .metadata.name == "'"$SCHED"'")' <<<"$out" | sched_config_of) || return 1
	sched_config_ok "$cfg" "https://$RELEASE.$NS.svc:443/scheduler" "$ca" || return 1
	jq -e '[.items[] | .kind] as $k | ["ServiceAccount", "ConfigMap", "ClusterRoleBinding", "RoleBinding",
	  "Role", "Deployment", "PodDisruptionBudget"] | all(. as $x | $k | index($x) != null)' <<<"$out" >/dev/null
}

# certManager: no CA at render time; the scheduler reads ca.crt (only that key) of the serving
# Secret. Rendered offline (the cert-manager CRDs are not installed here).
sched_cert_manager_ok() {
	local out
	out=$(helm_template --set scheduler.enabled=true --set certificate.mode=certManager) || return 1
	grep -q 'caFile: /etc/gpu-memory-guard/ca/ca.crt' <<<"$out" || { echo "no caFile"; return 1; }
	! grep -q 'caData:' <<<"$out" || { echo "caData rendered without a known CA"; return 1; }
	grep -A4 -- '- name: ca$' <<<"$out" | grep -q 'key: ca.crt' || { echo "ca.crt not mounted alone"; return 1; }
}

# The scheduler's Deployment as stored: 2 replicas of the upstream image at the cluster's
# version, its ServiceAccount, probes on its HTTPS port, restricted security context; the PDB.
sched_deploy_ok() {
	kc -n "$NS" get deploy "$SCHED" -o json | jq -e --arg img "registry.k8s.io/kube-scheduler:$KUBE_VERSION" --arg sa "$SCHED" '
	  .spec.replicas == 2 and .spec.template.spec.serviceAccountName == $sa and
	  (.spec.template.spec.containers[0] | .image == $img and .command[0] == "kube-scheduler" and
	    (.command | index("--config=/etc/kubernetes/scheduler/config.yaml")) != null and
	    .livenessProbe.httpGet.path == "/livez" and .livenessProbe.httpGet.scheme == "HTTPS" and
	    .readinessProbe.httpGet.path == "/readyz" and
	    .securityContext.readOnlyRootFilesystem == true and .securityContext.capabilities.drop == ["ALL"])' \
		>/dev/null || return 1
	kc -n "$NS" get pdb "$SCHED" -o jsonpath='{.spec.minAvailable}' | grep -qx 1
}

sched_pods() { [ "$(kc -n "$NS" get pods -l "app.kubernetes.io/name=$SCHED" -o name | wc -l)" -ge "$1" ]; }

# RBAC as kube-scheduler needs it, asked of the API server as the ServiceAccount.
sched_rbac_ok() {
	local as="system:serviceaccount:$NS:$SCHED" bad="" q got want
	while read -r want q; do
		# shellcheck disable=SC2086
		got=$(kc auth can-i $q --as "$as" 2>/dev/null)
		[ "$got" = "$want" ] || bad="$bad [$q: $got, want $want]"
	done <<EOT
yes create pods --subresource=binding -n $TEST_NS
yes watch nodes
yes list persistentvolumeclaims --all-namespaces
yes list storageclasses.storage.k8s.io
yes get configmaps/extension-apiserver-authentication -n kube-system
yes get leases.coordination.k8s.io/$SCHED -n $NS
yes update leases.coordination.k8s.io/$SCHED -n $NS
yes create leases.coordination.k8s.io -n $NS
no update leases.coordination.k8s.io/gpu-h100-a -n $NS
no get secrets -n $NS
no get configmaps -n $NS
EOT
	[ -z "$bad" ] || { echo "$bad"; return 1; }
}

sa_kubeconfig_for() { # SERVICEACCOUNT FILE
	local token
	token=$(kc create token "$1" -n "$NS" --duration=2h) || return 1
	cat >"$2" <<EOF2
apiVersion: v1
kind: Config
clusters:
- name: proof
  cluster:
    server: $(apiserver_url)
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $1
  user:
    token: $token
contexts:
- name: proof
  context: {cluster: proof, user: $1}
current-context: proof
EOF2
	chmod 600 "$2"
}

# The installed ConfigMap's configuration, with only clientConnection.kubeconfig added (in the
# pod that is the in-cluster ServiceAccount): written as JSON, which kube-scheduler reads too.
# The URL (webhook.url's host and port) and the CA (the release's) are the chart's, unchanged.
sched_host_config() { # KUBECONFIG OUT
	local cfg
	cfg=$(kc -n "$NS" get configmap "$SCHED" -o json | sched_config_of) || return 1
	jq --arg kc "$1" '.clientConnection = {kubeconfig: $kc}' <<<"$cfg" >"$2"
	# With a client certificate: the pod's mount of its Secret is a folder here, with the
	# Secret's own tls.crt and tls.key (what the kubelet would mount).
	if jq -e '.extenders[0].tlsConfig.certFile' "$2" >/dev/null; then
		mkdir -p "$WORK/sched-client"
		kc -n "$NS" get secret "$SCHED-client" -o jsonpath='{.data.tls\.crt}' | base64 -d >"$WORK/sched-client/tls.crt" &&
			kc -n "$NS" get secret "$SCHED-client" -o jsonpath='{.data.tls\.key}' | base64 -d >"$WORK/sched-client/tls.key" &&
			[ -s "$WORK/sched-client/tls.key" ] || { echo "no client Secret $SCHED-client"; return 1; }
		jq --arg d "$WORK/sched-client" '.extenders[0].tlsConfig.certFile = "\($d)/tls.crt" |
		  .extenders[0].tlsConfig.keyFile = "\($d)/tls.key"' "$2" >"$2.tmp" && mv "$2.tmp" "$2"
	fi
	# Only clientConnection (and the client certificate's paths) differ from the chart's.
	[ "$(jq -S 'del(.clientConnection) | del(.extenders[0].tlsConfig.certFile, .extenders[0].tlsConfig.keyFile)' "$2")" = \
		"$(jq -S 'del(.extenders[0].tlsConfig.certFile, .extenders[0].tlsConfig.keyFile)' <<<"$cfg")" ]
}

# start_host_scheduler N: the stored Deployment's command, with the config path, bind address
# and port of the host run, and the ServiceAccount kubeconfig for delegated authn/authz (the
# in-cluster config's stand-in). Logs to $STATE/logs/host-scheduler-N.log.
start_host_scheduler() {
	local n=$1 args port
	free_port port
	mapfile -t args < <(kc -n "$NS" get deploy "$SCHED" -o json | jq -r '.spec.template.spec.containers[0].command[1:][]' |
		grep -vE '^--(config|bind-address|secure-port)(=|$)')
	"$TOOLS_BIN/kube-scheduler" "${args[@]}" --config "$WORK/sched-config.json" \
		--bind-address 127.0.0.1 --secure-port "$port" \
		--authentication-kubeconfig "$WORK/sched-sa.kubeconfig" \
		--authorization-kubeconfig "$WORK/sched-sa.kubeconfig" \
		>"$STATE/logs/host-scheduler-$n.log" 2>&1 </dev/null &
	SCHED_PIDS[n]=$!
	echo "$port" >"$WORK/sched-port-$n"
	wait_for 60 "host scheduler $n /readyz" curl -skf --max-time 2 "https://127.0.0.1:$port/readyz" ||
		{ tail -n 5 "$STATE/logs/host-scheduler-$n.log"; return 1; }
}

stop_host_scheduler() { # N
	local pid=${SCHED_PIDS[$1]:-} i
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	SCHED_PIDS[$1]=""
}

lease_holder() { kc -n "$NS" get lease "$SCHED" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
leads() { # N: its log says it acquired the Lease and the Lease names it (hostname_uuid)
	log_lease_acquired "$STATE/logs/host-scheduler-$1.log" "$NS/$SCHED" && [ -n "$(lease_holder)" ]
}

# A webhook metric's value (0 when absent). SERIES as printed, labels included.
metric() {
	curl -sf --max-time 2 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/metrics" |
		awk -v s="$1" '$1 == s {v = $2} END {printf "%d", v + 0}'
}
F_JUDGED='gpu_memory_guard_extender_requests_total{verb="filter",result="judged"}'
P_JUDGED='gpu_memory_guard_extender_requests_total{verb="prioritize",result="judged"}'
F_OUT='gpu_memory_guard_extender_nodes_filtered_out_total'
B_DENIED='gpu_memory_guard_reviews_total{kind="binding",decision="denied"}'

# A GPU pod for the second scheduler, preferring NODE (weight 100) if given, as in issue 9's case.
sched_pod() { # NAME MEMORY [PREFERRED_NODE]
	gpu_pod "$1" "$2" | jq --arg s "$SCHED_NAME" --arg n "${3:-}" '.spec.schedulerName = $s |
	  if $n == "" then . else
	  .spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution = [{weight: 100,
	    preference: {matchExpressions: [{key: "kubernetes.io/hostname", operator: "In", values: [$n]}]}}] end' |
		kc create -f -
}
pod_node() { kc -n "$TEST_NS" get pod "$1" -o jsonpath='{.spec.nodeName}'; }
sched_events() { kc -n "$TEST_NS" get events --field-selector "involvedObject.name=$1,reason=FailedScheduling" -o jsonpath='{..message}'; }
event_has() { [[ $(sched_events "$1") == *"$2"* ]]; }

# Client authentication on the extender routes (issue 20): the stored Deployment requires it
# from the scheduler's name only, and the host webhook (run with those args) refuses a filter
# call without a certificate.
sched_client_auth_args() {
	kc -n "$NS" get deploy "$RELEASE" -o json | jq -e --arg n "$SCHED" '.spec.template.spec.containers[0].args as $a |
	  ($a | index("--client-ca-file=/etc/gpu-memory-guard/tls/ca.crt")) != null and
	  ($a | index("--client-auth-routes=extender")) != null and
	  ($a | index("--client-allowed-names=" + $n)) != null' >/dev/null
}
anonymous_filter_refused() {
	local code
	code=$(curl -s -o "$WORK/anon-filter.out" -w '%{http_code}' --max-time 5 --cacert "$WORK/helm-ca.crt" \
		-H 'Content-Type: application/json' -d '{"Pod":{"metadata":{"name":"x","namespace":"x","uid":"u"}},"NodeNames":["gpu-h100-a"]}' \
		"https://127.0.0.1:$WEBHOOK_PORT/scheduler/filter")
	[ "$code" = 403 ] && grep -q 'client certificate' "$WORK/anon-filter.out" || { echo "HTTP $code: $(cat "$WORK/anon-filter.out")"; return 1; }
}
CA_EXT='gpu_memory_guard_client_auth_failures_total{route="extender"}'

scheduler_checks() {
	local label=helm-sched out f0 o0 p0 b0 f1 o1 b1 holder
	check "scheduler: Deployment stored (2 replicas, kube-scheduler:$KUBE_VERSION from the cluster's version, probes, security context) and PDB minAvailable 1" sched_deploy_ok
	check "scheduler: both replicas created under Pod Security restricted" wait_for 60 "2 scheduler pods" sched_pods 2
	check "scheduler: RBAC as kube-scheduler needs it, no more (can-i as its ServiceAccount)" sched_rbac_ok
	check "scheduler: the webhook requires a client certificate on the extender routes, from $SCHED only (Deployment args)" sched_client_auth_args
	check "scheduler: a filter call without a client certificate is refused (403)" anonymous_filter_refused
	out=$(kc -n "$NS" get configmap "$SCHED" -o json | sched_config_of)
	check "scheduler: installed configuration as designed (extender at webhook.url's host, caData = the release's CA)" \
		sched_config_ok "$out" "https://127.0.0.1:$WEBHOOK_PORT/scheduler" "$(base64 -w0 "$WORK/helm-ca.crt")"
	check "scheduler: ServiceAccount token kubeconfig ($SCHED)" sa_kubeconfig_for "$SCHED" "$WORK/sched-sa.kubeconfig"
	check "scheduler: host configuration = the chart's + clientConnection.kubeconfig only" \
		sched_host_config "$WORK/sched-sa.kubeconfig" "$WORK/sched-config.json"
	if start_host_scheduler 1 >"$WORK/sched-start.out" 2>&1; then
		pass "scheduler: real kube-scheduler $KUBE_VERSION runs on the host with the chart's command and configuration (pid ${SCHED_PIDS[1]})"
	else
		fail "scheduler: real kube-scheduler runs on the host with the chart's configuration" "$(cat "$WORK/sched-start.out")"
	fi
	check "scheduler: it becomes leader (Lease $NS/$SCHED)" wait_for 45 "leader" leads 1
	holder=$(lease_holder)
	printf '     holderIdentity %s\n' "$holder"
	# Not through check(): SCHED_PIDS must be set in this shell.
	if start_host_scheduler 2 >"$WORK/sched-start.out" 2>&1; then
		pass "scheduler: a second replica starts (pid ${SCHED_PIDS[2]})"
	else
		fail "scheduler: a second replica starts" "$(cat "$WORK/sched-start.out")"
	fi
	sleep 5
	if log_lease_attempted "$STATE/logs/host-scheduler-2.log" "$NS/$SCHED" &&
		! log_lease_acquired "$STATE/logs/host-scheduler-2.log" "" && [ "$(lease_holder)" = "$holder" ]; then
		pass "scheduler: the second replica is standby while the first leads"
	else
		fail "scheduler: the second replica is standby while the first leads" "$(tail -n 3 "$STATE/logs/host-scheduler-2.log")"
	fi

	# Issue 9's case: gpu-h100-a memory-full for the pod (40Gi held, 50Gi more > 71.7Gi), preferred
	# by its node affinity; gpu-h100-b empty. The L4 and A100 (38.6Gi per GPU) never fit 50Gi.
	kc create namespace "$TEST_NS" >/dev/null 2>&1 || true
	check "$label: gpu-h100-a filled with 40Gi (pod with nodeName)" create_pod "$label-fill" 40Gi gpu-h100-a
	f0=$(metric "$F_JUDGED") o0=$(metric "$F_OUT") b0=$(metric "$B_DENIED") a0=$(metric "$CA_EXT")
	check "$label: 50Gi GPU pod with schedulerName $SCHED_NAME, preferring gpu-h100-a, created" \
		sched_pod "$label-fits" 50Gi gpu-h100-a
	if wait_for 45 "$label-fits bound" pod_bound "$label-fits" && [ "$(pod_node "$label-fits")" = gpu-h100-b ]; then
		pass "$label: bound to gpu-h100-b, where it fits, not the preferred memory-full gpu-h100-a"
	else
		fail "$label: bound to gpu-h100-b" "node '$(pod_node "$label-fits")'; events: $(sched_events "$label-fits")"
	fi
	f1=$(metric "$F_JUDGED") o1=$(metric "$F_OUT") b1=$(metric "$B_DENIED")
	# Its filter call was judged by a webhook that requires a client certificate there: the
	# scheduler presented the chart's, and none of its calls was refused for want of one.
	if [ $((f1 - f0)) -ge 1 ] && [ "$(metric "$CA_EXT")" = "$a0" ]; then
		pass "$label: the scheduler presents its client certificate (its filter call judged on the authenticated route, client_auth_failures_total{route=\"extender\"} still $a0)"
	else
		fail "$label: the scheduler presents its client certificate" "filter +$((f1 - f0)), client auth failures $a0 -> $(metric "$CA_EXT"); log: $(grep -i 'client' "$STATE/logs/host-scheduler-1.log" | tail -n 2)"
	fi
	# One feasible node left: kube-scheduler binds it without scoring (no prioritize call).
	if [ $((f1 - f0)) = 1 ] && [ $((o1 - o0)) = 3 ] && [ "$b1" = "$b0" ] && [ -z "$(sched_events "$label-fits")" ]; then
		pass "$label: on its first attempt: 1 filter call judged, 3 nodes filtered out (gpu-h100-a, A100, L4), no Binding denied, no FailedScheduling"
	else
		fail "$label: placed on its first attempt by the extender" \
			"filter +$((f1 - f0)), filtered out +$((o1 - o0)), binding denials $b0 -> $b1; events: $(sched_events "$label-fits")"
	fi
	# binpack: a 10Gi pod fits on all four GPU nodes; the extender scores the fullest highest
	# (gpu-h100-b 60/71.7Gi: 9, gpu-h100-a 50/71.7Gi: 7, L4: 5, A100: 1; x weight 5 x 10), which
	# outweighs the default plugins' small differences between these nodes.
	p0=$(metric "$P_JUDGED")
	check "$label: 10Gi GPU pod with schedulerName $SCHED_NAME (fits on 4 nodes, no preference) created" \
		sched_pod "$label-pack" 10Gi
	if wait_for 45 "$label-pack bound" pod_bound "$label-pack" && [ "$(pod_node "$label-pack")" = gpu-h100-b ] &&
		[ $(($(metric "$P_JUDGED") - p0)) = 1 ]; then
		pass "$label: binpack: 1 prioritize call judged, bound to the fullest node that fits (gpu-h100-b)"
	else
		fail "$label: binpack: bound to the fullest node that fits" \
			"node '$(pod_node "$label-pack")', prioritize $p0 -> $(metric "$P_JUDGED"); events: $(sched_events "$label-pack")"
	fi
	# Nowhere left for another 50Gi: Pending with the extender's reasons, no Binding tried.
	check "$label: second 50Gi pod (fits nowhere now) created" sched_pod "$label-none" 50Gi gpu-h100-a
	if wait_for 45 "the extender's reason in FailedScheduling" event_has "$label-none" "needs 50Gi" &&
		event_has "$label-none" "free of the 90 percent limit" && [ -z "$(pod_node "$label-none")" ] &&
		[ "$(metric "$B_DENIED")" = "$b0" ]; then
		pass "$label: fits nowhere: Pending, FailedScheduling carries the extender's reasons, no Binding denied"
		printf '     %s\n' "$(sched_events "$label-none" | cut -c1-300)"
	else
		fail "$label: fits nowhere: Pending with the extender's reasons" \
			"node '$(pod_node "$label-none")', binding denials $b0 -> $(metric "$B_DENIED"); events: $(sched_events "$label-none")"
	fi
	# Failover: the leader stops (kube-scheduler releases its Lease on SIGTERM); the standby takes
	# over and schedules a new GPU pod (binpack: gpu-h100-b, 70 of 71.7Gi, scores highest).
	# Not checked here: the Pending pod binding once room frees. kube-scheduler retries it on the
	# pod deletion it sees, which can reach it before the webhook's watch cache drops the pod;
	# the filter then still counts it, and with no later event the pod waits for kube-scheduler's
	# periodic flush of unschedulable pods (5 minutes). See docs/scheduler.md.
	stop_host_scheduler 1
	check "scheduler: after the leader stops, the standby becomes leader" wait_for 45 "standby leads" leads 2
	check "$label: 10Gi GPU pod for the new leader created" sched_pod "$label-after" 10Gi
	if wait_for 45 "$label-after bound" pod_bound "$label-after" && [ "$(pod_node "$label-after")" = gpu-h100-b ] &&
		[ "$(metric "$B_DENIED")" = "$b0" ] && [ -z "$(pod_node "$label-none")" ]; then
		pass "scheduler: the new leader binds a new GPU pod (gpu-h100-b, binpack; no Binding denied), the 50Gi one stays Pending"
	else
		fail "scheduler: the new leader binds a new GPU pod" \
			"node '$(pod_node "$label-after")'; events: $(sched_events "$label-after")"
	fi
	stop_host_scheduler 2
	# (The flag dump at start names --authorization-webhook-cache-unauthorized-ttl: not a denial.)
	if grep -hiE 'forbidden|unauthorized|is not allowed|cannot (get|list|watch|create|update|patch)|RBAC' \
		"$STATE"/logs/host-scheduler-*.log | grep -v 'FLAG: ' >"$WORK/sched-denials.txt"; then
		fail "scheduler: no RBAC denial in its logs" "$(head -n 3 "$WORK/sched-denials.txt" | cut -c1-300)"
	else
		pass "scheduler: no RBAC denial in its logs"
	fi
	cleanup_test_pods
}

# --- the second scheduler from the plain manifest manifests/scheduler/ (issue 9) -------------
# Run in the manifests path, with its webhook on the host (caBundle $BUNDLE, URL $URL):
# 1. kubectl apply --dry-run=server -k manifests/scheduler/ is accepted, and so is docs'
#    command (kustomize | sed caData from the webhook configuration's caBundle | apply);
# 2. its objects equal the chart's with scheduler.enabled=true (the same normalized() as
#    same_objects, plus names, the KubeSchedulerConfiguration but for caData, and the image);
# 3. applied for real (urlPrefix switched to the host webhook, as the manifests' overlay switches
#    clientConfig): both replicas admitted, RBAC (can-i), the real kube-scheduler runs with the
#    Deployment's command and the stored configuration, leads, and places issue 9's pod where it
#    fits on its first attempt; kubectl delete -k removes it.

SCHED_MANIFESTS="$REPO_ROOT/manifests/scheduler"

# docs/scheduler.md's plain-manifest command up to the apply; extra sed expressions after CA.
sched_manifest_filled() { # CA_B64 [SED_ARGS...]
	local ca=$1
	shift
	# The pinned image set to the control plane's version, as the Kustomization tells operators
	# (a no-op at build-tools.sh's default version; K8S_VERSION=v1.35.x runs need it).
	kc kustomize "$SCHED_MANIFESTS" | sed -e "s|caData: \"\"|caData: \"$ca\"|" \
		-e "s|image: registry.k8s.io/kube-scheduler:v[0-9.]*\$|image: registry.k8s.io/kube-scheduler:$KUBE_VERSION|" "$@"
}

# CA as docs/scheduler.md gets it: from the installed webhook configuration.
installed_ca() { kc get validatingwebhookconfiguration gpu-memory-guard -o jsonpath='{.webhooks[0].clientConfig.caBundle}'; }

# The documented pipe, server-side dry run: every object accepted, caData = the caBundle.
sched_manifest_pipeline() {
	local ca out cfg
	ca=$(installed_ca) && [ "$ca" = "$BUNDLE" ] || { echo "caBundle installed: ${ca:0:40}..."; return 1; }
	out=$(sched_manifest_filled "$ca" | kc apply --dry-run=server -o json -f -) || return 1
	[ "$(jq '.items | length' <<<"$out")" = 9 ] || { jq -c '[.items[] | .kind]' <<<"$out"; return 1; }
	cfg=$(jq '.items[] | select(.kind == "ConfigMap")' <<<"$out" | sched_config_of) || return 1
	sched_config_ok "$cfg" "https://$RELEASE.$NS.svc:443/scheduler" "$BUNDLE" noclient
}

# One object list (server-side dry-run JSON on stdin) in comparable form: normalized() (what
# same_objects compares), the kinds, names and namespaces, the configuration without caData,
# the pod template's image and whether every selector selects the pod template's labels.
sched_normalized() { # OUT_PREFIX
	local items
	items=$(cat)
	# normalized() keeps the input order within a kind; kustomize and helm order differently.
	normalized <<<"$items" | jq -S sort >"$1.norm.json" || return 1
	jq -S '[.items[] | {kind, n: .metadata.name, ns: .metadata.namespace}] | sort' <<<"$items" >"$1.names.json"
	jq '.items[] | select(.kind == "ConfigMap")' <<<"$items" | sched_config_of |
		jq -S 'del(.extenders[].tlsConfig.caData)' >"$1.config.json" || return 1
	jq -r '.items[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].image' <<<"$items" >"$1.image"
	jq -e '(.items[] | select(.kind == "Deployment")) as $d | $d.spec.template.metadata.labels as $l |
	  def sel: to_entries | all(.[]; $l[.key] == .value);
	  [$d.spec.selector.matchLabels,
	   ($d.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[] |
	     .podAffinityTerm.labelSelector.matchLabels),
	   (.items[] | select(.kind == "PodDisruptionBudget") | .spec.selector.matchLabels)] |
	  length == 3 and all(.[]; sel)' <<<"$items" >/dev/null ||
		{ echo "$1: a selector does not select the pod template's labels"; return 1; }
}

# The chart's scheduler objects (label component=scheduler) and the manifest's, as the API server
# normalizes them, must be the same; the manifest's image tag is the cluster version the chart
# derives (the one this proof runs).
sched_manifest_same_objects() {
	local f
	# manifests/scheduler/ presents no client certificate: the chart's with that off.
	helm_template --set scheduler.enabled=true --set scheduler.clientAuth.enabled=false >"$WORK/sched-chart.yaml" || return 1
	kc create --dry-run=client -o json -f "$WORK/sched-chart.yaml" |
		jq -s '{apiVersion: "v1", kind: "List",
		  items: [.[] | select(.metadata.labels["app.kubernetes.io/component"] == "scheduler")]}' |
		kc apply --dry-run=server -o json -f - | sched_normalized "$WORK/sched-chart" || return 1
	sched_manifest_filled "$BUNDLE" | kc apply --dry-run=server -o json -f - >"$WORK/sched-manifest.json" &&
		sched_normalized "$WORK/sched-manifest" <"$WORK/sched-manifest.json" || return 1
	for f in names.json norm.json config.json image; do
		diff -u "$WORK/sched-manifest.$f" "$WORK/sched-chart.$f" || return 1
	done
	[ "$(cat "$WORK/sched-manifest.image")" = "registry.k8s.io/kube-scheduler:$KUBE_VERSION" ]
}

# For real, the extender switched to URL (the host webhook; its certificate names 127.0.0.1), as
# the manifests' overlay switches the webhooks' clientConfig.
sched_manifest_apply() { # URL_PREFIX
	sched_manifest_filled "$(installed_ca)" \
		-e "s|urlPrefix: \"https://$RELEASE.$NS.svc:443/scheduler\"|urlPrefix: \"$1\"|" | kc apply -f -
}

sched_manifest_checks() {
	local label=manifests-sched host_url="https://127.0.0.1:$WEBHOOK_PORT/scheduler" f0 o0 b0 f1 o1 b1 n
	cleanup_test_pods
	check "kubectl apply --dry-run=server -k manifests/scheduler/ (caData empty) accepted" \
		kc apply --dry-run=server -k "$SCHED_MANIFESTS"
	check "docs' manifests/scheduler command (kustomize | sed caData = the installed caBundle | apply) accepted; configuration as designed" \
		sched_manifest_pipeline
	check "manifests/scheduler/ and the chart (scheduler.enabled) render the same objects (names, RBAC, pod spec, PDB, configuration but caData; image kube-scheduler:$KUBE_VERSION)" \
		sched_manifest_same_objects
	n=$(jq '.items | length' "$WORK/sched-manifest.json" 2>/dev/null)
	printf '     %s objects: %s\n' "${n:-?}" "$(jq -r '[.items[] | .kind] | join(", ")' "$WORK/sched-manifest.json" 2>/dev/null)"

	check "$label: kubectl apply of the filled manifest (urlPrefix switched to the host webhook)" \
		sched_manifest_apply "$host_url"
	check "$label: both replicas created under Pod Security restricted" wait_for 60 "2 scheduler pods" sched_pods 2
	check "$label: RBAC as kube-scheduler needs it, no more (can-i as its ServiceAccount)" sched_rbac_ok
	check "$label: stored configuration as designed (caData = the caBundle)" \
		sched_config_ok "$(kc -n "$NS" get configmap "$SCHED" -o json | sched_config_of)" "$host_url" "$BUNDLE" noclient
	check "$label: ServiceAccount token kubeconfig ($SCHED)" sa_kubeconfig_for "$SCHED" "$WORK/sched-sa.kubeconfig"
	check "$label: host configuration = the stored one + clientConnection.kubeconfig only" \
		sched_host_config "$WORK/sched-sa.kubeconfig" "$WORK/sched-config.json"
	# Not through check(): SCHED_PIDS must be set in this shell.
	if start_host_scheduler 3 >"$WORK/sched-start.out" 2>&1; then
		pass "$label: real kube-scheduler $KUBE_VERSION runs with the manifest's command and configuration (pid ${SCHED_PIDS[3]})"
	else
		fail "$label: real kube-scheduler runs with the manifest's configuration" "$(cat "$WORK/sched-start.out")"
	fi
	check "$label: it becomes leader (Lease $NS/$SCHED)" wait_for 45 "leader" leads 3
	# Issue 9's case, as in scheduler_checks.
	check "$label: gpu-h100-a filled with 40Gi (pod with nodeName)" create_pod "$label-fill" 40Gi gpu-h100-a
	f0=$(metric "$F_JUDGED") o0=$(metric "$F_OUT") b0=$(metric "$B_DENIED")
	check "$label: 50Gi GPU pod with schedulerName $SCHED_NAME, preferring gpu-h100-a, created" \
		sched_pod "$label-fits" 50Gi gpu-h100-a
	if wait_for 45 "$label-fits bound" pod_bound "$label-fits" && [ "$(pod_node "$label-fits")" = gpu-h100-b ]; then
		f1=$(metric "$F_JUDGED") o1=$(metric "$F_OUT") b1=$(metric "$B_DENIED")
		if [ $((f1 - f0)) = 1 ] && [ $((o1 - o0)) = 3 ] && [ "$b1" = "$b0" ] && [ -z "$(sched_events "$label-fits")" ]; then
			pass "$label: bound to gpu-h100-b on its first attempt (1 filter call judged, 3 nodes filtered out, no Binding denied, no FailedScheduling)"
		else
			fail "$label: bound on its first attempt" \
				"filter +$((f1 - f0)), filtered out +$((o1 - o0)), binding denials $b0 -> $b1; events: $(sched_events "$label-fits")"
		fi
	else
		fail "$label: bound to gpu-h100-b" "node '$(pod_node "$label-fits")'; events: $(sched_events "$label-fits")"
	fi
	stop_host_scheduler 3
	if grep -hiE 'forbidden|unauthorized|is not allowed|cannot (get|list|watch|create|update|patch)|RBAC' \
		"$STATE/logs/host-scheduler-3.log" | grep -v 'FLAG: ' >"$WORK/sched-denials.txt"; then
		fail "$label: no RBAC denial in its log" "$(head -n 3 "$WORK/sched-denials.txt" | cut -c1-300)"
	else
		pass "$label: no RBAC denial in its log"
	fi
	check "$label: kubectl delete -k manifests/scheduler/ removes it" kc delete -k "$SCHED_MANIFESTS"
	cleanup_test_pods
}

# --- main ----------------------------------------------------------------------------------

mkdir -p "$STATE"
log "install-proof: building or reusing the control-plane tools"
TOOLS_BIN=$(bash "$E2E_DIR/build-tools.sh" cluster | tail -n 1) || die "building the tools failed"
export GMG_TOOLS_BIN=$TOOLS_BIN
[ -x "$TOOLS_BIN/helm" ] || die "helm missing in $TOOLS_BIN"
KUBE_VERSION=$("$TOOLS_BIN/kube-apiserver" --version | awk '{ print $2 }')
[[ $KUBE_VERSION =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "kube-apiserver --version: '$KUBE_VERSION'"
kc() { "$TOOLS_BIN/kubectl" --kubeconfig "$STATE/kubeconfig" "$@"; }

echo "== static: Dockerfile"
check "Dockerfile builder runs CI's install-deps.sh and the Makefile's cmake lines" check_dockerfile_build
check "Dockerfile runtime stage provides every library the binary links; numeric USER; ENTRYPOINT" check_dockerfile_runtime_libs
check "make image (tools/image/build.sh) reads the Dockerfile's runtime stage: same packages, USER, ENTRYPOINT, CMD, EXPOSE, LABEL keys" check_image_matches_dockerfile
check "Dockerfile builder's cmake RUN line builds the binary from the .dockerignore'd context (no engine)" check_dockerfile_builds_here

echo "== chart without a cluster"
check "helm lint --strict (selfSigned)" check_lint
check "helm lint --strict (certManager)" check_lint --set certificate.mode=certManager
check "helm lint --strict (existingSecret)" check_lint --set certificate.mode=existingSecret --set certificate.existingSecret.name=my-tls
check "helm lint --strict (ServiceMonitor, PrometheusRule, Ignore, warn, URL)" check_lint --set serviceMonitor.enabled=true \
	--set prometheusRule.enabled=true --set webhook.bindings.failurePolicy=Ignore --set mode=warn \
	--set webhook.url=https://127.0.0.1:9443/validate
check "schema rejects threshold 1.5" schema_rejects --set threshold=1.5
check "schema rejects threshold 0" schema_rejects --set threshold=0
check "schema rejects threshold 1.5 as a number (--set-json)" schema_rejects --set-json threshold=1.5
check "schema rejects mode observe" schema_rejects --set mode=observe
check "schema rejects failurePolicy Maybe" schema_rejects --set webhook.bindings.failurePolicy=Maybe
check "schema rejects existingSecret without a name" schema_rejects --set certificate.mode=existingSecret
check "schema accepts threshold 1" helm_template --set threshold=1
check "schema rejects reservations cluster" schema_rejects --set reservations=cluster
check "chart refuses reservations=local with 2 replicas, saying why" local_multi_refused
check "chart's Deployment template can pass every flag of serve --help (named values, extraArgs for --kubeconfig, --scheduler-listen)" serve_flags_all_placed
check "schema rejects threads 0.5" schema_rejects --set-json threads=0.5
check "schema rejects policies maybe" schema_rejects --set policies=maybe
check "schema rejects drainTimeout 5 (no unit)" schema_rejects --set drainTimeout=5
check "schema rejects extraArgs not a list" schema_rejects --set extraArgs=--threads=2
check "chart refuses webhook.timeoutSeconds 5 under apiTimeout 2s (6 s deadline), saying why" \
	timeout_refused "shorter than a review's deadline" --set webhook.timeoutSeconds=5
check "chart refuses apiTimeout 11s (33 s deadline, over the API server's 30 s), saying why" \
	timeout_refused "more than the API server's 30 s maximum" --set apiTimeout=11s
check "certManager mode renders Certificate and cainjector annotation (chart and certs/cert-manager)" check_cert_manager_render
check "helm lint --strict (scheduler.enabled)" check_lint --set scheduler.enabled=true
check "helm lint --strict (scheduler.enabled, certManager, spread, 2 GPU resources)" check_lint --set scheduler.enabled=true \
	--set certificate.mode=certManager --set scheduler.extender.score=spread --set scheduler.extender.passNodes=3 \
	--set 'gpuResources={nvidia.com/gpu,amd.com/gpu}'
check "schema rejects scheduler.extender.weight 0" schema_rejects --set scheduler.enabled=true --set scheduler.extender.weight=0
check "schema rejects scheduler.schedulerName default-scheduler" schema_rejects --set scheduler.schedulerName=default-scheduler
check "schema rejects scheduler.extender.httpTimeout 5 (no unit)" schema_rejects --set scheduler.extender.httpTimeout=5
check "schema rejects scheduler.extender.score fifo" schema_rejects --set scheduler.extender.score=fifo
check "schema rejects scheduler.extender.passNodes -1" schema_rejects --set scheduler.extender.passNodes=-1
check "scheduler.extender.passNodes 3 renders --scheduler-pass-nodes=3, 0 renders none" pass_nodes_rendered
check "scheduler, certManager mode: caFile from the serving Secret's ca.crt alone, no caData" sched_cert_manager_ok

trap teardown EXIT
trap 'exit 130' INT TERM
log "install-proof: cluster up (no webhook) in $STATE"
bash "$E2E_DIR/cluster.sh" up --no-webhook >"$STATE/cluster-up.log" 2>&1 ||
	{ tail -n 20 "$STATE/cluster-up.log" >&2; die "cluster up failed (logs: $STATE/logs)"; }
load_cluster_env
kc() { "$TOOLS_BIN/kubectl" --kubeconfig "$STATE/kubeconfig" "$@"; }
mkdir -p "$WORK"
kc create namespace "$TEST_NS" >/dev/null

echo "== server-side dry runs"
# cluster.sh created the namespace already; dry runs cannot create a namespace for later objects.
check "kubectl apply --dry-run=server -f manifests/" kc apply --dry-run=server -f "$MANIFESTS"
check "kubectl apply --dry-run=server -k manifests/" kc apply --dry-run=server -k "$MANIFESTS"
check "helm template | kubectl apply --dry-run=server -f -" template_apply
check "chart's crds/gpumemorypolicy.yaml is byte-identical to manifests/crd-gpumemorypolicy.yaml" crd_copies_identical
check "kubectl apply --dry-run=server -f chart's crds/gpumemorypolicy.yaml" kc apply --dry-run=server -f "$CHART/crds/gpumemorypolicy.yaml"
check "chart (--include-crds) and manifests/ render the same objects (CRD, webhooks, RBAC incl. policies and the Lease Role, pod spec, Service, PDB)" same_objects
check "chart: reservations=local with replicas=1 renders --reservations=local and no Lease Role, accepted" local_single_ok
check "chart: bindings failurePolicy Ignore renders and is accepted (pods stay Fail)" bindings_policy_rendered Ignore
check "timeoutSeconds 7 and --webhook-timeout=7s from apiTimeout 2s" timeout_rendered 2s 7
check "timeoutSeconds 10 and --webhook-timeout=10s from apiTimeout 3s" timeout_rendered 3s 10
check "timeoutSeconds 6 from apiTimeout 1500ms (4.5 s rounded up, plus 1)" timeout_rendered 1500ms 6
check "webhook.timeoutSeconds 12 kept when it covers 3 x apiTimeout" timeout_rendered 2s 12 --set webhook.timeoutSeconds=12
check "chart: every named serve value renders its flag, extraArgs appended, accepted" serve_flags_rendered
check "helm template (Ignore on bindings, warn mode, 2 GPU resources) accepted" template_apply \
	--set webhook.bindings.failurePolicy=Ignore --set mode=warn \
	--set 'gpuResources={nvidia.com/gpu,amd.com/gpu}' --set 'exemptNamespaces={gpu-exempt}'
check "helm template (scheduler.enabled) accepted; extender at the Service over TLS, caData = the render's CA = the caBundle" \
	sched_template_ok
check "chart: NetworkPolicy (networkPolicy.enabled) renders as designed and is accepted" netpol_rendered
check "chart: networkPolicy.enabled without controlPlaneCIDRs or webhookFrom is refused, saying why" \
	timeout_refused "set networkPolicy.controlPlaneCIDRs" --set networkPolicy.enabled=true
check "chart: scheduler.enabled renders its client certificate (Secret, mount, certFile/keyFile) and --client-auth-routes=extender, accepted" sched_client_rendered
check "chart: scheduler.enabled with existingSecret needs scheduler.clientAuth.existingSecret, saying why" \
	timeout_refused "set scheduler.clientAuth.existingSecret" --set scheduler.enabled=true \
	--set certificate.mode=existingSecret --set certificate.existingSecret.name=my-tls
check "chart: clientAuth.admission needs clientAuth.allowedNames, saying why" \
	timeout_refused "set clientAuth.allowedNames" --set clientAuth.admission=true
check "chart: clientAuth.admission with allowedNames renders --client-auth-routes=admission,extender and both names" \
	client_admission_rendered
check "helm template (scheduler.enabled, existingSecret with caBundle, spread, 2 GPU resources) accepted" template_apply \
	--set scheduler.enabled=true --set certificate.mode=existingSecret --set certificate.existingSecret.name=my-tls \
	--set scheduler.clientAuth.existingSecret=my-sched-client \
	--set certificate.existingSecret.caBundle=Y2E= --set scheduler.extender.score=spread \
	--set 'gpuResources={nvidia.com/gpu,amd.com/gpu}'

echo "== Helm path"
URL="https://127.0.0.1:$WEBHOOK_PORT/validate"
HELM_SET=(--set "webhook.url=$URL" --set 'certificate.selfSigned.extraIPs={127.0.0.1}' --set scheduler.enabled=true)
# cluster.sh installed the CRD: delete it so that the chart's crds/ is what installs it.
check "GPUMemoryPolicy CRD deleted before helm install" kc delete crd "$CRD_NAME" --wait=true
check "helm install (clientConfig.url=$URL, scheduler.enabled)" helm_ install "$RELEASE" "$CHART" -n "$NS" "${HELM_SET[@]}"
check "helm install created the GPUMemoryPolicy CRD from crds/, Established" wait_for 30 "CRD Established" crd_established
check "helm: the stored CRD is the chart's crds/gpumemorypolicy.yaml" crd_is_charts
notes_opt_in() { helm_ get notes "$RELEASE" -n "$NS" | grep -q "schedulerName: $SCHED_NAME"; }
check "helm NOTES tell how pods opt in (schedulerName: $SCHED_NAME)" notes_opt_in
kc -n "$NS" get deploy "$RELEASE" -o json >"$WORK/helm-deploy.json"
check "helm: Deployment stored with every setting (HA, security context, probes, preStop sleep, Secret volume)" \
	deploy_settings_kept "$WORK/helm-deploy.json"
check "helm: Deployment passes --reservations=shared --reservations-namespace=$NS" \
	deploy_shared_reservations "$WORK/helm-deploy.json"
check "helm: webhook configuration stored as designed (2 webhooks, exclusions, Fail/Fail, v1, None, 7 s)" webhook_config_ok Fail
# The Secret as the kubelet would mount it.
kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.crt}' | base64 -d >"$WORK/helm.crt"
kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.key}' | base64 -d >"$WORK/helm.key"
kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.ca\.crt}' | base64 -d >"$WORK/helm-ca.crt"
volume_update "$WORK/helm-tls" "$WORK/helm.crt" "$WORK/helm.key" "$WORK/helm-ca.crt"
check "chart Secret: serving cert verifies against its ca.crt, names the Service and 127.0.0.1" helm_ca_bundle_ok
check "ServiceAccount token kubeconfig (kubectl create token)" sa_kubeconfig "$WORK/helm-sa.kubeconfig"
# Not through check(): HOST_PID must be set in this shell.
host_webhook "binary runs on the host with the chart's args, Secret and ServiceAccount" \
	"$WORK/helm-tls" "$WORK/helm-sa.kubeconfig" "$WORK/helm-deploy.json"
check "chart's webhook configuration in effect (URL switch)" wait_for 60 "webhook in effect" in_effect
placement_checks "helm"
lease_record_checks "helm"
rbac_checks "helm"
lease_rbac_checks "helm"
no_403_logged "helm"
echo "== second scheduler (scheduler.enabled): the chart's kube-scheduler configuration, run for real"
cleanup_test_pods
scheduler_checks

bundles() { kc get validatingwebhookconfiguration "$RELEASE" -o jsonpath='{range .webhooks[*]}{.clientConfig.caBundle}{"\n"}{end}'; }
CA_BEFORE=$(bundles)
CRT_BEFORE=$(kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.crt}')
check "helm upgrade (--reuse-values, logLevel=debug)" helm_ upgrade "$RELEASE" "$CHART" -n "$NS" --reuse-values --set logLevel=debug
if [ -n "$CA_BEFORE" ] && [ "$(bundles)" = "$CA_BEFORE" ] &&
	[ "$(kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.crt}')" = "$CRT_BEFORE" ]; then
	pass "helm upgrade keeps the caBundle and the serving certificate"
else
	fail "helm upgrade keeps the caBundle and the serving certificate" "caBundle or tls.crt changed"
fi
check "helm upgrade applied the new value (Deployment args carry --log-level=debug)" deploy_args_have --log-level=debug
# An upgrade inside the renewal window re-issues the serving pair under the SAME CA.
check "helm upgrade within renewBeforeDays" helm_ upgrade "$RELEASE" "$CHART" -n "$NS" --reuse-values \
	--set certificate.selfSigned.renewBeforeDays=400
kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.crt}' | base64 -d >"$WORK/helm-renewed.crt"
kc -n "$NS" get secret "$SECRET" -o jsonpath='{.data.tls\.key}' | base64 -d >"$WORK/helm-renewed.key"
if [ "$(bundles)" = "$CA_BEFORE" ] && ! cmp -s "$WORK/helm.crt" "$WORK/helm-renewed.crt" &&
	openssl verify -CAfile "$WORK/helm-ca.crt" "$WORK/helm-renewed.crt" >/dev/null 2>&1; then
	pass "helm upgrade in the renewal window re-issues the serving cert under the same CA"
else
	fail "helm upgrade in the renewal window re-issues the serving cert under the same CA"
fi
# The kubelet would now swap the Secret volume: do the same with the files the webhook reads.
rotation_check "helm" "$WORK/helm-tls" "$WORK/helm-renewed.crt" "$WORK/helm-renewed.key"
stop_host_webhook
cleanup_test_pods
check "helm uninstall" helm_ uninstall "$RELEASE" -n "$NS" --wait
check "helm uninstall leaves the GPUMemoryPolicy CRD (and so the policies) in place" crd_established
# Deployment pods of the release (kwok) must be gone before the manifests create theirs.
wait_for 60 "release pods gone" no_pods "$NS" || true

echo "== manifests path (certificates from gpu-memory-guard certs)"
CERTS="$WORK/certs"
if BUNDLE=$("$BINARY" certs --out-dir "$CERTS" --ip 127.0.0.1 --days 30 2>"$WORK/certs.err") && [ -n "$BUNDLE" ]; then
	pass "gpu-memory-guard certs wrote a CA and serving pair, printed the caBundle"
else
	fail "gpu-memory-guard certs" "$(cat "$WORK/certs.err")"
fi
check "gpu-memory-guard certs: caBundle is base64 of ca.crt" bundle_is_ca
check "gpu-memory-guard certs: tls.key is 0600" key_mode_600
out=$("$BINARY" certs --out-dir "$CERTS" 2>&1) && rc=0 || rc=$?
if [ "$rc" -ne 0 ] && echo "$out" | grep -q exists; then pass "gpu-memory-guard certs refuses to overwrite (exit $rc)"; else fail "gpu-memory-guard certs refuses to overwrite" "$out"; fi
out=$("$BINARY" certs --bogus 2>&1) && rc=0 || rc=$?
if [ "$rc" = 2 ] && [ "$(echo "$out" | wc -l)" = 1 ]; then pass "gpu-memory-guard certs: bad flag is one line, exit 2"; else fail "gpu-memory-guard certs: bad flag is one line, exit 2" "rc=$rc $out"; fi
check "Secret from the generated files" kc -n "$NS" create secret generic "$SECRET" \
	--from-file=tls.crt="$CERTS/tls.crt" --from-file=tls.key="$CERTS/tls.key" --from-file=ca.crt="$CERTS/ca.crt"
# docs/install.md's one-line install: kustomize | sed caBundle | apply (dry run here).
documented_pipeline() {
	local out
	out=$(kc kustomize "$MANIFESTS" | sed "s|caBundle: \"\"|caBundle: \"$BUNDLE\"|" |
		kc apply --dry-run=server -o json -f -) || return 1
	jq -e --arg b "$BUNDLE" '.items[] | select(.kind == "ValidatingWebhookConfiguration") |
	  all(.webhooks[]; .clientConfig.caBundle == $b)' <<<"$out" >/dev/null
}
check "docs' manifests command (kustomize | sed caBundle | apply) fills both caBundles, accepted" documented_pipeline
# Chart mode existingSecret on the same Secret: the caBundle is read from its ca.crt (lookup,
# which a server-side dry run performs).
existing_secret_bundle() {
	local out bundles
	out=$(helm_ install "$RELEASE" "$CHART" -n "$NS" --dry-run=server \
		--set certificate.mode=existingSecret --set "certificate.existingSecret.name=$SECRET") || return 1
	bundles=$(sed -n 's/^ *caBundle: *//p' <<<"$out" | sort -u)
	[ "$bundles" = "$BUNDLE" ] || { echo "caBundle rendered: ${bundles:0:60}..."; return 1; }
}
check "chart existingSecret mode takes the caBundle from the Secret's ca.crt (helm --dry-run=server)" existing_secret_bundle
# The operator's overlay: caBundle from `certs`; clientConfig switched to the host URL.
mkdir -p "$WORK/overlay"
cat >"$WORK/overlay/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$WORK/overlay" "$MANIFESTS")
patches:
- target: {kind: ValidatingWebhookConfiguration, name: gpu-memory-guard}
  patch: |-
    - {op: replace, path: /webhooks/0/clientConfig, value: {url: "$URL", caBundle: "$BUNDLE"}}
    - {op: replace, path: /webhooks/1/clientConfig, value: {url: "$URL", caBundle: "$BUNDLE"}}
EOF
check "kubectl apply -k overlay of manifests/ (caBundle + URL patch)" kc apply -k "$WORK/overlay"
kc -n "$NS" get deploy gpu-memory-guard -o json >"$WORK/manifests-deploy.json"
check "manifests: Deployment stored with every setting (HA, security context, probes, preStop sleep, Secret volume)" \
	deploy_settings_kept "$WORK/manifests-deploy.json"
check "manifests: Deployment passes --reservations=shared --reservations-namespace=$NS" \
	deploy_shared_reservations "$WORK/manifests-deploy.json"
check "manifests: webhook configuration stored as designed (2 webhooks, exclusions, Fail/Fail, v1, None, 7 s)" webhook_config_ok Fail
check "manifests: both replicas created under Pod Security restricted" wait_for 60 "2 webhook pods" webhook_pods 2
volume_update "$WORK/manifests-tls" "$CERTS/tls.crt" "$CERTS/tls.key" "$CERTS/ca.crt"
check "ServiceAccount token kubeconfig (manifests' ServiceAccount)" sa_kubeconfig "$WORK/manifests-sa.kubeconfig"
host_webhook "binary runs on the host with the manifests' args, certs and ServiceAccount" \
	"$WORK/manifests-tls" "$WORK/manifests-sa.kubeconfig" "$WORK/manifests-deploy.json"
check "manifests' webhook configuration in effect" wait_for 60 "webhook in effect" in_effect
# The helm path's reservations (pods since deleted) still count until their expiry: wait for it,
# so the placements below are decided on this path's pods only, then check that the first write
# on each node dropped them.
check "helm path's reservations (pods deleted) expire within the TTL (60 s) + 15 s" \
	wait_for 75 "the helm path's reservations expired" records_expired
placement_checks "manifests"
lease_record_checks "manifests"
check "manifests: the writes on gpu-h100-a and gpu-h100-b pruned the helm path's expired entries" \
	records_without helm-
rbac_checks "manifests"
lease_rbac_checks "manifests"
no_403_logged "manifests"
cp "$CERTS/ca.crt" "$WORK/ca-before.crt"
if "$BINARY" certs --out-dir "$CERTS" --renew --ip 127.0.0.1 --days 30 >"$WORK/bundle-renewed" 2>"$WORK/certs.err" &&
	[ "$(cat "$WORK/bundle-renewed")" = "$BUNDLE" ] && cmp -s "$CERTS/ca.crt" "$WORK/ca-before.crt"; then
	pass "gpu-memory-guard certs --renew: new serving pair, same CA and caBundle"
else
	fail "gpu-memory-guard certs --renew" "$(cat "$WORK/certs.err")"
fi
rotation_check "manifests" "$WORK/manifests-tls" "$CERTS/tls.crt" "$CERTS/tls.key"

echo "== second scheduler from manifests/scheduler/ (the plain manifest)"
sched_manifest_checks

echo "== webhook down (configuration still registered): what failurePolicy Fail costs"
stop_host_webhook
cleanup_test_pods
out=$(gpu_pod down-gpu 1Gi gpu-h100-a | kc create -f - 2>&1)
if [[ $out == *'failed calling webhook "pods.gpu-memory-guard.io"'* ]]; then
	pass "down: GPU placement refused (fails closed, pods webhook)"
else
	fail "down: GPU placement refused (fails closed, pods webhook)" "$out"
fi
# A MIG pod without a declaration is sent at creation (the filter names nvidia.com/mig-*), so
# it is refused at `kubectl apply`, not later at its Binding (issue 24).
out=$(mig_pod down-mig | kc create -f - 2>&1)
if [[ $out == *'failed calling webhook "pods.gpu-memory-guard.io"'* ]]; then
	pass "down: an undeclared MIG pod CREATE is sent to the webhook (matchConditions name nvidia.com/mig-*)"
else
	fail "down: an undeclared MIG pod CREATE is sent to the webhook (matchConditions name nvidia.com/mig-*)" "$out"
fi
check "down: ordinary pod CREATE is not sent to the webhook (matchConditions)" create_plain_pod "$TEST_NS" down-plain
check "down: its binding waits (bindings webhook, failurePolicy Fail)" wait_for 45 "binding failure event" binding_call_failed down-plain
check "down: a pod in the webhook's own namespace still schedules (excluded)" create_plain_pod "$NS" self-restart
check "down: the webhook-namespace pod is bound" wait_for 45 "self-restart bound" pod_bound_in "$NS" self-restart
check "down: a pod in kube-system still schedules (excluded)" create_plain_pod kube-system sys-pod
check "down: the kube-system pod is bound" wait_for 45 "sys-pod bound" pod_bound_in kube-system sys-pod
kc -n "$NS" delete pod self-restart --grace-period=0 --force >/dev/null 2>&1
kc -n kube-system delete pod sys-pod --grace-period=0 --force >/dev/null 2>&1
cleanup_test_pods

echo
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
