# The two quick-start commands (README) and what CI runs. Each target installs what it needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test check lint install install-test browser-deps screenshots samples

# pip prints each package it fetches and installs (no silent minute on a fresh machine).
PIP_INSTALL := $(BIN)/pip install --disable-pip-version-check --progress-bar on

$(BIN)/python:
	@echo "== creating $(VENV) (Python virtual environment)"
	$(PY) -m venv $(VENV)
	$(PIP_INSTALL) --upgrade pip

install: $(BIN)/python
	@echo "== installing tilescope and its dependencies into $(VENV) (about a minute on a fresh machine)"
	$(PIP_INSTALL) -e .

install-test: $(BIN)/python
	@echo "== installing tilescope with its test dependencies into $(VENV)"
	$(PIP_INSTALL) -e ".[test]"

# Debian's Chromium + ChromeDriver for the browser tests (needs root or sudo; skipped if present).
browser-deps:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	else SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; fi

# Quick start 1: make the sample reports and open the viewer (Compare: pick mlp_batch64 in the navbar).
demo: install
	@echo "== making the sample reports and starting the viewer"
	$(BIN)/tilescope demo

# Quick start 2: install everything and run the whole test suite (browser tests included). Two pytest
# processes at once: the browser tests (mostly waiting on Chromium and the viewer) and, niced so
# the browser tests' timing waits keep their CPU, the rest, each in its own order; the browser
# tests' output is printed after the rest's. 19.5 minutes on 2 cores against 26 in one process
# (2026-11-29). SERIAL=1 runs them in one process. A background job of a non-interactive shell
# ignores Ctrl-C: the browser tests run in their own session (setsid) and the trap ends that whole
# process group (pytest, its viewers and Chromium) with the recipe.
test: install-test browser-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	@if [ -n "$(SERIAL)" ]; then exec $(BIN)/python -m pytest -q; fi; \
	log=$$(mktemp); echo "== the browser tests run alongside, their output ($$log) after the others'"; \
	setsid $(BIN)/python -m pytest -q -p no:cacheprovider -m browser > $$log 2>&1 & browser=$$!; \
	trap 'kill -- -$$browser 2>/dev/null; rm -f $$log' EXIT; trap 'exit 130' INT TERM; \
	nice -n 15 $(BIN)/python -m pytest -q -m "not browser"; rest=$$?; \
	wait $$browser; status=$$?; echo "== the browser tests"; cat $$log; \
	[ $$rest -eq 0 ] && [ $$status -eq 0 ]

# The inner loop while changing code (about 2 minutes on 2 cores): ruff and the unit tier, i.e. every
# test but the slow ones, the browser ones and the ONNX conformance cases (markers in pyproject.toml).
# Installs only into a virtualenv without pytest; `make test` runs everything.
check: $(BIN)/pytest
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -m "not slow and not browser and not conformance"

$(BIN)/pytest: | $(BIN)/python
	$(PIP_INSTALL) -e ".[test]"

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

samples: install
	$(BIN)/tilescope demo --no-serve

screenshots: install-test browser-deps
	$(BIN)/python docs/make_screenshots.py
	$(BIN)/python docs/make_compare_screenshots.py
