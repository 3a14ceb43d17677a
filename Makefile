# skyprof - thin wrapper around CMake/Ninja. `make demo` and `make test` work on a fresh
# Debian 12 machine: both install missing packages first (scripts/bootstrap).
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
RELEASE := build/release
ASAN := build/asan

.PHONY: all bootstrap release asan test test-release test-asan demo bench install clean

all: release

bootstrap:
	@scripts/bootstrap

$(RELEASE)/build.ninja:
	cmake -S . -B $(RELEASE) -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKP_SANITIZE=OFF

$(ASAN)/build.ninja:
	cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSKP_SANITIZE=ON

release: bootstrap $(RELEASE)/build.ninja
	ninja -C $(RELEASE) -j $(JOBS)

asan: bootstrap $(ASAN)/build.ninja
	ninja -C $(ASAN) -j $(JOBS)

test-release: release
	cd $(RELEASE) && ctest --output-on-failure -j $(JOBS)

test-asan: asan
	cd $(ASAN) && ctest --output-on-failure -j $(JOBS)

# Every test runs twice: optimised, then under ASan+UBSan. ctest's summary closes the output.
test: test-release test-asan

demo: release
	scripts/demo

bench: release
	scripts/bench

install: release
	cmake --install $(RELEASE) --prefix $(PREFIX)

clean:
	rm -rf build
