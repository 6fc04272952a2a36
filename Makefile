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

.PHONY: venv dev demo demo-down test test-cloud unit conformance integration lint typecheck sanity images molecule clean ee-context bench soak mutation

$(BIN)/.installed: requirements.txt requirements-dev.txt $(wildcard requirements/*.txt)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed

$(COLL_LINK):
	mkdir -p $(dir $(COLL_LINK))
	ln -sfn $(CURDIR) $(COLL_LINK)

dev: venv $(COLL_LINK)

# Everything CI runs. Tests that need the Docker engine run here too (CI has one).
# Unit and conformance tests are independent of each other and mostly wait on their fakes'
# sockets, so they run on more processes (UNIT_WORKERS) than there are cores. The integration
# tests drive real ansible-playbook runs, sshd, Docker and PostgreSQL, each in its own state
# directory, ports and names, on PYTEST_WORKERS processes; those that share the Docker engine
# (xdist_group "docker") or build the docs site ("docs") run on one worker, one at a time.
# UNIT_TESTS: the unit tests, the conformance suite (with the harnesses' own tests) and the tests of the fakes
# and of the soak's oracle, which live next to what they test.
UNIT_WORKERS ?= 4
PYTEST_WORKERS ?= 2
UNIT_TESTS := tests/unit tests/conformance tests/fakes tests/soak
# Per-test time limits (pytest-timeout): a test that hangs fails with its name instead of holding the run until
# CI's own limit. Several times the slowest test of each suite on a loaded 2-core machine (unit: the demo test,
# ~50 s; integration: the Galaxy install, ~4 min).
UNIT_TIMEOUT ?= 300
INTEGRATION_TIMEOUT ?= 900
test: dev images
	$(BIN)/python -m pytest -q -p no:cacheprovider --timeout=$(UNIT_TIMEOUT) -n $(UNIT_WORKERS) $(UNIT_TESTS)
	$(BIN)/python -m pytest -q -p no:cacheprovider --timeout=$(INTEGRATION_TIMEOUT) -n $(PYTEST_WORKERS) --dist loadgroup \
	  tests/integration
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory sanity
	$(MAKE) --no-print-directory ee-context

unit: dev
	$(BIN)/python -m pytest -q --timeout=$(UNIT_TIMEOUT) tests/unit tests/fakes tests/soak

# One cloud's tests (make test-cloud CLOUD=lambda): every test in UNIT_TESTS whose file, name or parameters name
# the cloud (pytest -k: test_lambda_*.py, test_owned_lambda.py, the conformance suite's [lambda], ...); E2E=1 adds
# its end-to-end tests from tests/integration (slower: real ansible-playbook runs).
CLOUD ?=
E2E ?=
test-cloud: dev $(if $(filter docker,$(CLOUD)),images)
	@[ -n "$(CLOUD)" ] || { echo "test-cloud: name the cloud, e.g. make test-cloud CLOUD=lambda"; exit 1; }
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(UNIT_WORKERS) -k $(CLOUD) $(UNIT_TESTS)
	$(if $(E2E),$(BIN)/python -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadgroup -k $(CLOUD) \
	  tests/integration)

conformance: dev images
	$(BIN)/python -m pytest -q --timeout=$(UNIT_TIMEOUT) tests/conformance

integration: dev images
	$(BIN)/python -m pytest -q --timeout=$(INTEGRATION_TIMEOUT) tests/integration

# The Docker test cloud's base image, built offline (debootstrap + docker import); quick when present.
images:
	@if docker info >/dev/null 2>&1; then bash scripts/build-base-image.sh; \
	  else echo "images: no Docker engine answers; Docker tests will skip"; fi

# A first look, on a fresh machine: a VM on the local cloud (an sshd on a loopback port), with only what running
# needs, installed the way docs/install.md tells a user to: ansible-core in .venv (make test adds its tools there
# later), the collection from its tarball into the project's own path (DEMO_COLLECTIONS: a gpuprov.cloud installed
# elsewhere, ~/.ansible/collections, is neither used nor overwritten), then the installed collection's
# requirements/local.txt. ansible.cfg points the commands the README shows, run from here, at DEMO_COLLECTIONS.
DEMO_NAME ?= demo
DEMO_COLLECTIONS ?= $(CURDIR)/build/demo/collections
DEMO_DIST ?= $(CURDIR)/build/demo/dist
DEMO_INSTALLED := $(DEMO_COLLECTIONS)/ansible_collections/gpuprov/cloud
DEMO_ENV := env -u PYTHONPATH ANSIBLE_COLLECTIONS_PATH=$(DEMO_COLLECTIONS)
# Where demo-sshd looks for sshd: Debian keeps it in /usr/sbin, which a user's PATH often lacks.
SSHD_SEARCH ?= $(PATH):/usr/sbin:/usr/local/sbin
# What the closing lines tell a user to run: ansible.cfg covers the default DEMO_COLLECTIONS, not another.
DEMO_CFG_NOTE := $(if $(filter $(CURDIR)/build/demo/collections,$(DEMO_COLLECTIONS)),,export ANSIBLE_COLLECTIONS_PATH=$(DEMO_COLLECTIONS); )

# ansible-core alone, when .venv has no Ansible yet (a dev venv already has it).
$(BIN)/ansible-playbook:
	@echo "demo: creating $(VENV) (python -m venv) and installing ansible-core into it (pip, about 20 s)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q --disable-pip-version-check 'ansible-core>=2.17'

demo: demo-sshd $(BIN)/ansible-playbook
	@echo "demo: building the collection tarball (ansible-galaxy collection build) into $(DEMO_DIST)"
	@rm -rf $(DEMO_DIST)
	@$(BIN)/ansible-galaxy collection build --output-path $(DEMO_DIST) . >/dev/null
	@echo "demo: installing it into $(DEMO_COLLECTIONS) (ansible-galaxy collection install)"
	@$(DEMO_ENV) $(BIN)/ansible-galaxy collection install --offline --force -p $(DEMO_COLLECTIONS) \
	  $(DEMO_DIST)/gpuprov-cloud-*.tar.gz >/dev/null
	@echo "demo: installing what the local cloud needs: pip install -r $(DEMO_INSTALLED)/requirements/local.txt"
	@$(BIN)/pip install -q --disable-pip-version-check -r $(DEMO_INSTALLED)/requirements/local.txt
	@echo "demo: provisioning the VM '$(DEMO_NAME)' on the local cloud (ansible-playbook gpuprov.cloud.provision)"
	@$(DEMO_ENV) $(BIN)/ansible-playbook gpuprov.cloud.provision -e vm=$(DEMO_NAME)
	@state=$${GPUPROV_HOME:-$${XDG_STATE_HOME:-$$HOME/.local/state}/gpuprov}; \
	  echo; echo "The VM '$(DEMO_NAME)' is up. From this folder (its ansible.cfg finds the collection), with .venv's Ansible:"; \
	  echo "  $(DEMO_CFG_NOTE). .venv/bin/activate"; \
	  echo "  ansible-playbook gpuprov.cloud.status"; \
	  echo "  ssh -F $$state/ssh_config $(DEMO_NAME) uname -a      (or add 'Include $$state/ssh_config' to ~/.ssh/config, then: ssh $(DEMO_NAME))"; \
	  echo "  ansible-playbook gpuprov.cloud.provision -e vm=second      (another VM on the local cloud)"; \
	  echo "Tear down: make demo-down DEMO_NAME=$(DEMO_NAME)      (or: ansible-playbook gpuprov.cloud.down -e vm=$(DEMO_NAME))"

demo-down: $(BIN)/ansible-playbook
	@echo "demo: tearing down the VM '$(DEMO_NAME)' (ansible-playbook gpuprov.cloud.down)"
	@$(DEMO_ENV) $(BIN)/ansible-playbook gpuprov.cloud.down -e vm=$(DEMO_NAME)

.PHONY: demo-sshd docs

# The local cloud runs each VM as an sshd: install OpenSSH's server where that is possible (root with apt),
# else name the command to run.
demo-sshd:
	@PATH="$(SSHD_SEARCH)" command -v sshd >/dev/null && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "demo: the local cloud needs sshd; installing openssh-server (apt-get)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq openssh-server >/dev/null \
	    || { echo "demo: apt-get install openssh-server failed; run it yourself, then: make demo"; exit 1; }; \
	  PATH="$(SSHD_SEARCH)" command -v sshd >/dev/null \
	    || { echo "demo: openssh-server is installed but no sshd is in $(SSHD_SEARCH)"; exit 1; }; \
	  exit 0; \
	fi; \
	sudo=$$([ "$$(id -u)" = 0 ] || echo "sudo "); \
	if command -v apt-get >/dev/null; then run="$${sudo}apt-get install openssh-server"; \
	elif command -v dnf >/dev/null; then run="$${sudo}dnf install openssh-server"; \
	elif command -v yum >/dev/null; then run="$${sudo}yum install openssh-server"; \
	elif command -v zypper >/dev/null; then run="$${sudo}zypper install openssh-server"; \
	elif command -v apk >/dev/null; then run="$${sudo}apk add openssh-server"; \
	elif command -v pacman >/dev/null; then run="$${sudo}pacman -S openssh"; \
	else run="install OpenSSH's server (the sshd program) with this system's package manager"; fi; \
	echo "demo: the local cloud runs each VM as an sshd, and sshd is not installed. Run:"; \
	echo "  $$run"; echo "then: make demo"; exit 1

# The collection's HTML docs site (antsibull-docs and Sphinx, offline): build/docs/html/index.html.
docs: dev
	$(BIN)/python docs/site/build.py --dest build/docs

# The k3s role on its own (molecule, docker driver, offline with the locally built image).
molecule: dev images
	bash extensions/molecule/run-offline.sh

# Ratios measured in one run with interleaved rounds, printed, never asserted (bench/*.py say what each
# row measures). BENCH_ROUNDS sets the rounds; bench/awx_fleet.py (16 VMs, 4 runners) runs on its own.
BENCH_ROUNDS ?= 3
bench: dev
	$(BIN)/python bench/launch_paths.py $(BENCH_ROUNDS)
	$(BIN)/python bench/reprovision.py $(BENCH_ROUNDS)
	$(BIN)/python bench/aws_rerun.py $(BENCH_ROUNDS)
	$(BIN)/python bench/journal_backends.py $(BENCH_ROUNDS)
	$(BIN)/python bench/fleet.py $(BENCH_ROUNDS)
	$(BIN)/python bench/status_big.py $(BENCH_ROUNDS)
	$(BIN)/python bench/inventory_big.py $(BENCH_ROUNDS)
	$(BIN)/python bench/api_calls.py $(BENCH_ROUNDS)

# The concurrency soak with an oracle (tests/soak): seeded rounds of random concurrent provision, recreate, down,
# sweep, status, health and instance runs from two controllers on one PostgreSQL journal and one on its own, on
# the local cloud and docker (where the engine answers and the image exists), with SIGKILLs and Ctrl-Cs at crash
# points and random moments; the oracle checks the promise after every round and at quiescence. SOAK_MINUTES is
# its budget (no new round starts after it), SOAK_SEED reproduces a schedule (default: a random one, printed),
# SOAK_ROUNDS caps the rounds (0: no cap), SOAK_FOCUS is the share of rounds that are one known race on one name
# (default 0.35), SOAK_CONCURRENCY the runs at once. It prints each round, every violation with the seed and the
# history, and the rounds, operations and violations; it fails when the oracle found one. make test runs a short one.
SOAK_MINUTES ?= 10
SOAK_SEED ?=
SOAK_ROUNDS ?= 0
SOAK_CONCURRENCY ?= 3
soak: dev images
	$(BIN)/python tests/soak/run.py --minutes $(SOAK_MINUTES) --rounds $(SOAK_ROUNDS) \
	  --concurrency $(SOAK_CONCURRENCY) $(if $(SOAK_SEED),--seed $(SOAK_SEED))

# Mutation testing of the core (tests/mutation/run.py; README.md, "Mutation testing"): each small change to MUTATE
# (default: machine/executor.py, machine/journal.py, vm/launch.py, vm/teardown.py, providers/base.py), one at a
# time, on private copies of the working tree, against the unit tests that ran its line. Prints killed, timed out,
# survived and equivalent per file and every survivor; fails when a file is under 95% killed. ONLY=survivors runs
# the last report's survivors again; MUTATION_ARGS passes more (--file, --line, --operator, --min, --tests: the test
# files to pick from, e.g. the core's own, much faster than all of tests/unit). Not in make test.
MUTATE ?=
MUTATION_JOBS ?= 2
ONLY ?=
MUTATION_ARGS ?=
mutation: dev
	$(BIN)/python tests/mutation/run.py $(MUTATE) -j $(MUTATION_JOBS) $(if $(filter survivors,$(ONLY)),--survivors) \
	  $(MUTATION_ARGS)

clean:
	rm -rf build $(VENV)

# The AWX execution environment's build context (docs/awx.md), offline: the collection tarball, then
# ansible-builder's context in build/ee/context; then the tarball is installed as the image would install it
# and ansible-builder's own introspection must find the collection's Python and system requirements in it.
# The shipped definition (extensions/awx/execution-environment.yml) takes the collection from Galaxy; the
# checkout's copy of it, build/ee/execution-environment.yml, takes this checkout's tarball instead.
EE_DIR := build/ee
EE_FROM_TARBALL := import sys, yaml; ee = yaml.safe_load(open(sys.argv[1])); \
  ee["dependencies"]["galaxy"] = {"collections": [{"name": "collections/gpuprov-cloud.tar.gz", "type": "file"}]}; \
  ee["additional_build_files"] = [{"src": "gpuprov-cloud.tar.gz", "dest": "collections"}]; \
  yaml.safe_dump(ee, open(sys.argv[2], "w"), sort_keys=False)
ee-context: dev
	rm -rf $(EE_DIR) && mkdir -p $(EE_DIR)/dist
	$(BIN)/ansible-galaxy collection build --force --output-path $(EE_DIR)/dist . >/dev/null
	cp $(EE_DIR)/dist/gpuprov-cloud-*.tar.gz $(EE_DIR)/gpuprov-cloud.tar.gz
	$(BIN)/python -c '$(EE_FROM_TARBALL)' extensions/awx/execution-environment.yml $(EE_DIR)/execution-environment.yml
	$(BIN)/ansible-builder create -f $(EE_DIR)/execution-environment.yml --context $(EE_DIR)/context \
	  --output-filename Containerfile
	env -u PYTHONPATH ANSIBLE_COLLECTIONS_PATH=$(EE_DIR)/collections $(BIN)/ansible-galaxy collection install \
	  --offline --force -p $(EE_DIR)/collections $(EE_DIR)/gpuprov-cloud.tar.gz >/dev/null
	$(BIN)/python $(EE_DIR)/context/_build/scripts/introspect.py introspect $(EE_DIR)/collections \
	  --write-pip $(EE_DIR)/requirements.txt --write-bindep $(EE_DIR)/bindep.txt >/dev/null
	for package in paramiko boto3 google-cloud-compute docker requests nebius psycopg; do \
	  grep -q "^$$package" $(EE_DIR)/requirements.txt || { echo "ee-context: $$package (requirements.txt) did not" \
	    "come through introspection"; exit 1; }; done
	grep -q '^openssh-clients' $(EE_DIR)/bindep.txt \
	  || { echo "ee-context: the collection's system requirements did not come through introspection"; exit 1; }
	@echo "ee-context: $(EE_DIR)/context (podman build -t gpuprov-ee:latest $(EE_DIR)/context)"

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

# mypy, strict (.mypy.ini), on the core: the executor and the journals (machine/), the provider contract
# (providers/base.py), the two machines and their typed states (vm/launch*.py, vm/teardown*.py: a state without a
# handler fails here, typing.assert_never) and the limits (expiry/). It runs from the collection's path so that
# imports resolve as ansible_collections.gpuprov.cloud.*. Not checked yet: the adapters, the tasks' services, the
# modules and plugins (mypy reads their types where the checked files import them, and reports nothing of theirs).
TYPED := plugins/module_utils/machine plugins/module_utils/providers/base.py plugins/module_utils/vm/launch.py \
  plugins/module_utils/vm/launch_states.py plugins/module_utils/vm/teardown.py plugins/module_utils/vm/teardown_states.py \
  plugins/module_utils/vm/run_options.py \
  plugins/module_utils/expiry
typecheck: dev $(COLL_LINK)
	cd $(COLL_LINK) && MYPYPATH=$(CURDIR)/$(COLL_ROOT) $(CURDIR)/$(BIN)/mypy --config-file .mypy.ini $(TYPED)

# ruff (.ruff.toml: pyflakes, pycodestyle, bugbear) on every Python file of the checkout, then mypy, then
# ansible-lint on the playbooks and roles. ansible-test sanity (pylint, pep8, validate-modules) is `make sanity`.
lint: dev typecheck
	$(BIN)/ruff check --no-cache .
	$(BIN)/ansible-lint --profile production
