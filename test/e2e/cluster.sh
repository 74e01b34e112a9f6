#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, without containers: etcd, kube-apiserver (RBAC),
# kube-scheduler, kube-controller-manager (no nodelifecycle), kwok simulating the kubelets of
# fake GPU nodes, the GPUMemoryPolicy CRD (manifests/crd-gpumemorypolicy.yaml), and
# gpu-memory-guard running on the host, registered through a ValidatingWebhookConfiguration with
# clientConfig.url.
#
# Usage: cluster.sh up [--no-webhook] [--binary PATH]
#        cluster.sh down
#        cluster.sh env                      # export lines: eval "$(cluster.sh env)"
#        cluster.sh status
#        cluster.sh webhook-start [--binary PATH]   # start the webhook, register it, wait for it
#        cluster.sh webhook-stop             # stop the process; the configuration stays
#        cluster.sh webhook-register [PORT]    # point the configuration at 127.0.0.1:PORT (default
#                                            # the webhook's), wait until it takes effect
#        cluster.sh webhook-unregister
#        cluster.sh apiserver-restart [DOWN_SECONDS]   # stop kube-apiserver, wait (default 3 s),
#                                            # start it again (same flags, port, etcd), wait for /readyz
#        cluster.sh apiserver-stop | apiserver-start   # the two halves
#        cluster.sh scheduler-extender [PORT]  # restart kube-scheduler with docs/scheduler.md's
#                                            # KubeSchedulerConfiguration: the extender at the webhook
#                                            # (or at 127.0.0.1:PORT: a proxy before replicas)
#        cluster.sh scheduler-default        # restart kube-scheduler as `up` starts it (no extender)
#
# Environment: GMG_E2E_STATE (state folder; default ${TMPDIR:-/tmp}/gpu-memory-guard-e2e),
# GMG_TOOLS_BIN (tools folder; default: test/e2e/build-tools.sh, cached), GMG_BINARY (webhook
# binary; default build/gpu-memory-guard), GMG_THRESHOLD (default 0.90), GMG_WEBHOOK_ARGS (more
# flags for `gpu-memory-guard serve`), GMG_WEBHOOK_TIMEOUT (timeoutSeconds, default 5).
# Every process runs in its own session with a pid file under $STATE/pids; `down` stops exactly
# those and checks that none of the cluster's ports is still open.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# --- certificates ------------------------------------------------------------------------

# new_ca NAME CN
# Keys are ECDSA P-256 (an RSA 2048 key costs up to a second on a busy 2-core machine, and
# there are ten of them); the service-account signing key stays RSA, as kubeadm makes it.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

new_ca() {
	new_key "$PKI/$1.key"
	openssl req -x509 -new -key "$PKI/$1.key" -sha256 -days 365 -subj "/CN=$2" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "$PKI/$1.crt" 2>/dev/null
}

# new_cert CA NAME SUBJECT EXT_USAGE [SANS]
new_cert() {
	local ca=$1 name=$2 subj=$3 usage=$4 sans=${5:-}
	new_key "$PKI/$name.key"
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature"
		echo "extendedKeyUsage=$usage"
		echo "authorityKeyIdentifier=keyid"
		[ -z "$sans" ] || echo "subjectAltName=$sans"
	} >"$PKI/$name.ext"
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" \
		-CAcreateserial -sha256 -days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
	rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# kubeconfig FILE USER CERTNAME
kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gmg-e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$3.crt")
    client-key-data: $(base64 -w0 "$PKI/$3.key")
contexts:
- name: gmg-e2e
  context:
    cluster: gmg-e2e
    user: $2
current-context: gmg-e2e
EOF
	chmod 600 "$1"
}

