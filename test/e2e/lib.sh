# shellcheck shell=bash
# Shared by cluster.sh, run.sh, demo.sh (and install-proof.sh): paths, state, ports, helpers.
# Source it; it defines functions and variables only and starts nothing.
#
# State: one folder per cluster, $GMG_E2E_STATE (default ${TMPDIR:-/tmp}/gpu-memory-guard-e2e),
# never inside the repository. Two clusters on one machine need two state folders; their ports
# are picked free at `up` time and recorded in $STATE/cluster.env.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$E2E_DIR/../.." && pwd)
STATE=${GMG_E2E_STATE:-${TMPDIR:-/tmp}/gpu-memory-guard-e2e}
PKI="$STATE/pki"
GMG_CACHE=${GMG_CACHE:-$HOME/.cache/gpu-memory-guard}
export GMG_CACHE

# Names shared with the webhook configuration template and the tests.
WEBHOOK_NAMESPACE=${GMG_WEBHOOK_NAMESPACE:-gpu-memory-guard}
EXEMPT_NAMESPACE=${GMG_EXEMPT_NAMESPACE:-gpu-exempt}
WEBHOOK_CONFIG_NAME=gpu-memory-guard
GPU_RESOURCE=nvidia.com/gpu
DEFAULT_THRESHOLD=${GMG_THRESHOLD:-0.90}

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The tools folder: $GMG_TOOLS_BIN, else the one recorded for this cluster, else build-tools.sh
# (cached after the first run; its progress goes to stderr).
tools_bin() {
	if [ -n "${GMG_TOOLS_BIN:-}" ]; then
		echo "$GMG_TOOLS_BIN"
	elif [ -f "$STATE/cluster.env" ] && grep -q '^TOOLS_BIN=' "$STATE/cluster.env"; then
		sed -n 's/^TOOLS_BIN=//p' "$STATE/cluster.env"
	else
		bash "$E2E_DIR/build-tools.sh" cluster | tail -n 1
	fi
}

# client-go's leader-election lines in a kube-scheduler log: klog text up to v1.33
# ("attempting to acquire leader lease NS/NAME...", "successfully acquired lease NS/NAME"),
# structured in v1.37 ("Attempting to acquire leader lease..." lock="NS/NAME",
# "Successfully acquired lease" lock="NS/NAME"). NS/NAME empty: any lease.
log_lease_attempted() { grep -qiE "attempting to acquire leader lease( |\.\.\.\" lock=\")$2" "$1"; } # LOG NS/NAME
log_lease_acquired() { grep -qiE "successfully acquired lease( |\" lock=\")$2" "$1"; }             # LOG NS/NAME

# Loads $STATE/cluster.env (ports, paths) into the environment; fails if no cluster was set up.
load_cluster_env() {
	[ -f "$STATE/cluster.env" ] || die "no cluster state in $STATE (run: test/e2e/cluster.sh up)"
	set -a
	# shellcheck disable=SC1091
	. "$STATE/cluster.env"
	set +a
	export PATH="$TOOLS_BIN:$PATH"
	export KUBECONFIG="$STATE/kubeconfig"
}

kc() { "$TOOLS_BIN/kubectl" --kubeconfig "$STATE/kubeconfig" "$@"; }

# Whether anything listens on TCP port $1 (any address), from /proc/net/tcp{,6}: state 0A is
# LISTEN; the local address ends in ":PORT" in upper-case hex. (No dependency on ss/netstat.)
port_listening() {
	local hex
	hex=$(printf ':%04X' "$1")
	awk -v h="$hex" '$4 == "0A" && substr($2, length($2) - 4) == h { f = 1 } END { exit !f }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# free_port NAME: sets the variable NAME (an array element too: "RR_PORT[2]") to a TCP port on
# 127.0.0.1 nobody listens on, outside the ephemeral range (32768+) and not in $PICKED (ports
# already handed out by this shell). Random so that two runs rarely race for one. It assigns
# rather than prints: in `X=$(free_port)` the subshell's PICKED is lost, and two calls could
# hand out one port (seen: kube-scheduler on the API server's port, dead at its bind, while its
# /healthz check was answered by the API server). GMG_E2E_PORTS=LOW-HIGH narrows the range
# (default 20000-31999): runs started at the same time (`make test` runs the e2e suite, a second
# cluster of it and the install proof together) get ranges of their own, so they never race.
PICKED=""
GMG_E2E_PORTS=${GMG_E2E_PORTS:-20000-31999}
free_port() {
	local _fp_port _fp_try _fp_lo=${GMG_E2E_PORTS%-*} _fp_hi=${GMG_E2E_PORTS#*-}
	for _fp_try in $(seq 1 200); do
		_fp_port=$((_fp_lo + RANDOM % (_fp_hi - _fp_lo + 1)))
		case " $PICKED " in *" $_fp_port "*) continue ;; esac
		if ! port_listening "$_fp_port"; then
			PICKED="$PICKED $_fp_port"
			printf -v "$1" '%s' "$_fp_port"
			return 0
		fi
	done
	die "no free port found"
}

# Aligns tab-separated lines into columns (like column -t, which Debian ships in an optional
# package).
table() {
	awk -F'\t' '{ for (i = 1; i <= NF; i++) { c[NR, i] = $i; if (length($i) > w[i]) w[i] = length($i) }
		if (NF > n) n = NF }
		END { for (r = 1; r <= NR; r++) { l = ""; for (i = 1; i <= n; i++) l = l sprintf("%-*s", w[i] + 2, c[r, i]); sub(/ +$/, "", l); print l } }'
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.5 s until it succeeds.
wait_for() {
	local secs=$1 what=$2 deadline
	shift 2
	deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { log "timed out after ${secs}s waiting for $what"; return 1; }
		sleep 0.5
	done
}

# Starts a daemon in its own session (it survives the caller's terminal and Ctrl-C once `up`
# has returned), logs to $STATE/logs/NAME.log, records its pid in $STATE/pids/NAME.pid.
start_daemon() {
	local name=$1
	shift
	mkdir -p "$STATE/logs" "$STATE/pids"
	setsid "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$STATE/pids/$name.pid"
	sleep 0.2
	if ! kill -0 "$(cat "$STATE/pids/$name.pid")" 2>/dev/null; then
		tail -n 20 "$STATE/logs/$name.log" >&2
		die "$name exited at start (log: $STATE/logs/$name.log)"
	fi
}

# Stops a daemon by its pid file: SIGTERM, up to $2 seconds (default 15), then SIGKILL. Only
# that pid (and its session, which setsid made its own) is signalled.
stop_daemon() {
	local name=$1 f="$STATE/pids/$1.pid" pid i
	[ -f "$f" ] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 $((${2:-15} * 2))); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$name (pid $pid) ignored SIGTERM; killing"
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
			sleep 0.5
		fi
	fi
	rm -f "$f"
}

