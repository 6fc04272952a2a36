# gpuprov.cloud — the two commands a new user needs are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The collection is used in place through a symlink, so edits need no reinstall.
COLL_ROOT := build/collections
COLL_LINK := $(COLL_ROOT)/ansible_collections/gpuprov/cloud
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/$(COLL_ROOT)
export PYTHONPATH := $(CURDIR)/$(COLL_ROOT)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: venv dev demo test unit conformance integration lint sanity clean

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed

$(COLL_LINK):
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(CURDIR) $(COLL_LINK)

dev: venv $(COLL_LINK)

unit: dev
	$(BIN)/python -m pytest -q tests/unit

conformance: dev
	$(BIN)/python -m pytest -q tests/conformance

integration: dev
	$(BIN)/python -m pytest -q tests/integration

clean:
	rm -rf build $(VENV)