make_pki() {
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	new_ca ca gmg-e2e-cluster-ca
	new_cert ca apiserver "/CN=kube-apiserver" serverAuth \
		"IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	new_cert ca admin "/O=system:masters/CN=gmg-e2e-admin" clientAuth
	new_cert ca scheduler "/CN=system:kube-scheduler" clientAuth
	new_cert ca controller-manager "/CN=system:kube-controller-manager" clientAuth
	new_cert ca webhook-client "/O=gpu-memory-guard/CN=gpu-memory-guard" clientAuth
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	# Front proxy (aggregation layer) CA: without it the scheduler and the controller-manager log
	# "missing content for CA bundle ... requestheader-client-ca-file" many times a second.
	new_ca front-proxy-ca gmg-e2e-front-proxy-ca
	new_cert front-proxy-ca front-proxy-client "/CN=front-proxy-client" clientAuth
	# The webhook's own CA, as in production (the caBundle trusts only this one).
	new_ca webhook-ca gmg-e2e-webhook-ca
	new_cert webhook-ca webhook "/CN=gpu-memory-guard" serverAuth \
		"IP:127.0.0.1,DNS:localhost,DNS:gpu-memory-guard.$WEBHOOK_NAMESPACE.svc"
	kubeconfig "$STATE/kubeconfig" gmg-e2e-admin admin
	kubeconfig "$STATE/scheduler.kubeconfig" system:kube-scheduler scheduler
	kubeconfig "$STATE/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
	kubeconfig "$STATE/webhook.kubeconfig" gpu-memory-guard webhook-client
}

# --- components ----------------------------------------------------------------------------

