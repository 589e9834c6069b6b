"""Shared fixtures: the location of the real benchmark data (read in place, never copied)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from effirag.types import Passage, Triplet

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
# recipes/ on the path: tests of a recipe's own code import it as a package (e.g. `demo_policy.drill`)
if str(REPO / "recipes") not in sys.path:
    sys.path.insert(0, str(REPO / "recipes"))
SHARED_DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "README.md").is_file():
        pytest.fail(f"the shared benchmark data is missing at {SHARED_DATA} (set EFFIRAG_SHARED_DATA)")
    return SHARED_DATA


# A six-passage corpus with its triplets, indexed once per test module: what the retrieval, mode and composable-run
# tests search.
SMALL_PASSAGES = [
    Passage("p0", "Amsterdam", "Amsterdam is the capital of the Netherlands."),
    Passage("p1", "Rotterdam", "Rotterdam has the largest port in Europe."),
    Passage("p2", "Dutch East India Company", "The company was founded in 1602 in Amsterdam."),
    Passage("p3", "Tulip", "Tulips bloom in spring across the Netherlands."),
    Passage("p4", "Rembrandt", "Rembrandt painted The Night Watch in Amsterdam."),
    Passage("p5", "Europe", "Europe is a continent with many ports."),
]
SMALL_TRIPLETS = [
    Triplet("Amsterdam", "capital of", "Netherlands", "p0"),
    Triplet("Rotterdam", "has", "largest port in Europe", "p1"),
    Triplet("Dutch East India Company", "founded in", "1602", "p2"),
    Triplet("Dutch East India Company", "based in", "Amsterdam", "p2"),
    Triplet("Rembrandt", "painted", "The Night Watch", "p4"),
    Triplet("The Night Watch", "located in", "Amsterdam", "p4"),
]


@pytest.fixture(scope="session")
def small_passages() -> list[Passage]:
    return list(SMALL_PASSAGES)


@pytest.fixture(scope="module")
def small_index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SMALL_PASSAGES and SMALL_TRIPLETS indexed (BM25, hashing-encoder dense, knowledge graph) in a fresh folder."""
    from effirag.retrieval.encoders import HashingEncoder
    from effirag.retrieval.index import build_index

    folder = tmp_path_factory.mktemp("small-index")
    build_index(SMALL_PASSAGES, folder, encoder=HashingEncoder(256), triplets=SMALL_TRIPLETS, corpus_path="mem")
    return folder


@pytest.fixture(scope="module")
def small_retriever(small_index_dir: Path) -> Any:
    """An ``EffiRetriever`` over :func:`small_index_dir`."""
    from effirag.retrieval.encoders import HashingEncoder
    from effirag.retrieval.facade import load_retriever

    return load_retriever(small_index_dir, encoder=HashingEncoder(256))


# --- RL runs (tests/test_grpo_run.py, tests/test_ppo_run.py) ---------------------------------------------------------
RL_QUESTIONS = [
    {"id": "q1", "question": "Who directed Blue River?", "answer": "Ana Lopez"},
    {"id": "q2", "question": "Which river flows through Lyon?", "answer": "Rhone"},
    {"id": "q3", "question": "What is the capital of Spain?", "answer": "Madrid"},
]


def _end_turns_early(model: Path) -> None:
    """Random weights never write a stop string, so every turn would run to max_new_tokens and every episode would
    cost the same (a zero advantage everywhere). Declaring 60 of the 384 ids end-of-sequence tokens in the model's
    generation config ends random turns at varied lengths, so length, format and cost differ within each group."""
    from transformers import GenerationConfig

    gc = GenerationConfig.from_pretrained(str(model))
    eos = gc.eos_token_id if isinstance(gc.eos_token_id, int) else 0
    gc.eos_token_id = [eos, *range(100, 160)]
    gc.save_pretrained(str(model))


