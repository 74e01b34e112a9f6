#!/usr/bin/env bash
# Runs Makefile targets as timed steps (`make test` calls it with its steps):
#   .ci/steps.sh STEP...
# A STEP is a target, or lanes joined by "+" that run at the same time, each lane one target or
# several joined by "," run one after the other: "e2e+install-proof,promql-check" runs e2e beside
# install-proof then promql-check. The first lane's output is shown as it comes; the other
# lanes' go to files (build/steps/NAME.log) and are printed, whole and in order, once the
# group is done. A group's lanes are started with `make -o build -o deps` (built just before,
# by `make build`), so that two cmake runs never share a build folder.
# Every step prints "step NAME: N s" (and "FAILED, exit R" when it failed), then, in parentheses,
# the CPU time its processes used (user + system, from /proc/PID/stat's cutime and cstime) and how
# busy the machine's cores were meanwhile (from /proc/stat, everything on the machine: the tools
# built in the background too); the end prints each step's line, the total and the load average. The steps stop at the first failed one (a group
# runs to its end first); the exit status is make's.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logs=${GMG_STEPS_LOGS:-build/steps}
mkdir -p "$logs"
start=$SECONDS
summary=""
rc=0

tck=$(getconf CLK_TCK)
ncpu=$(nproc)
# children_ticks PID: CPU ticks (user + system) of process PID's waited-for children so far (PID:
# the calling shell's $BASHPID, read before the $(...) that calls this, which is a subshell).
children_ticks() {
	local f
	read -r -a f <"/proc/$1/stat"
	echo $((f[15] + f[16]))
}
# machine_ticks: "busy total" ticks of every CPU since boot (/proc/stat's first line; busy is all
# but idle and iowait).
machine_ticks() {
	local cpu u n s idle io rest
	read -r cpu u n s idle io rest </proc/stat
	local irq sirq steal
	read -r irq sirq steal _ <<<"$rest"
	echo "$((u + n + s + irq + sirq + steal)) $((u + n + s + idle + io + irq + sirq + steal))"
}
# cpu_note PID C0 M0: "CPU N s; cores busy P%" since children_ticks C0 of PID and machine_ticks M0.
cpu_note() {
	local pid=$1 c0=$2 b0=$3 t0=$4 c1 b1 t1
	c1=$(children_ticks "$pid")
	read -r b1 t1 <<<"$(machine_ticks)"
	local pct=0
	[ "$t1" -gt "$t0" ] && pct=$(((b1 - b0) * 100 / (t1 - t0)))
	echo "CPU $(((c1 - c0) / tck)) s; $ncpu cores busy $pct%"
}

# step NAME [MAKE_ARGS...]: make NAME, timed; its status is make's.
step() {
	local name=$1 t0=$SECONDS r=0 me=$BASHPID c0 m0
	shift
	c0=$(children_ticks "$me")
	m0=$(machine_ticks)
	$MAKE --no-print-directory "$@" "$name" || r=$?
	local note
	note=$(cpu_note "$me" "$c0" $m0)
	if [ "$r" -eq 0 ]; then
		echo "step $name: $((SECONDS - t0)) s ($note)"
	else
		echo "step $name: $((SECONDS - t0)) s, FAILED, exit $r ($note)"
	fi
	return "$r"
}
# lane TARGETS(comma-separated) [MAKE_ARGS...]: them one after the other, up to the first failed.
lane() {
	local targets=$1 t
	shift
	IFS=, read -r -a t <<<"$targets"
	for name in "${t[@]}"; do
		step "$name" "$@" || return
	done
}
# A step's "step NAME: ..." line, for the summary at the end.
record() { summary="$summary$(grep -h '^step ' "$@" 2>/dev/null | sed 's/^step /  /')"$'\n'; }

main=$BASHPID
c_start=$(children_ticks "$main")
m_start=$(machine_ticks)
for s in "$@"; do
	case $s in
	*+*)
		IFS=+ read -r -a lanes <<<"$s"
		r=0
		step build >"$logs/build.log" 2>&1 || r=$?
		cat "$logs/build.log"
		record "$logs/build.log"
		if [ "$r" -eq 0 ]; then
			t0=$SECONDS
			pids=()
			for ((i = 1; i < ${#lanes[@]}; i++)); do
				lane "${lanes[i]}" -o build -o deps >"$logs/lane-$i.log" 2>&1 </dev/null &
				pids+=($!)
			done
			echo "steps: ${lanes[*]:1} run beside ${lanes[0]}, their output below when done"
			lane "${lanes[0]}" -o build -o deps 2>&1 | tee "$logs/lane-0.log"
			r=${PIPESTATUS[0]}
			record "$logs/lane-0.log"
			for ((i = 1; i < ${#lanes[@]}; i++)); do
				wait "${pids[i - 1]}" || r=$?
				echo "---- ${lanes[i]} (ran beside ${lanes[0]}): output ----"
				cat "$logs/lane-$i.log"
				echo "---- ${lanes[i]}: end ----"
				record "$logs/lane-$i.log"
			done
			echo "step ${s}: $((SECONDS - t0)) s (together)"
		fi
		;;
	*)
		step "$s" 2>&1 | tee "$logs/step.log"
		r=${PIPESTATUS[0]}
		record "$logs/step.log"
		;;
	esac
	if [ "$r" -ne 0 ]; then
		rc=$r
		break
	fi
done
echo "steps (seconds each; the lanes of a group ran at the same time):"
printf '%s' "$summary"
echo "steps: total $((SECONDS - start)) s ($(cpu_note "$main" "$c_start" $m_start)); load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$rc"
