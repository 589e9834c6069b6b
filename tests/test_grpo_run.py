"""A whole GRPO run from config: a tiny random-init policy, a BM25 index over a handful of passages and a question
file, all built here. Five steps change every trained parameter and write the per-step log, checkpoints and the
final policy; ``--resume`` after kill -9 ends at the weights of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.retrieval.index import IndexConfig, build_index
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.log import read_steps
from effirag.train.rl.run import run_grpo
from effirag.types import Passage
from test_engine_support import PASSAGES
from tiny_models import make_tiny_model

pytestmark = pytest.mark.slow
QUESTIONS = [
    {"id": "q1", "question": "Who directed Blue River?", "answer": "Ana Lopez"},
    {"id": "q2", "question": "Which river flows through Lyon?", "answer": "Rhone"},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("grpo_run")
    model = make_tiny_model(root / "model", arch="qwen2", seed=11)
    _end_turns_early(model)
    index = root / "index"
    passages = [Passage(i, t, x) for i, t, x in PASSAGES]
    build_index(passages, index, config=IndexConfig(dense=False), corpus_path="mem")
    qfile = root / "questions.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return {"model": str(model), "index": str(index), "questions": str(qfile)}


def _end_turns_early(model: Path) -> None:
    """Random weights never write a stop string, so every turn would run to max_new_tokens and every episode cost the
    same (a zero advantage everywhere). Declaring 60 of the 384 ids end-of-sequence tokens in the model's generation
    config ends random turns at varied lengths, so costs, and hence advantages, differ within each group."""
    from transformers import GenerationConfig

    gc = GenerationConfig.from_pretrained(str(model))
    eos = gc.eos_token_id if isinstance(gc.eos_token_id, int) else 0
    gc.eos_token_id = [eos, *range(100, 160)]
    gc.save_pretrained(str(model))


def _overrides(setup: dict[str, str], out: Path, steps: int = 5) -> list[str]:
    # Memory cost with α = 1: random turns differ in length, so every group has non-zero advantages.
    return [
        f"model={setup['model']}",
        f"index={setup['index']}",
        f"questions={setup['questions']}",
        f"output_dir={out}",
        f"max_steps={steps}",
        "save_steps=1",
        "learning_rate=0.001",
        "num_generations=3",
        "questions_per_step=2",
        "beta=0.04",
        "engine.max_steps=2",
        "engine.max_new_tokens=8",
        "engine.max_inserted_tokens=48",
        "engine.k=1",
        "engine.passage_mode=sparse",
        "reward.format_weight=0.5",
        "scale_rewards=none",
        "reward.cost=memory",
        "reward.cost_alpha=1.0",
    ]


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_five_steps_change_every_parameter_and_write_log_and_checkpoints(setup: dict[str, str], tmp_path: Path) -> None:
    cfg = load_config(GRPORunConfig, Path("configs/rl/dsr1_grpo_cost.yaml"), _overrides(setup, tmp_path / "run"))
    res = run_grpo(cfg)
    assert res.steps == 5
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    assert [r["step"] for r in steps] == [1, 2, 3, 4, 5]
    keys = ["reward", "reward/total", "em", "reward/cost", "kl", "entropy", "clip_ratio/region_mean", "format_rate"]
    keys += ["generated_tokens_per_q", "inserted_tokens_per_q", "searches_per_q", "generation_s", "retrieval_s"]
    for key in [*keys, "update_s"]:
        assert all(key in r for r in steps), key
    assert all(r["questions"] == 6 for r in steps)
    assert (tmp_path / "run" / "checkpoint-5").is_dir() and (tmp_path / "run" / "config.yaml").is_file()
    assert (tmp_path / "run" / "curves.png").stat().st_size > 0
    before, after = _weights(Path(setup["model"])), _weights(res.policy_dir)
    assert before.keys() == after.keys()
    unchanged = [k for k in before if (before[k] == after[k]).all()]
    assert unchanged == []
    with pytest.raises(ConfigError, match="holds a run already"):
        run_grpo(cfg)


def _cli(config: Path, overrides: list[str], *extra: str) -> subprocess.Popen[bytes]:
    code = "import typer; from effirag.cli.train_rl import grpo; typer.run(grpo)"
    args = [sys.executable, "-c", code, "--config", str(config), "--quiet", *extra, *overrides]
    env = {**os.environ, "PYTHONPATH": str(Path("src").resolve()) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_resume_after_kill_ends_at_the_uninterrupted_weights(setup: dict[str, str], tmp_path: Path) -> None:
    """Tolerance: max |Δw| ≤ 1e-6 per tensor (CPU float32; the same seeds and data order replayed from the checkpoint
    and its RNG states)."""
    config = Path("configs/rl/dsr1_grpo_cost.yaml")
    full, cut = tmp_path / "full", tmp_path / "cut"
    p = _cli(config, _overrides(setup, full))
    assert p.wait(timeout=900) == 0, p.stdout.read().decode() if p.stdout else ""
    p = _cli(config, _overrides(setup, cut))
    deadline = time.time() + 900
    while not (cut / "checkpoint-3" / "trainer_state.json").is_file():
        assert p.poll() is None and time.time() < deadline, "the run ended before its third checkpoint"
        time.sleep(0.2)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert not (cut / "policy").exists()
    r = _cli(config, _overrides(setup, cut), "--resume")
    assert r.wait(timeout=900) == 0, r.stdout.read().decode() if r.stdout else ""
    a, b = _weights(full / "policy"), _weights(cut / "policy")
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst <= 1e-6
    assert [s["step"] for s in read_steps(cut / "steps.jsonl")] == [1, 2, 3, 4, 5]
