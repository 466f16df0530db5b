# Two commands matter: `make demo` and `make test`. Both set everything up first
# (Debian packages, .venv, the package and its C fast path) and are idempotent.
SHELL := /bin/bash
PY := .venv/bin/python
PIP := .venv/bin/pip
APT_PKGS := iproute2 nftables iperf3 ethtool tcpdump gcc python3-venv python3-dev libffi-dev \
	clang libbpf-dev bpftool tshark valgrind
APT_CMDS := ip nft iperf3 ethtool tcpdump gcc clang bpftool tshark dumpcap reordercap editcap valgrind
# python3 must be able to make a venv (ensurepip) and compile the cffi extension (Python.h)
PY_OK := import ensurepip, os, sysconfig; assert os.path.exists(sysconfig.get_paths()['include'] + '/Python.h')
NATIVE_SRC := $(wildcard csrc/*.c csrc/*.h csrc/*.py mrc_transport/protocol/*.py \
	mrc_transport/protocol/cc/*.py) setup.py
# pyproject.toml's [build-system] requires: the editable install builds in the venv
BUILD_REQS := "setuptools>=77" wheel "cffi>=1.16" "mypy>=1.8"
PYTEST_ARGS ?=

.PHONY: all setup apt venv native fastpath core test lint typecheck unit demo clean bench

all: setup

setup: apt venv native

# Install Debian packages only when a command is missing, so a second run is instant.
# tshark (lab capture, the dissector's tests) asks whether non-root users may capture:
# no, preseeded, so the install never waits for an answer (the lab runs as root anyway).
apt:
	@missing=""; for c in $(APT_CMDS); do command -v $$c >/dev/null 2>&1 || missing=1; done; \
	python3 -c "$(PY_OK)" >/dev/null 2>&1 || missing=1; \
	test -f /usr/include/bpf/bpf_helpers.h || missing=1; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $(APT_PKGS)"; \
	  if [ "$$(id -u)" != 0 ]; then echo "make: run as root to install $(APT_PKGS)" >&2; exit 2; fi; \
	  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS) >/dev/null; \
	fi

venv: .venv/.stamp-installed

# The editable install builds the native parts too (setup.py): the C fast path and the
# protocol core compiled by mypyc, in place (mrc_transport/_fastpath*.so,
# mrc_transport/_compiled/); the .py files stay the reference that MRC_PUREPYTHON=1 runs.
.venv/.stamp-installed: pyproject.toml setup.py
	@test -x $(PY) || python3 -m venv .venv
	$(PIP) install -q --upgrade pip $(BUILD_REQS)
	@echo "installing, and building the C fast path and the compiled core (about a minute)"
	$(PIP) install -q --no-build-isolation -e '.[dev]'
	@touch $@ .venv/.native-by-install

# After an edit, the same build again (setup.py build_ext, in place), unless the install
# just made it: the stamp rebuilds it, and the test suite refuses a compiled core older
# than its sources. The log is shown only if the build fails.
native: .venv/.stamp-native
fastpath core: native

.venv/.stamp-native: .venv/.stamp-installed $(NATIVE_SRC)
	@if [ -f .venv/.native-by-install ]; then rm .venv/.native-by-install; else \
		echo "building the C fast path and the compiled core (mypyc, about a minute)"; \
		mkdir -p build && $(PY) setup.py -q build_ext --inplace > build/native.log 2>&1 \
		|| { cat build/native.log; exit 1; }; fi
	@touch $@

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

typecheck: setup
	.venv/bin/mypy

# The suite runs with the native backend required (the C fast path and the compiled core;
# a missing build is an error, not a silent fallback), then the tests whose code the backend
# switch changes run again on the pure-Python reference: the codec, burst IO, the protocol
# core, the endpoint, real transfers on a lab. The rest (labs, CLI, demos) does not depend
# on it, and the native run already checks C against Python and the compiled core against
# its source (tests/unit/test_fastpath.py, tests/sim/test_sim_twins.py).
PURE_TESTS := tests/unit/test_backend.py tests/unit/test_batchio*.py tests/unit/test_codec.py \
	tests/unit/test_compiled_core.py tests/unit/test_data_run.py tests/unit/test_frozen.py \
	tests/unit/test_hand_over.py tests/unit/test_io_endpoint.py tests/unit/test_protocol_*.py \
	tests/unit/test_scapy_crosscheck.py tests/unit/test_wireshark_dissector.py \
	tests/sim/test_sim_trim.py tests/lab/test_perf.py::test_transfer_sizes_verified \
	tests/lab/test_perf.py::test_cut_mid_transfer_still_verified tests/lab/test_reverse_evs.py

test: setup lint typecheck
	MRC_PUREPYTHON=0 .venv/bin/pytest -q $(PYTEST_ARGS)
	MRC_PUREPYTHON=1 .venv/bin/pytest -q $(PURE_TESTS) $(PYTEST_ARGS)

unit: setup
	.venv/bin/pytest -q tests/unit tests/sim $(PYTEST_ARGS)

demo: setup
	.venv/bin/mrc demo failover --out demo-out

bench: setup
	$(PY) bench/codec.py

# The last two patterns are builds placed beside the sources by older versions of the
# build.
clean:
	rm -rf .venv build *.egg-info mrc_transport/_fastpath*.so mrc_transport/_fastpath.c
	rm -rf mrc_transport/_compiled
	rm -f mrc_transport/_core__mypyc*.so
	find mrc_transport/protocol -name "*.so" -delete
