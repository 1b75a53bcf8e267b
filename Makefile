# tiermem: one venv in the checkout, everything installed from the package registries.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# llama-cpp-python compiles llama.cpp (~4-10 min). Its wheel is built once per machine into
# this cache, from the pinned sdist, and reused by later installs on the same machine.
WHEELS ?= $(HOME)/.cache/tiermem/wheels
LLAMA_CPP_VERSION := 0.3.36

.PHONY: install demo test pytest lint format typecheck bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -U pip
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
		$(BIN)/python -m pip wheel -q --no-deps -w $(WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(BIN)/python -m pip install -q --find-links $(WHEELS) -e '.[dev]'
	$(BIN)/tiermem models install smollm2
	touch $@

demo: install
	$(BIN)/tiermem models install qwen0.5b
	$(BIN)/tiermem demo

# The whole check: lint, strict typing, and every test (the few real-model ones included).
test: lint typecheck pytest

pytest: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# mypy cannot follow setuptools' editable finder for a package-dir mapping, so it checks a
# tree of links laid out as the installed package is.
typecheck: install
	rm -rf build/typecheck && mkdir -p build/typecheck/tiermem
	for f in engine/*; do ln -s ../../../$$f build/typecheck/tiermem/; done
	for p in slm offline training; do ln -s ../../../$$p build/typecheck/tiermem/$$p; done
	MYPYPATH=build/typecheck $(BIN)/mypy -p tiermem

bench: install
	$(BIN)/tiermem bench mtm

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
