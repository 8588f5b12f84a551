# The two quick-start commands (README) and what CI runs. Each target installs what it needs.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install install-test browser-deps screenshots samples

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q -e ".[test]"

# Debian's Chromium + ChromeDriver for the browser tests (needs root or sudo; skipped if present).
browser-deps:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	else SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; fi

# Quick start 1: make the sample reports and open the viewer.
demo: install
	$(BIN)/tilescope demo

# Quick start 2: install everything and run the whole test suite (browser tests included).
test: install-test browser-deps
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

samples: install
	$(BIN)/tilescope demo --no-serve

screenshots: install-test browser-deps
	$(BIN)/python docs/make_screenshots.py
	$(BIN)/python docs/make_compare_screenshots.py
