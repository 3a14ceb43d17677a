# skyprof - thin wrapper around CMake/Ninja. `make demo` and `make test` work on a fresh
# Debian 12 machine: both install missing packages first (scripts/bootstrap).
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
RELEASE := build/release
ASAN := build/asan
FUZZ := build/fuzz
# `make fuzz`: seconds per fuzz target, and how many targets run at once.
FUZZ_SECONDS ?= 600
FUZZ_JOBS ?= 1
# `make test`: the short mutation run of each fuzz target (ctest in build/fuzz).
FUZZ_TEST_SECONDS ?= 30

.PHONY: all bootstrap release asan fuzz-build test test-release test-asan test-fuzz fuzz demo bench \
	install deb wheel clean

all: release

bootstrap:
	@scripts/bootstrap

$(RELEASE)/build.ninja:
	cmake -S . -B $(RELEASE) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKP_SANITIZE=OFF

$(ASAN)/build.ninja:
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSKP_SANITIZE=ON

$(FUZZ)/build.ninja:
	cmake -S . -B $(FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DSKP_FUZZ=ON

release: bootstrap $(RELEASE)/build.ninja
	ninja -C $(RELEASE) -j $(JOBS)

asan: bootstrap $(ASAN)/build.ninja
	ninja -C $(ASAN) -j $(JOBS)

# The libFuzzer targets (clang, ASan+UBSan): tests/fuzz, cmake/SkpFuzz.cmake.
fuzz-build: bootstrap $(FUZZ)/build.ninja
	ninja -C $(FUZZ) -j $(JOBS)

test-release: release
	cd $(RELEASE) && ctest --output-on-failure -j $(JOBS)

test-asan: asan
	cd $(ASAN) && ctest --output-on-failure -j $(JOBS)

test-fuzz: fuzz-build
	cd $(FUZZ) && SKP_FUZZ_SECONDS=$(FUZZ_TEST_SECONDS) ctest --output-on-failure -j $(JOBS) --timeout 600

# Every test runs twice: optimised, then under ASan+UBSan; then each fuzz target mutates for
# FUZZ_TEST_SECONDS. ctest's summaries close the output.
test: test-release test-asan test-fuzz

# Each fuzz target for FUZZ_SECONDS (default 600), FUZZ_JOBS at once; logs in build/fuzz/fuzz-logs.
fuzz: fuzz-build
	cd $(FUZZ) && SKP_FUZZ_SECONDS=$(FUZZ_SECONDS) ctest --output-on-failure -L fuzzrun \
	    -j $(FUZZ_JOBS) --timeout $$(( $(FUZZ_SECONDS) + 600 ))

demo: release
	scripts/demo

bench: release
	scripts/bench

# Installed binaries find lib/libskyprof.so.0 relative to themselves ($ORIGIN/../lib): any PREFIX.
install: release
	cmake --install $(RELEASE) --prefix $(PREFIX)

# Debian package of skyprofd, the CLI, libskyprof and the UI with skyprofd.service (packaging/deb,
# docs/deploy.md): build/packages/skyprof_<version>_<arch>.deb. dpkg-deb only, no network.
deb: release
	packaging/deb/build-deb.sh $(RELEASE) build/packages

# The Python agent as a wheel for the system CPython 3.11 (Debian's pip/setuptools, no PyPI):
# build/packages/skyprof-<version>-cp311-cp311-linux_<arch>.whl; pip install it into a venv.
wheel: bootstrap
	packaging/build-wheel.sh build/packages

clean:
	rm -rf build
