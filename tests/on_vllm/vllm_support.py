"""What the tests and drivers of tests/on_vllm share: the skip rule, the questions, the tiny model, the subprocess
that runs a driver, and the teacher-forced log-probs both drivers compare vLLM's against.

The tests need vLLM, which pins a transformers older than .venv's: they run in .venv-vllm (`make unit-vllm`, part of
`make test`), where EFFIRAG_REQUIRE_VLLM=1 makes a missing vLLM a failure instead of a skip. A driver is a script run
in a subprocess, one per test module: vLLM's engine starts once there (importing vLLM and starting an engine is most
of each module's time) and serves every check of the module.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:  # drivers run as scripts: tests/ holds the lexical retriever and the tiny models
    sys.path.insert(0, str(TESTS))

REQUIRED = os.environ.get("EFFIRAG_REQUIRE_VLLM") == "1"
PYTESTMARK = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None and not REQUIRED,
        reason="vLLM is not installed in this venv: these tests run in .venv-vllm via `make unit-vllm` (make test)",
    ),
]
QUESTIONS = ["Who directed Blue River?", "Which river flows through Lyon?"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
# A driver on the shared 2-core machine: measured 4.5 min at load 8 (about 1 min of CPU); room for heavier load.
DRIVER_TIMEOUT_S = 1500
# Drivers that failed in this session, with their error: pytest re-runs a failed module fixture for every test of the
# module, and one more vLLM start per test would only repeat the failure.
_FAILED: dict[str, str] = {}


def tiny_qwen(folder: Path, seed: int) -> Path:
    """A tiny random Qwen2 (tests/tiny_models.py) in ``folder``: head_dim 32 (64 hidden / 2 heads), the smallest
    head size vLLM's CPU attention supports."""
    from tiny_models import make_tiny_model

    return make_tiny_model(folder, arch="qwen2", heads=2, kv_heads=1, seed=seed)


def run_driver(driver: Path, *args: str, out: Path) -> dict[str, Any]:
    """Run ``driver`` with ``args`` in a subprocess of this interpreter; the JSON it wrote to ``out``."""
    if driver.name in _FAILED:
        pytest.fail(f"{driver.name} failed earlier in this session:\n{_FAILED[driver.name]}")
    proc = subprocess.run(
        [sys.executable, str(driver), *args],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        env=dict(os.environ, **OFFLINE),
    )
    if proc.returncode != 0:
        _FAILED[driver.name] = f"exit {proc.returncode}:\n{proc.stderr[-6000:]}"
        pytest.fail(f"{driver.name} failed ({_FAILED[driver.name]}")
    return dict(json.loads(out.read_text()))


def teacher_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """``model``'s log-probability of each id of ``completion`` given ``prompt`` and the ids before it (one forward
    pass, fp32)."""
    import torch

    ids = torch.tensor([prompt + completion], dtype=torch.long)  # (1, P + C)
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()  # (P + C, vocab)
    lp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)  # (C, vocab): position t predicts id t + 1
    return lp.gather(1, torch.tensor(completion).unsqueeze(1)).squeeze(1).tolist()


def vllm_prompt_logprobs(llm: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """vLLM's raw log-probability of each id of ``completion`` after ``prompt``, scored as prompt tokens
    (``prompt_logprobs``) by the ``vllm.LLM`` engine ``llm``."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    ids = prompt + completion
    [out] = llm.generate([TokensPrompt(prompt_token_ids=ids)], SamplingParams(max_tokens=1, prompt_logprobs=0))
    return [float(out.prompt_logprobs[j][ids[j]].logprob) for j in range(len(prompt), len(ids))]
