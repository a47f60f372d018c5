# Thin wrapper over CMake. `make run` builds and runs the main job (loopback
# transfer benchmark); `make check` runs every test, plain and with ASan+UBSan,
# then each fuzz harness for FUZZ_SECONDS (`make fuzz`). Every phase of
# `make check` runs even when an earlier one failed; the end lists every
# failure of every phase (scripts/check-summary.sh) and the exit status is
# non-zero when there was one.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
# libFuzzer runs (tests/fuzz, docs/FUZZING.md): clang, each harness for
# FUZZ_SECONDS, FUZZ_JOBS at a time.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZ_JOBS  ?= 2
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
# NIXL for the plugin (src/nixl) and its tests: the prefix
# scripts/build-testdeps.sh built, when it did (nothing is built here).
NIXL_PREFIX ?= $(shell ./scripts/build-testdeps.sh --prefix 2>/dev/null)
NIXL_ARGS  := $(if $(NIXL_PREFIX),-DNIXL_PREFIX=$(NIXL_PREFIX))

.PHONY: all build run test test-asan test-tsan fuzz check clean format

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(NIXL_ARGS) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./scripts/run-main.sh $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTPX_SANITIZE=ON $(NIXL_ARGS) $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

# ThreadSanitizer (docs/RELIABILITY.md): no NIXL, Python or install tests
# (an instrumented libtpx.so does not load into uninstrumented hosts).
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(JOBS)

# Only the library and the harnesses are built here (target fuzzers).
fuzz:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_FUZZ=ON -DTPX_CUDA=OFF \
	  -DTPX_FUZZ_SECONDS=$(FUZZ_SECONDS) $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	ctest --test-dir $(FUZZ_BUILD) -L fuzz --output-on-failure -j $(FUZZ_JOBS)

# Each phase runs whatever the one before it did; its ctest list of failures
# is cleared first, so the summary names this run's failures only.
CHECK_PHASES ?= test test-asan fuzz
# Each phase's build directory, named once.
DIR_test      = $(BUILD)
DIR_test-asan = $(ASAN_BUILD)
DIR_test-tsan = $(TSAN_BUILD)
DIR_fuzz      = $(FUZZ_BUILD)
check:
	@rm -f $(foreach p,$(CHECK_PHASES),$(DIR_$(p))/Testing/Temporary/LastTestsFailed.log)
	@failed=; \
	for phase in $(CHECK_PHASES); do \
	  $(MAKE) --no-print-directory $$phase || failed="$$failed $$phase"; \
	done; \
	./scripts/check-summary.sh "$$failed" $(foreach p,$(CHECK_PHASES),$(p)=$(DIR_$(p)))

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.cu')

clean:
	rm -rf $(foreach p,test test-asan test-tsan fuzz,$(DIR_$(p)))
