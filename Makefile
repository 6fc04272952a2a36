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

# ansible-test needs the collection at ansible_collections/<ns>/<name>: test a copy of the tracked files.
SANITY_ROOT ?= build/sanity
SANITY_DIR := $(SANITY_ROOT)/ansible_collections/gpuprov/cloud
sanity: dev
	pipver=$$($(BIN)/python -c "import re,ansible_test._internal.python_requirements as r,inspect; print(re.search(r\"pip='([0-9.]+)'\", inspect.getsource(r)).group(1))"); \
	  cache=$$HOME/.ansible/test/cache/get_pip_$${pipver//./_}.py; \
	  [ -f $$cache ] || { mkdir -p $$(dirname $$cache) && cp tests/tools/offline_get_pip.py $$cache; }
	rm -rf $(SANITY_ROOT) && mkdir -p $(SANITY_DIR)
	git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C $(SANITY_DIR)
	cd $(SANITY_DIR) && git init -q && git add -A  # its own repo: the outer one ignores build/
	cd $(SANITY_DIR) && $(CURDIR)/$(BIN)/ansible-test sanity --python 3.11 --color no

lint: dev
	$(BIN)/ansible-lint --profile production
