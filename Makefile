# triton-npu — the two commands of the README are `make demo` and `make test`.
# Everything they need is installed here, into .venv and target/, from package registries.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
CARGO ?= cargo

.PHONY: demo test venv develop stage-cli wheel harness bench trials lint rust-test python-test fmt doctor clean redis-server uuid-dev

include mk/xrt.mk

## demo: build, install into .venv and run the vector-add example (on the conformance
## harness when this machine has no NPU and toolchain, saying so).
demo: develop
	bash scripts/demo.sh

## test: everything — formatting, lints, Rust tests, the harness, Python tests.
test: lint rust-test xrt-shim-check python-test

venv: $(VENV)/.installed
# torch comes with its CUDA libraries (PyPI has no CPU-only build): about 6 GB installed, and
# pip holds the downloaded wheels (about 3.5 GB) until it has installed them all. Without its
# wheel cache (--no-cache-dir) that is the whole need; check for it first, so that a full disk
# is said at once rather than as an OSError halfway through the downloads.
VENV_NEEDS_GIB := 10
$(VENV)/.installed: pyproject.toml Makefile
	@avail=$$(df -P -BG . | awk 'NR==2 {sub("G","",$$4); print $$4}'); \
	if [ -n "$$avail" ] && [ "$$avail" -lt $(VENV_NEEDS_GIB) ]; then \
		echo "make: creating $(VENV) needs about $(VENV_NEEDS_GIB) GiB free (torch and its CUDA libraries); $$avail GiB free on $$(df -P . | awk 'NR==2 {print $$6}')" >&2; \
		exit 1; fi
	python3 -m venv $(VENV)
	$(PIP) install -q --no-cache-dir --upgrade pip
	$(PIP) install -q --no-cache-dir "maturin>=1.16,<2" "pytest>=8" "ruff>=0.6" "triton>=3.9,<3.10" numpy torch ml-dtypes \
		redis iree-base-compiler
	touch $@

## develop: build the native module (release), the standalone `triton-npu` binary and the
## XRT shim (when XRT headers are found), and install the package into .venv. The shim goes to
## python/triton_npu/lib/, where the XRT runtime looks for it and from where wheels include
## it; the binary to target/wheel-data/scripts/, from where wheels carry it into bin/
## (maturin builds the extension only: the binary is staged first, as `pip install .` does).
develop: venv xrt-shim stage-cli
	mkdir -p python/triton_npu/lib
	if [ -f target/xrt-shim/libtriton_npu_xrt.so ]; then \
		cp target/xrt-shim/libtriton_npu_xrt.so python/triton_npu/lib/; fi
	VIRTUAL_ENV=$(abspath $(VENV)) PATH=$(abspath $(VENV))/bin:$$PATH \
		$(VENV)/bin/maturin develop --profile dist -q
	@test -x $(VENV)/bin/triton-npu && head -c4 $(VENV)/bin/triton-npu | grep -q ELF || { \
		echo "make develop: $(VENV)/bin/triton-npu is not the native binary" >&2; exit 1; }

## stage-cli: build the standalone `triton-npu` binary into target/wheel-data/scripts/.
stage-cli: venv
	$(PY) scripts/build_backend/stage_cli.py

## wheel: the wheel (target/wheels/), with the native module, the binary and the XRT shim.
wheel: venv xrt-shim stage-cli
	mkdir -p python/triton_npu/lib
	if [ -f target/xrt-shim/libtriton_npu_xrt.so ]; then \
		cp target/xrt-shim/libtriton_npu_xrt.so python/triton_npu/lib/; fi
	$(VENV)/bin/maturin build --profile dist -q

## harness: build the conformance harness into target/harness (tests only).
harness: uuid-dev
	$(CARGO) build --release -q $(addprefix -p ,$(shell for d in tests/harness/*/Cargo.toml; do sed -n 's/^name = "\(.*\)"/\1/p' $$d | head -n1; done))
	bash tests/harness/install.sh

lint: venv
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -q -- -D warnings
	$(VENV)/bin/ruff check python tests examples benches scripts
	$(VENV)/bin/ruff format --check python tests examples benches scripts

rust-test:
	@if $(CARGO) nextest --version >/dev/null 2>&1; then \
		$(CARGO) nextest run --workspace --no-fail-fast; \
	else \
		$(CARGO) test --workspace --no-fail-fast; \
	fi
	$(CARGO) test --workspace --doc -q

## redis-server: Debian's redis-server, for the remote-cache tests (they start their own
## server on 127.0.0.1 with a free port).
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing Debian's redis-server for the remote-cache tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }

## uuid-dev: <uuid/uuid.h>, which XRT's headers include (the XRT shim and the harness's C++
## XRT stand-in, tests/harness/xrt-coreutil, are compiled against them).
uuid-dev:
	@test -f /usr/include/uuid/uuid.h || { \
		echo "installing Debian's uuid-dev for XRT's headers"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq uuid-dev; }

python-test: develop harness redis-server
	$(VENV)/bin/pytest -q

## bench: benchmarks; each prints `BENCH <name> <value> <unit>` lines. Only the bench targets
## (crates/<crate>/benches/<name>.rs, and the harness device's, tests/harness/<crate>/benches/)
## are built: `cargo bench --workspace` would also build every crate's unit tests in release
## mode, for minutes. The launch benchmark, the one most sensitive to the machine's speed,
## goes first: in both runs that timed it last, right after the harness matmuls had kept both
## cores busy, the 2-core development VM ran it at about half speed.
BENCH_TARGETS := $(foreach f,$(wildcard crates/*/benches/*.rs tests/harness/*/benches/*.rs),-p $(shell sed -n 's/^name = "\(.*\)"/\1/p' $(dir $(f))../Cargo.toml | head -n1) --bench $(basename $(notdir $(f))))
bench: develop harness
	set -a && . target/harness/env.sh && set +a && $(PY) benches/launch_bench.py
	$(PY) benches/cli_start_bench.py
	$(PY) benches/triton_cache_bench.py
	set -o pipefail && $(CARGO) bench -q $(BENCH_TARGETS) 2>&1 | tee target/bench.log | grep '^BENCH'

## trials: the reliability trials (concurrency, SIGKILL mid-build, cache corruption, bad
## launch inputs, leaks, fuzzing), ~15 min; not part of `make test` (scripts/trials/).
trials: develop harness
	bash scripts/trials/run.sh

fmt:
	$(CARGO) fmt --all
	$(VENV)/bin/ruff format python tests examples benches scripts

doctor: develop
	$(VENV)/bin/triton-npu doctor

clean:
	rm -rf $(VENV) target/harness
