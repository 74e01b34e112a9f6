# gpu-memory-guard: the two commands in the README are `make demo` and `make test`.
# Both install their own dependencies (Debian 12, root).
BUILD      ?= build
BUILD_ASAN ?= build-asan
JOBS       ?= $(shell nproc)
BIN         = $(BUILD)/gpu-memory-guard

.PHONY: all deps build build-asan test test-fast unit-integration asan e2e install-proof \
        demo down bench bench-extender format check-format clean

all: build

deps:
	@bash .ci/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGMG_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# Unit + integration tests on the release build.
unit-integration: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan: build-asan
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

check-format: deps
	@bash .ci/check-format.sh

# End-to-end suite against a real kube-apiserver (first run builds Kubernetes: 10-25 min).
e2e: build
	bash test/e2e/run.sh $(abspath $(BIN))

# Install paths (manifests, Helm chart, certs) proven against the real API server.
install-proof: build
	bash test/e2e/install-proof.sh $(abspath $(BIN))

# Fast loop: everything but the real control plane.
test-fast: check-format unit-integration asan

# Every test.
test: test-fast e2e install-proof

demo: build
	bash test/e2e/demo.sh $(abspath $(BIN))

down:
	bash test/e2e/cluster.sh down

# Benchmark (not a test): installs nginx, the reference it measures beside the webhook.
# BENCH_ARGS: gmg-bench options, e.g. BENCH_ARGS="--nodes 500 --pods 15000 --gpu-pods 2000".
bench: build
	bash test/bench/run-bench.sh $(BUILD)/test/bench/gmg-bench $(abspath $(BIN)) $(BENCH_ARGS)

# The scheduler extender's benchmark (gmg-bench --extender; docs/benchmark.md).
bench-extender: build
	bash test/bench/run-bench.sh $(BUILD)/test/bench/gmg-bench $(abspath $(BIN)) --extender \
	    $(BENCH_ARGS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