# webhook_launch NAME PORT HEALTH_PORT BINARY [FLAG...]: starts `BINARY serve` as daemon NAME with
# the suite's flags (the cluster's certificates and kubeconfig, $THRESHOLD, enforce, the exempt
# namespace, a client certificate required on the admission route from the API server's CN,
# $GMG_WEBHOOK_ARGS) plus FLAG...; returns once the process runs (not once it is ready).
# Needs load_cluster_env. The one definition of the webhook's command line: cluster.sh starts the
# webhook with it, e2e test 12 its extra replicas.
webhook_launch() {
	local name=$1 port=$2 health=$3 bin=$4
	shift 4
	echo "---- $(date -u +%FT%TZ) start" >>"$STATE/logs/$name.log"
	# shellcheck disable=SC2086 # GMG_WEBHOOK_ARGS is a list of flags
	start_daemon "$name" "$bin" serve \
		--listen "127.0.0.1:$port" \
		--tls-cert-file "$PKI/webhook.crt" --tls-key-file "$PKI/webhook.key" \
		--health-listen "127.0.0.1:$health" \
		--kubeconfig "$STATE/webhook.kubeconfig" \
		--threshold "$THRESHOLD" --mode enforce \
		--exempt-namespace "$EXEMPT_NAMESPACE" \
		--client-ca-file "$PKI/webhook-ca.crt" --client-auth-routes admission \
		--client-allowed-names kube-apiserver \
		--log-level info ${GMG_WEBHOOK_ARGS:-} "$@"
}

# grant_reservations NAME: a Role and RoleBinding NAME that let the webhook's identity keep its
# shared reservation records (Leases) in its namespace, nowhere else (what the chart grants).
# Needs load_cluster_env.
grant_reservations() {
	kc apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: $1, namespace: $WEBHOOK_NAMESPACE}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: $1, namespace: $WEBHOOK_NAMESPACE}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: $1}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: gpu-memory-guard}]
EOF
}

daemon_alive() { [ -f "$STATE/pids/$1.pid" ] && kill -0 "$(cat "$STATE/pids/$1.pid")" 2>/dev/null; }

# Per-node GPU memory as the API shows it (never as the webhook reports it): one JSON line per
# GPU node, see usage.jq. $1 = default threshold (the webhook's --threshold); $2 = a node name:
# that node's line only, from the pods the API lists with spec.nodeName=$2 (the same figures,
# without reading every pod of a large cluster).
cluster_usage() {
	local threshold=${1:-$DEFAULT_THRESHOLD} node=${2:-} tmp sel=()
	[ -z "$node" ] || sel=(--field-selector "spec.nodeName=$node")
	tmp=$(mktemp -d)
	kc get nodes -o json >"$tmp/nodes.json" && kc get pods -A "${sel[@]}" -o json >"$tmp/pods.json" &&
		jq -nc --argjson default_threshold "$threshold" --slurpfile nodes "$tmp/nodes.json" \
			--slurpfile pods "$tmp/pods.json" -f "$E2E_DIR/usage.jq" | jq -c --arg n "$node" 'select($n == "" or .node == $n)'
	local rc=$?
	rm -rf "$tmp"
	return $rc
}

gib() { awk -v b="$1" 'BEGIN { printf "%.1fGi", b / 1073741824 }'; }