curl_api() { curl -sf --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT$1"; }

start_etcd() {
	start_daemon etcd "$TOOLS_BIN/etcd" --name gmg-e2e --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "gmg-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster-state new --quota-backend-bytes 2147483648 --log-level warn
	wait_for 30 "etcd health" curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
}

# The API server authenticates to the webhook (issue 20; docs/install.md, "Authenticating the API
# server to the webhook"): its AdmissionConfiguration names a kubeconfig whose user "*" (the
# default entry; the suite's webhooks are called at URLs on several ports, e.g. test 12's proxy)
# presents a client certificate from the webhook's CA, CN kube-apiserver, which the suite's
# webhook requires on its admission route (lib.sh, webhook_launch).
make_admission_config() {
	[ -f "$PKI/apiserver-webhook-client.crt" ] ||
		new_cert webhook-ca apiserver-webhook-client "/CN=kube-apiserver" clientAuth
	mkdir -p "$STATE/admission"
	cat >"$STATE/admission/webhook-kubeconfig.yaml" <<EOF
apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: $PKI/apiserver-webhook-client.crt
    client-key: $PKI/apiserver-webhook-client.key
EOF
	cat >"$STATE/admission/admission.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $STATE/admission/webhook-kubeconfig.yaml
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $STATE/admission/webhook-kubeconfig.yaml
EOF
}

# The DRA features e2e test 25 uses are on by default from v1.36 (consumable capacity, KEP-5075:
# DRAConsumableCapacity) and v1.37 (extended resources backed by DRA, KEP-5004:
# DRAExtendedResource); both are alpha gates in v1.35, turned on here for a K8S_VERSION=v1.35.x
# run (kube-apiserver, kube-scheduler and kube-controller-manager alike). Nothing on v1.36+.
dra_feature_gates() {
	local v minor
	v=$("$TOOLS_BIN/kube-apiserver" --version 2>/dev/null) || return 0
	minor=${v#*v1.}
	minor=${minor%%.*}
	case $minor in '' | *[!0-9]*) return 0 ;; esac
	[ "$minor" -ge 36 ] || echo "--feature-gates=DRAConsumableCapacity=true,DRAExtendedResource=true"
}

start_apiserver() {
	make_admission_config
	# The audit log records pod creations in test 23's namespace with their annotations, where
	# the API server writes the webhook's auditAnnotations ("pods.gpu-memory-guard.io/...").
	printf '%s\n' 'apiVersion: audit.k8s.io/v1' 'kind: Policy' 'omitStages: [RequestReceived]' \
		'rules:' \
		'- level: Metadata' '  verbs: [create]' '  namespaces: [e2e-policy]' \
		'  resources: [{group: "", resources: [pods]}]' \
		'- level: None' >"$STATE/audit-policy.yaml"
	# shellcheck disable=SC2046 # one word or none
	start_daemon kube-apiserver "$TOOLS_BIN/kube-apiserver" $(dra_feature_gates) \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
		--cert-dir "$STATE/apiserver-certs" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--requestheader-client-ca-file "$PKI/front-proxy-ca.crt" \
		--requestheader-allowed-names front-proxy-client \
		--requestheader-username-headers X-Remote-User \
		--requestheader-group-headers X-Remote-Group \
		--requestheader-extra-headers-prefix X-Remote-Extra- \
		--proxy-client-cert-file "$PKI/front-proxy-client.crt" \
		--proxy-client-key-file "$PKI/front-proxy-client.key" \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--service-cluster-ip-range 10.0.0.0/24 \
		--authorization-mode Node,RBAC \
		--disable-admission-plugins ServiceAccount,TaintNodesByCondition \
		--endpoint-reconciler-type none \
		--allow-privileged=true --profiling=false --v=1 \
		--audit-policy-file "$STATE/audit-policy.yaml" --audit-log-path "$STATE/logs/audit.log" \
		--admission-control-config-file "$STATE/admission/admission.yaml"
	wait_for 90 "kube-apiserver /readyz" curl_api /readyz
}

# start_scheduler [CONFIG]: with CONFIG, kube-scheduler reads that KubeSchedulerConfiguration
# (which must then carry clientConnection.kubeconfig and leaderElection: with --config,
# kube-scheduler ignores the --kubeconfig flag).
start_scheduler() {
	local conn=(--kubeconfig "$STATE/scheduler.kubeconfig" --leader-elect=false)
	[ -z "${1:-}" ] || conn=(--config "$1")
	# shellcheck disable=SC2046 # one word or none
	start_daemon kube-scheduler "$TOOLS_BIN/kube-scheduler" "${conn[@]}" $(dra_feature_gates) \
		--authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
		--authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --v=2
}

# --- the scheduler extender (e2e tests 13-16, the demo) ------------------------------------------

# The KubeSchedulerConfiguration docs/scheduler.md gives self-managed control planes, taken from
# the document itself (its first yaml block after the heading), adapted to this cluster as an
# operator adapts it to theirs and nothing else: the scheduler's kubeconfig, leader election off
# (as `up` runs it), the extender's URL (the webhook's TLS port on the host) and caData (the
# webhook's CA). kube-scheduler decodes the file strictly: a wrong field in the document stops it.
scheduler_extender_config() { # [PORT] (default the webhook's)
	local doc="$REPO_ROOT/docs/scheduler.md" out="$STATE/scheduler-extender.yaml" url ca
	url="https://127.0.0.1:${1:-$WEBHOOK_PORT}/scheduler"
	ca=$(base64 -w0 "$PKI/webhook-ca.crt")
	awk '/^## Self-managed control planes/ { s = 1 } s && /^```yaml$/ { y = 1; next } y && /^```$/ { exit } y' "$doc" |
		sed -E -e "s|^(  kubeconfig: ).*|\1$STATE/scheduler.kubeconfig|" \
			-e 's|^(  leaderElect: )true$|\1false|' \
			-e "s|^(- urlPrefix: ).*|\1\"$url\"|" \
			-e "s|^(    caData: ).*|\1$ca|" >"$out"
	# Each adaptation applied once, else the document changed shape: say so rather than run it.
	[ "$(grep -c -e "kubeconfig: $STATE/scheduler.kubeconfig\$" -e '^  leaderElect: false$' \
		-e "^- urlPrefix: \"$url\"\$" -e "^    caData: $ca\$" "$out")" = 4 ] && grep -q '^extenders:' "$out" ||
		die "docs/scheduler.md's KubeSchedulerConfiguration no longer has the expected fields (clientConnection.kubeconfig, leaderElection.leaderElect, extenders[0].urlPrefix, tlsConfig.caData); got: $(tr '\n' ' ' <"$out")"
	echo "$out"
}

scheduler_ready() { curl -skf --max-time 2 "https://127.0.0.1:$SCHEDULER_PORT/readyz"; }

# scheduler_restart [CONFIG]: stops the cluster's kube-scheduler, starts it again with CONFIG
# (none: as `up` starts it), waits for /readyz. SCHEDULER_CONFIG in cluster.env records which.
scheduler_restart() {
	local config=${1:-}
	stop_daemon kube-scheduler
	echo "---- $(date -u +%FT%TZ) start${config:+ --config $config}" >>"$STATE/logs/kube-scheduler.log"
	start_scheduler "$config"
	sed -i '/^SCHEDULER_CONFIG=/d' "$STATE/cluster.env"
	echo "SCHEDULER_CONFIG=$config" >>"$STATE/cluster.env"
	wait_for 60 "kube-scheduler /readyz" scheduler_ready ||
		die "kube-scheduler not ready (log: $STATE/logs/kube-scheduler.log): $(tail -n 5 "$STATE/logs/kube-scheduler.log")"
	log "kube-scheduler restarted (pid $(cat "$STATE/pids/kube-scheduler.pid"))${config:+ with $config}"
}

start_controller_manager() {
	# shellcheck disable=SC2046 # one word or none
	start_daemon kube-controller-manager "$TOOLS_BIN/kube-controller-manager" $(dra_feature_gates) \
		--kubeconfig "$STATE/controller-manager.kubeconfig" \
		--authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
		--authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" \
		--controllers '*,-nodelifecycle' --use-service-account-credentials=true \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--service-cluster-ip-range 10.0.0.0/24 --v=1
}

start_kwok() {
	start_daemon kwok "$TOOLS_BIN/kwok" --kubeconfig "$STATE/kubeconfig" \
		--config "$E2E_DIR/kwok-stages.yaml" \
		--manage-all-nodes=false \
		--manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--cidr 10.244.0.0/16 --node-ip 10.0.2.1 \
		--server-address "127.0.0.1:$KWOK_PORT"
}

healthz() { curl -skf --max-time 2 "https://127.0.0.1:$1/healthz"; }

nodes_ready() {
	local want have
	want=$(ls "$E2E_DIR"/nodes/*.yaml | wc -l)
	have=$(kc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c '^True$' || true)
	[ "$have" -ge "$want" ]
}

bootstrap_objects() {
	kc create namespace "$WEBHOOK_NAMESPACE" >/dev/null
	kc create namespace "$EXEMPT_NAMESPACE" >/dev/null
	# The webhook's identity on the host: the chart's ClusterRoles (pods, nodes, GPUMemoryPolicy
	# objects, DRA slices and claims: read only; the policies' status: patch, update).
	kc apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: gpu-memory-guard-e2e
rules:
- apiGroups: [""]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["gpu-memory-guard.io"]
  resources: ["gpumemorypolicies"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["resource.k8s.io"]
  resources: ["resourceslices", "resourceclaims"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["gpu-memory-guard.io"]
  resources: ["gpumemorypolicies/status"]
  verbs: ["patch", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: gpu-memory-guard-e2e
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: gpu-memory-guard-e2e
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: gpu-memory-guard
EOF
	kc create -f "$E2E_DIR/nodes/" >/dev/null
	install_crds
}

# The GPUMemoryPolicy CRD, as manifests/ installs it, Established before the webhook starts (so
# that a webhook listing policies at start finds the resource served).
install_crds() {
	kc apply -f "$REPO_ROOT/manifests/crd-gpumemorypolicy.yaml" >/dev/null
	kc wait --for=condition=Established --timeout=60s crd/gpumemorypolicies.gpu-memory-guard.io >/dev/null ||
		die "the GPUMemoryPolicy CRD is not Established"
}

# --- webhook -------------------------------------------------------------------------------

webhook_binary() {
	local b=${1:-${GMG_BINARY:-}}
	if [ -z "$b" ] && [ -n "${WEBHOOK_BINARY:-}" ]; then b=$WEBHOOK_BINARY; fi
	[ -n "$b" ] || b="$REPO_ROOT/build/gpu-memory-guard"
	[ -x "$b" ] || die "webhook binary not found: $b (build it, or pass --binary / GMG_BINARY)"
	(cd "$(dirname "$b")" && echo "$(pwd)/$(basename "$b")")
}

webhook_ready() { curl -sf --max-time 2 "http://127.0.0.1:$WEBHOOK_HEALTH_PORT/readyz"; }

webhook_start() {
	local bin
	bin=$(webhook_binary "${1:-}")
	if daemon_alive webhook; then log "webhook already running (pid $(cat "$STATE/pids/webhook.pid"))"; return 0; fi
	sed -i '/^WEBHOOK_BINARY=/d' "$STATE/cluster.env"
	echo "WEBHOOK_BINARY=$bin" >>"$STATE/cluster.env"
	log "starting gpu-memory-guard on 127.0.0.1:$WEBHOOK_PORT (health :$WEBHOOK_HEALTH_PORT)"
	webhook_launch webhook "$WEBHOOK_PORT" "$WEBHOOK_HEALTH_PORT" "$bin"
	if ! wait_for 30 "webhook /readyz" webhook_ready; then
		tail -n 20 "$STATE/logs/webhook.log" >&2
		die "webhook not ready (log: $STATE/logs/webhook.log)"
	fi
}

webhook_stop() { stop_daemon webhook; }

# webhook_register [PORT]: the configuration points at https://127.0.0.1:PORT/validate (default
# the webhook's port; e2e test 12 points it at the round-robin proxy in front of its replicas).
webhook_register() {
	local ca
	ca=$(base64 -w0 "$PKI/webhook-ca.crt")
	sed -e "s|@CONFIG_NAME@|$WEBHOOK_CONFIG_NAME|" \
		-e "s|@WEBHOOK_URL@|https://127.0.0.1:${1:-$WEBHOOK_PORT}/validate|" \
		-e "s|@CA_BUNDLE@|$ca|" \
		-e "s|@TIMEOUT@|${GMG_WEBHOOK_TIMEOUT:-5}|" \
		-e "s|@WEBHOOK_NAMESPACE@|$WEBHOOK_NAMESPACE|" \
		-e "s|@EXEMPT_NAMESPACE@|$EXEMPT_NAMESPACE|" \
		-e "s|@GPU_RESOURCE@|$GPU_RESOURCE|g" \
		"$E2E_DIR/webhook-config.yaml.in" >"$STATE/webhook-config.yaml"
	kc apply -f "$STATE/webhook-config.yaml" >/dev/null
	# The API server loads webhook configurations asynchronously: a placement that must be
	# refused tells when this one is in effect.
	wait_for 60 "the webhook configuration to take effect" webhook_in_effect ||
		die "webhook configuration not in effect (webhook log: $STATE/logs/webhook.log)"
	log "webhook registered and in effect"
}

webhook_in_effect() {
	local out
	out=$(kc create --dry-run=server -o name -f - 2>&1 <<EOF
apiVersion: v1
kind: Pod
metadata: {name: gmg-probe, namespace: default}
spec:
  nodeName: gpu-l4-0
  tolerations: [{key: $GPU_RESOURCE, operator: Exists, effect: NoSchedule}]
  containers:
  - name: probe
    image: registry.k8s.io/pause:3.10
    env: [{name: GPU_MEMORY_LIMIT, value: 1000Gi}]
    resources: {limits: {$GPU_RESOURCE: "1"}}
EOF
	) && return 1
	grep -q 'denied the request' <<<"$out"
}

webhook_unregister() { kc delete validatingwebhookconfiguration "$WEBHOOK_CONFIG_NAME" --ignore-not-found >/dev/null; }

# --- API server restart (e2e test 11) ----------------------------------------------------------

# The same process start_apiserver makes at `up` (same flags, port, certificates, etcd data), so
# every client (webhook, scheduler, controller-manager, kwok) reconnects to the same address.
apiserver_stop() {
	daemon_alive kube-apiserver || die "kube-apiserver is not running"
	log "stopping kube-apiserver (pid $(cat "$STATE/pids/kube-apiserver.pid"))"
	echo "---- $(date -u +%FT%TZ) stop (apiserver-stop)" >>"$STATE/logs/kube-apiserver.log"
	# With watches open (every client has some) kube-apiserver stops listening at once but its
	# process lingers until they end: SIGKILL after GMG_APISERVER_STOP_WAIT (5 s).
	stop_daemon kube-apiserver "${GMG_APISERVER_STOP_WAIT:-5}"
}

apiserver_start() {
	if daemon_alive kube-apiserver; then log "kube-apiserver already running"; return 0; fi
	log "starting kube-apiserver on 127.0.0.1:$APISERVER_PORT"
	echo "---- $(date -u +%FT%TZ) start (apiserver-start)" >>"$STATE/logs/kube-apiserver.log"
	start_apiserver
}

# --- up / down -------------------------------------------------------------------------------

do_down() {
	local p n
	[ -d "$STATE" ] || { log "nothing to tear down in $STATE"; return 0; }
	# Clients first, in parallel (the webhook drains for a few seconds), then the API server, then
	# etcd. `wait` names the stoppers: the daemons are children of this shell too after `up`.
	# Clients are every daemon with a pid file but those two: the suite's own too (e2e test 12's
	# replicas and proxy, left running when a run is interrupted).
	local stoppers="" f
	for f in "$STATE"/pids/*.pid; do
		[ -e "$f" ] || continue
		n=$(basename "$f" .pid)
		case $n in kube-apiserver | etcd) continue ;; esac
		stop_daemon "$n" &
		stoppers="$stoppers $!"
	done
	# shellcheck disable=SC2086
	wait $stoppers
	stop_daemon kube-apiserver
	stop_daemon etcd
	if [ -f "$STATE/cluster.env" ]; then
		for p in $(sed -n 's/^[A-Z_]*_PORT=//p' "$STATE/cluster.env"); do
			if port_listening "$p"; then log "WARNING: port $p still open after down"; fi
		done
	fi
	rm -rf "$STATE/etcd" "$STATE/pki" "$STATE/apiserver-certs" "$STATE/pids" "$STATE"/*.kubeconfig \
		"$STATE/kubeconfig" "$STATE/cluster.env" "$STATE/webhook-config.yaml"
	log "cluster in $STATE is down (logs kept in $STATE/logs)"
}

do_up() {
	local webhook=1 binary=""
	while [ $# -gt 0 ]; do
		case $1 in
		--no-webhook) webhook=0 ;;
		--binary) binary=$2; shift ;;
		*) die "up: unknown option $1" ;;
		esac
		shift
	done
	if [ -f "$STATE/cluster.env" ]; then
		if [ -f "$STATE/pids/kube-apiserver.pid" ] && kill -0 "$(cat "$STATE/pids/kube-apiserver.pid")" 2>/dev/null; then
			die "a cluster is already up in $STATE (test/e2e/cluster.sh down, or set GMG_E2E_STATE)"
		fi
		do_down
	fi
	[ $webhook = 0 ] || binary=$(webhook_binary "$binary")
	TOOLS_BIN=$(tools_bin)
	local t
	for t in etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok; do
		[ -x "$TOOLS_BIN/$t" ] || die "$t missing in $TOOLS_BIN (run test/e2e/build-tools.sh)"
	done
	command -v jq >/dev/null || die "jq is needed (apt-get install jq)"

	mkdir -p "$STATE"
	rm -rf "$STATE/logs"
	mkdir -p "$STATE/logs" "$STATE/pids"
	# From here on, a failure or an interrupt takes down whatever was started.
	local up_pid=$BASHPID
	trap 'rc=$?; [ "$BASHPID" = "'"$up_pid"'" ] || exit $rc; trap - EXIT INT TERM; if [ $rc -ne 0 ]; then log "up failed; tearing down (logs: $STATE/logs)"; do_down; fi; exit $rc' EXIT
	trap 'exit 130' INT TERM

	local v
	for v in ETCD_PORT ETCD_PEER_PORT APISERVER_PORT SCHEDULER_PORT CONTROLLER_MANAGER_PORT \
		KWOK_PORT WEBHOOK_PORT WEBHOOK_HEALTH_PORT; do
		free_port "$v"
	done
	THRESHOLD=$DEFAULT_THRESHOLD
	cat >"$STATE/cluster.env" <<EOF
TOOLS_BIN=$TOOLS_BIN
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
CONTROLLER_MANAGER_PORT=$CONTROLLER_MANAGER_PORT
KWOK_PORT=$KWOK_PORT
WEBHOOK_PORT=$WEBHOOK_PORT
WEBHOOK_HEALTH_PORT=$WEBHOOK_HEALTH_PORT
THRESHOLD=$THRESHOLD
EOF
	load_cluster_env
	log "state $STATE; apiserver https://127.0.0.1:$APISERVER_PORT, etcd :$ETCD_PORT"

	log "certificates"
	make_pki
	log "etcd"
	start_etcd
	log "kube-apiserver"
	start_apiserver
	log "namespaces, RBAC, nodes, the GPUMemoryPolicy CRD"
	bootstrap_objects
	log "kube-scheduler, kube-controller-manager, kwok"
	start_scheduler
	start_controller_manager
	start_kwok
	wait_for 60 "kube-scheduler /healthz" healthz "$SCHEDULER_PORT"
	wait_for 60 "kube-controller-manager /healthz" healthz "$CONTROLLER_MANAGER_PORT"
	wait_for 60 "nodes Ready (kwok)" nodes_ready
	wait_for 60 "the default service account (controller-manager)" kc get serviceaccount default -n default
	if [ $webhook = 1 ]; then
		webhook_start "$binary"
		webhook_register
	fi
	trap - EXIT INT TERM
	log "cluster up: export KUBECONFIG=$STATE/kubeconfig"
}

do_env() {
	load_cluster_env
	cat <<EOF
export GMG_E2E_STATE=$STATE
export KUBECONFIG=$STATE/kubeconfig
export GMG_TOOLS_BIN=$TOOLS_BIN
export PATH=$TOOLS_BIN:\$PATH
export GMG_APISERVER_URL=https://127.0.0.1:$APISERVER_PORT
export GMG_CLUSTER_CA=$PKI/ca.crt
export GMG_WEBHOOK_URL=https://127.0.0.1:$WEBHOOK_PORT/validate
export GMG_WEBHOOK_HEALTH_URL=http://127.0.0.1:$WEBHOOK_HEALTH_PORT
export GMG_WEBHOOK_PORT=$WEBHOOK_PORT
export GMG_WEBHOOK_HEALTH_PORT=$WEBHOOK_HEALTH_PORT
export GMG_WEBHOOK_CA=$PKI/webhook-ca.crt
export GMG_WEBHOOK_CERT=$PKI/webhook.crt
export GMG_WEBHOOK_KEY=$PKI/webhook.key
export GMG_WEBHOOK_KUBECONFIG=$STATE/webhook.kubeconfig
export GMG_LOGS=$STATE/logs
EOF
}

do_status() {
	load_cluster_env
	local n
	for n in etcd kube-apiserver kube-scheduler kube-controller-manager kwok webhook; do
		if daemon_alive "$n"; then echo "$n: running (pid $(cat "$STATE/pids/$n.pid"))"; else echo "$n: stopped"; fi
	done
	echo "kube-scheduler configuration: ${SCHEDULER_CONFIG:-flags of up (no extender)}"
	kc get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count,nvidia.com/gpu.replicas 2>/dev/null || true
}

cmd=${1:-}
[ $# -eq 0 ] || shift
case $cmd in
up) do_up "$@" ;;
down) do_down ;;
env) do_env ;;
status) do_status ;;
webhook-start)
	load_cluster_env
	b=""
	[ "${1:-}" != --binary ] || b=$2
	webhook_start "$b"
	webhook_register
	;;
webhook-stop) load_cluster_env; webhook_stop ;;
webhook-register) load_cluster_env; webhook_register "${1:-}" ;;
webhook-unregister) load_cluster_env; webhook_unregister ;;
apiserver-stop) load_cluster_env; apiserver_stop ;;
apiserver-start) load_cluster_env; apiserver_start ;;
scheduler-extender)
	load_cluster_env
	config=$(scheduler_extender_config "${1:-}") # exits here if the document changed shape
	scheduler_restart "$config"
	;;
scheduler-default) load_cluster_env; scheduler_restart ;;
apiserver-restart)
	load_cluster_env
	apiserver_stop
	sleep "${1:-3}"
	apiserver_start
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