@pytest.fixture(scope="session")
def rl_workspace() -> Any:
    """``make(root, n_questions) -> {model, index, questions}``: a tiny random-init Qwen2 policy whose turns end at
    varied lengths, a BM25 index over the engine tests' passages, and a question file of the first ``n_questions``."""

    def make(root: Path, n_questions: int) -> dict[str, str]:
        import json

        from effirag.retrieval.index import IndexConfig, build_index
        from test_engine_support import PASSAGES
        from tiny_models import make_tiny_model

        model = make_tiny_model(root / "model", arch="qwen2", seed=11)
        _end_turns_early(model)
        index = root / "index"
        passages = [Passage(i, t, x) for i, t, x in PASSAGES]
        build_index(passages, index, config=IndexConfig(dense=False), corpus_path="mem")
        qfile = root / "questions.jsonl"
        qfile.write_text("".join(json.dumps(q) + "\n" for q in RL_QUESTIONS[:n_questions]), encoding="utf-8")
        return {"model": str(model), "index": str(index), "questions": str(qfile)}

    return make


@pytest.fixture(scope="module")
def setup(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, rl_workspace: Any) -> Any:
    """The RL run tests' workspace (:func:`rl_workspace`), one per test module; ``RL_QUESTIONS_N`` in the module
    says how many questions (default 3)."""
    n = getattr(request.module, "RL_QUESTIONS_N", 3)
    return rl_workspace(tmp_path_factory.mktemp(request.module.__name__), n)


@pytest.fixture(scope="session")
def rl_kill_and_resume() -> Any:
    """``check(command, config, overrides_for, full, cut, marker, weights) -> worst |Δw|``: run ``train COMMAND`` to the
    end in one folder; in another, kill -9 once ``checkpoint-3/MARKER`` (a JSON file) is written, then ``--resume``;
    return the largest difference between the two final policies' tensors (``weights(policy_dir)`` loads them).

    The SIGKILL comes from a watcher thread inside the training process, polling every 10 ms: a test process polling
    from outside can be starved on a loaded machine long enough for the run to finish first."""
    import os
    import signal
    import subprocess
    import sys

    def cli(command: str, config: Path, overrides: list[str], *extra: str, kill_at: Path | None = None) -> Any:
        code = f"import typer; from effirag.cli.train_rl import {command}; typer.run({command})"
        if kill_at is not None:
            watcher = (  # the marker file appears before it is written: wait until it holds the whole JSON
                "import json, os, signal, threading, time, pathlib\n"
                "def _done(m):\n"
                "    try: return json.loads(m.read_text()) is not None\n"
                "    except (OSError, ValueError): return False\n"
                "def _watch(m=pathlib.Path(os.environ['EFFIRAG_TEST_KILL_AT'])):\n"
                "    while not _done(m): time.sleep(0.01)\n"
                "    os.kill(os.getpid(), signal.SIGKILL)\n"
                "threading.Thread(target=_watch, daemon=True).start()\n"
            )
            code = watcher + code
        args = [sys.executable, "-c", code, "--config", str(config), "--quiet", *extra, *overrides]
        env = {**os.environ, "PYTHONPATH": str(Path("src").resolve()) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        if kill_at is not None:
            env["EFFIRAG_TEST_KILL_AT"] = str(kill_at)
        return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def finish(p: subprocess.Popen[bytes]) -> None:
        assert p.wait(timeout=900) == 0, p.stdout.read().decode() if p.stdout else ""

    def check(
        command: str, config: Path, overrides_for: Any, full: Path, cut: Path, marker: str, weights: Any
    ) -> float:
        finish(cli(command, config, overrides_for(full)))
        p = cli(command, config, overrides_for(cut), kill_at=cut / "checkpoint-3" / marker)
        code = p.wait(timeout=900)
        out = p.stdout.read().decode() if p.stdout else ""
        assert code == -signal.SIGKILL, f"the run was not killed at its third checkpoint (exit {code}): {out}"
        assert (cut / "checkpoint-3" / marker).is_file() and not (cut / "policy").exists()
        finish(cli(command, config, overrides_for(cut), "--resume"))
        a, b = weights(full / "policy"), weights(cut / "policy")
        assert a.keys() == b.keys()
        return max(float((a[k] - b[k]).abs().max()) for k in a)

    return check
