"""`effirag demo --backend vllm` runs the demo policy on vLLM and scores what the HF run scores on the same questions:
the same metrics table (EM, F1, format, steps, token means, EM by hops) and the same answers (vLLM's eager float32
default; tests/on_vllm/test_vllm_lfm2.py checks the policy's ids and log-probs).

Runs in .venv-vllm (tests/on_vllm/vllm_support.py says why and how); tests/on_vllm/demo_driver.py runs both demos in a
subprocess on a small world.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from vllm_support import PYTESTMARK, run_driver

pytestmark = PYTESTMARK
DRIVER = Path(__file__).with_name("demo_driver.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("vllm_demo")
    return run_driver(DRIVER, str(work), str(work / "runs.json"), out=work / "runs.json")


def test_demo_on_vllm_completes_with_the_hf_run_metrics(runs: dict[str, Any]) -> None:
    from effirag.cli.demo import DEMO_PROTOCOLS, _row

    for name in ("hf", "vllm"):
        assert runs[name]["exit_code"] == 0, runs[name]["output"]
    assert "5.02M parameters on vllm:" in runs["vllm"]["output"], runs["vllm"]["output"][-3000:]
    assert "on vllm:" not in runs["hf"]["output"]
    hf, vllm = runs["hf"]["report"], runs["vllm"]["report"]
    assert hf["limit"] == vllm["limit"] == 3
    assert vllm["backend"].startswith("vllm:") and hf["backend"].startswith("hf:")
    for protocol, _ in DEMO_PROTOCOLS:
        assert _row(vllm["eval"][protocol]) == _row(hf["eval"][protocol]), protocol
        assert runs["vllm"]["predictions"][protocol] == runs["hf"]["predictions"][protocol]
        assert len(runs["hf"]["predictions"][protocol]) == 3
    assert vllm["recall"] == hf["recall"]
