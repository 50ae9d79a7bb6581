# hopsmith: every target bootstraps .venv from the pinned dependencies when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
BASE_STAMP := $(VENV)/.installed-base
RL_STAMP := $(VENV)/.installed-rl

# make dataset knobs (see README "Configuration"): a TOML CONFIG, and flags that override it when set.
CONFIG ?=
OUT ?= out
SEED ?=
DUMP ?=
INDEX ?=
AS_OF ?=
WORKERS ?=
PYTEST_ARGS ?=

.PHONY: dataset test test-scale bench lint rl clean venv

$(BASE_STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet pip==26.3
	$(PIP) install --quiet -c requirements.lock -e '.[dev]'
	touch $@

$(RL_STAMP): $(BASE_STAMP)
	$(PIP) install --quiet -c requirements.lock -e '.[dev,rl]'
	touch $@

venv: $(RL_STAMP)

dataset: $(BASE_STAMP)
	$(BIN)/hopsmith dataset $(if $(CONFIG),--config $(CONFIG)) --out $(OUT) $(if $(SEED),--seed $(SEED)) $(if $(DUMP),--dump $(DUMP)) $(if $(INDEX),--index $(INDEX)) $(if $(AS_OF),--as-of $(AS_OF)) $(if $(WORKERS),--direct_num_workers $(WORKERS))

test: $(RL_STAMP)
	$(BIN)/python -m pytest -q -m "not scale" $(PYTEST_ARGS)

# The distributed-engine tests (a dask.distributed cluster on 127.0.0.1): minutes on 2 cores, so apart.
test-scale: $(BASE_STAMP)
	$(BIN)/python -m pytest -q -m scale $(PYTEST_ARGS)

bench: $(BASE_STAMP)
	$(BIN)/python -m bench

lint: $(BASE_STAMP)
	$(BIN)/ruff check .

rl: $(RL_STAMP)
	$(BIN)/hopsmith rl train --shards $(OUT)/dataset --out $(OUT)/rl --preset tiny-cpu

clean:
	rm -rf $(OUT) .pytest_cache
