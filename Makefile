# hopsmith: every target bootstraps .venv from the pinned dependencies when it is missing or stale.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check
BASE_STAMP := $(VENV)/.installed-base
RL_STAMP := $(VENV)/.installed-rl
# the verl contract environment: real verl on CPU torch, separate from .venv (verl pins an older transformers)
VERL_VENV := .venv-verl
VERL_STAMP := $(VERL_VENV)/.installed
VERL_CHECK := build/verl-check

# make dataset knobs (see README "Configuration"): a TOML CONFIG, and flags that override it when set.
CONFIG ?=
OUT ?= out
SEED ?=
DUMP ?=
INDEX ?=
AS_OF ?=
WORKERS ?=
PYTEST_ARGS ?=

# the SFT contract environment: TRL on CPU torch, separate from .venv (what trainers users run pin)
SFT_VENV := .venv-sft
SFT_STAMP := $(SFT_VENV)/.installed
SFT_CHECK := build/sft-check
# ms-swift's contract environment: it pins an older transformers and TRL than .venv-sft, so its own venv
SWIFT_VENV := .venv-swift
SWIFT_STAMP := $(SWIFT_VENV)/.installed

LLM_VENV := .venv-llm
LLM_STAMP := $(LLM_VENV)/.installed
RECORD ?=
NO_AMX := -U__AMX_TILE__ -U__AMX_INT8__ -U__AMX_BF16__

.PHONY: dataset test test-scale bench lint rl clean venv llm-check verl-check sft-check browsecomp-check

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

# The llama.cpp server env for llm-check: built from source for this machine's CPU (AVX2/AVX-512: a
# generic x86-64 build is several times slower), without llama.cpp's tools and multimodal parts; niced.
# Not AMX: virtual machines advertise it but fault on its first tile instruction (llama.cpp's AMX matmul
# segfaulted on the first request here), and -march=native would enable it; -U keeps every other feature.
$(LLM_STAMP): requirements-llm.txt
	test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	CFLAGS="$(NO_AMX)" CXXFLAGS="$(NO_AMX)" \
	CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAVA_BUILD=OFF" \
		nice -n 19 \
		$(LLM_VENV)/bin/python -m pip install --no-cache-dir --disable-pip-version-check --quiet -r requirements-llm.txt
	touch $@

# Every LLM role against Gemma 3 270M under llama.cpp on 127.0.0.1 (not in CI: see README). RECORD=1
# saves the transcript that tests/test_llm_replay.py replays.
llm-check: $(BASE_STAMP) $(LLM_STAMP)
	$(BIN)/python tests/llm_check.py --python $(LLM_VENV)/bin/python $(if $(RECORD),--record)

# BrowseComp-Plus's own evaluator (scripts_evaluation/evaluate_with_openai.py) on `hopsmith export-benchmark`
# and `hopsmith eval` output, its judge on 127.0.0.1 (not in CI: their code is not on the package registries).
BROWSECOMP_PLUS_DIR ?=
browsecomp-check: $(BASE_STAMP)
	@test -n "$(BROWSECOMP_PLUS_DIR)" || { echo "set BROWSECOMP_PLUS_DIR to a checkout of https://github.com/texttron/BrowseComp-Plus"; exit 2; }
	BROWSECOMP_PLUS_DIR=$(abspath $(BROWSECOMP_PLUS_DIR)) $(BIN)/python -m pytest -q tests/test_benchmark_export.py

# make bench BENCH=scale SCALE_SIZES=100000,400000 SCALE_RUNS=worker,walk: the scale bench at the issue's
# sizes (hours on 2 cores; the default sizes take minutes); SCALE_DUMPS=DIR keeps the generated dumps
BENCH ?=
SCALE_SIZES ?=
SCALE_RUNS ?=
SCALE_DUMPS ?=
bench: $(BASE_STAMP)
	$(if $(SCALE_SIZES),HOPSMITH_SCALE_SIZES=$(SCALE_SIZES)) $(if $(SCALE_RUNS),HOPSMITH_SCALE_RUNS=$(SCALE_RUNS)) \
	$(if $(SCALE_DUMPS),HOPSMITH_SCALE_DUMPS=$(SCALE_DUMPS)) $(BIN)/python -m bench $(BENCH)

lint: $(BASE_STAMP)
	$(BIN)/ruff check .

rl: $(RL_STAMP)
	$(BIN)/hopsmith rl train --shards $(OUT)/dataset --out $(OUT)/rl --preset tiny-cpu

$(VERL_STAMP): requirements-verl.txt requirements-verl.lock
	test -x $(VERL_VENV)/bin/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_VENV)/bin/python -m pip --disable-pip-version-check install --quiet pip==26.3
	$(VERL_VENV)/bin/python -m pip --disable-pip-version-check install --quiet -c requirements-verl.lock -r requirements-verl.txt
	touch $@

# `hopsmith rl export-verl` of the shipped sample's dataset, checked by the contract suite with the real verl;
# every question a prompt (`--pass-band 0 1`; the default band keeps ~10 on the sample), so verl reads them all
verl-check: $(BASE_STAMP) $(VERL_STAMP)
	$(BIN)/hopsmith dataset --pass-band 0 1 --out $(VERL_CHECK)/out
	$(BIN)/hopsmith rl export-verl --shards $(VERL_CHECK)/out/dataset --out $(VERL_CHECK)/verl
	HOPSMITH_VERL_EXPORT=$(CURDIR)/$(VERL_CHECK)/verl PYTHONPATH=$(CURDIR) $(VERL_VENV)/bin/python -m pytest -q -p no:cacheprovider tests_verl

# A trainer's venv ($(1)) from requirements-$(2).txt pinned by its .lock; torch first, alone:
# `pip install torch==2.13.0` takes the CPU file on this machine's disk (never a CUDA build)
define torch_venv
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip --disable-pip-version-check install --quiet pip==26.3
	$(1)/bin/python -m pip --disable-pip-version-check install --quiet torch==2.13.0
	$(1)/bin/python -m pip --disable-pip-version-check install --quiet -c requirements-$(2).lock -r requirements-$(2).txt
	touch $@
endef

$(SFT_STAMP): requirements-sft.txt requirements-sft.lock
	$(call torch_venv,$(SFT_VENV),sft)

$(SWIFT_STAMP): requirements-swift.txt requirements-swift.lock
	$(call torch_venv,$(SWIFT_VENV),swift)

# The trainers on the shipped sample's dataset with a tiny random Qwen3 (tests_sft): TRL's SFTTrainer on the
# openai, nanbeige and toolmind configs through `pipeline.sft` (.venv-sft), then ms-swift's loader, template
# and `swift sft` on the shards and on `write_swift_jsonl` (.venv-swift): exactly the loss=1 turns carry labels.
# HF_HUB_OFFLINE: `datasets` would otherwise ping its hub on every local file it loads.
SFT_ENV := HF_HUB_OFFLINE=1 HOPSMITH_SFT_DATASET=$(CURDIR)/$(SFT_CHECK)/out/dataset PYTHONPATH=$(CURDIR)
sft-check: $(BASE_STAMP) $(SFT_STAMP) $(SWIFT_STAMP)
	$(BIN)/hopsmith dataset --out $(SFT_CHECK)/out
	$(SFT_ENV) $(SFT_VENV)/bin/python -m pytest -q -p no:cacheprovider tests_sft/test_trl.py
	$(SFT_ENV) $(SWIFT_VENV)/bin/python -m pytest -q -p no:cacheprovider tests_sft/test_swift.py

clean:
	rm -rf $(OUT) .pytest_cache
