#!/usr/bin/env bash
# Run the libFuzzer targets of test/fuzz, each for SECONDS, in parallel lanes (GMG_FUZZ_JOBS,
# default nproc: each lane takes the next target when its last one ends, so the wall time is
# about targets / lanes x SECONDS; each target still gets its SECONDS on a core of its own).
#   test/fuzz/run.sh BUILD_DIR SECONDS [TARGET...]     (targets: all when none given)
# BUILD_DIR is a GMG_FUZZ=ON build (make fuzz-build). Each target starts from its seeds
# (test/data files that fit it, and test/fuzz/seeds/TARGET) and keeps what it finds in
# BUILD_DIR/fuzz-corpus/TARGET for the next run; a crash, leak, sanitizer report or broken
# property leaves the input in BUILD_DIR/fuzz-artifacts/ and fails the run. One summary line per
# target (executions, corpus size, coverage), the full libFuzzer log in BUILD_DIR/fuzz-logs/.
set -euo pipefail
build=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../data" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(quantity review kubeconfig watch extender record gpupolicy execcred engine draslice
	draclaim)

# Seeds from test/data for the targets that read the same documents.
seed() {
	local t=$1 dir=$2 f
	case $t in
	review) cp "$data"/review-*.json "$dir"/ ;;
	draslice) cp "$data"/dra/slice-*.json "$dir"/ ;;
	draclaim) cp "$data"/dra/claim-*.json "$data"/dra/pod-*.json "$dir"/ ;;
	extender)
		# First byte: 0 filter, 1 prioritize.
		for f in "$data"/extender-args-*.json; do
			{ printf '0'; cat "$f"; } >"$dir/filter-$(basename "$f")"
			{ printf '1'; cat "$f"; } >"$dir/prioritize-$(basename "$f")"
		done
		;;
	watch)
		# The node and its pods as ADDED events (first two bytes: cap, no cuts).
		{
			printf '\377\000'
			jq -c '{type:"ADDED",object:.}' "$data/node-gpu-node-a.json"
			jq -c '.items[] | {type:"MODIFIED",object:.}' "$data/podlist-gpu-node-a.json"
		} >"$dir/from-test-data"
		;;
	esac
	if [ -d "$here/seeds/$t" ]; then cp "$here/seeds/$t"/* "$dir"/; fi
}

dicts() {
	case $1 in
	quantity) echo quantity ;;
	review) echo json review quantity ;;
	extender) echo json extender quantity ;;
	watch) echo json watch ;;
	record) echo json record ;;
	gpupolicy) echo json gpupolicy ;;
	engine) echo engine ;;
	kubeconfig) echo kubeconfig ;;
	execcred) echo json ;;
	draslice | draclaim) echo json dra quantity ;;
	esac
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# fuzz_one TARGET: runs it; its summary line goes to BUILD_DIR/fuzz-logs/TARGET.summary, exit
# status 1 if it failed.
fuzz_one() {
	local t=$1 bin seeds corpus dict log rc execs cov files d
	bin="$build/test/fuzz/fuzz_$t"
	seeds="$build/fuzz-seeds/$t"
	corpus="$build/fuzz-corpus/$t"
	rm -rf "$seeds"
	mkdir -p "$seeds" "$corpus"
	seed "$t" "$seeds"
	dict="$build/fuzz-seeds/$t.dict"
	for d in $(dicts "$t"); do cat "$here/dict/$d.dict"; done >"$dict"
	log="$build/fuzz-logs/$t.log"
	rc=0
	"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
		-print_final_stats=1 -dict="$dict" -artifact_prefix="$build/fuzz-artifacts/$t-" \
		"$corpus" "$seeds" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || true)
	files=$(find "$corpus" -type f | wc -l)
	if [ "$rc" -ne 0 ]; then
		{
			echo "fuzz_$t: FAILED (exit $rc) after ${execs:-?} executions; log $log:"
			grep -E -A30 'ERROR:|fuzz property broken|runtime error' "$log" | head -60
		} >"$build/fuzz-logs/$t.summary"
		return 1
	fi
	echo "fuzz_$t: ok, ${seconds}s, ${execs:-?} executions, coverage ${cov:-?}, corpus $files files" \
		>"$build/fuzz-logs/$t.summary"
}

mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
for t in "${targets[@]}"; do
	[ -x "$build/test/fuzz/fuzz_$t" ] || { echo "fuzz: $build/test/fuzz/fuzz_$t missing (make fuzz-build)" >&2; exit 2; }
	rm -f "$build/fuzz-logs/$t.summary"
done
lanes=${GMG_FUZZ_JOBS:-$(nproc)}
[ "$lanes" -ge 1 ] 2>/dev/null || lanes=1
# Lane L runs targets L, L + lanes, L + 2 x lanes, ... one after the other.
lane_pids=()
for ((l = 0; l < lanes && l < ${#targets[@]}; l++)); do
	(
		for ((k = l; k < ${#targets[@]}; k += lanes)); do
			fuzz_one "${targets[k]}" || true
		done
	) &
	lane_pids+=($!)
done
trap 'kill "${lane_pids[@]}" 2>/dev/null' INT TERM
wait "${lane_pids[@]}"
# The summary lines in the targets' order; a target without one did not finish (killed lane).
failed=""
for t in "${targets[@]}"; do
	s="$build/fuzz-logs/$t.summary"
	if [ -s "$s" ]; then
		cat "$s"
		grep -q "^fuzz_$t: ok," "$s" || failed="$failed $t"
	else
		echo "fuzz_$t: FAILED (no result: its lane was stopped)"
		failed="$failed $t"
	fi
done
if [ -n "$failed" ]; then
	echo "fuzz: failed:$failed (inputs in $build/fuzz-artifacts/)" >&2
	exit 1
fi
