"""The preference-learning commands end to end on tiny models: ``effirag train dpo`` on a hand-written pairs file,
``effirag train ipdpo`` for one round of engine sampling (random policy, BM25 index) with its log, checkpoint and
policy, and ``--resume`` skipping the finished round."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent.settings import load_settings
from effirag.cli.main import app
from effirag.train.rl.log import read_steps

runner = CliRunner()

RL_QUESTIONS_N = 2  # questions in the workspace's file (the `setup` fixture of conftest.py builds it)

PAIRS = [
    {"prompt": "Question: Who directed Blue River?\n", "chosen": "<think> the director </think>",
     "rejected": "<answer> Paris </answer>", "stage": "reasoning", "question_id": "q1"},
    {"prompt": "Question: Which river flows through Lyon?\n", "chosen": "<search> Lyon river </search>\n"
     "<information> Doc 1 Lyon is on the Rhone. </information>\n", "rejected": "<answer> Seine </answer>"},
]  # fmt: skip


def _start_with_settings(model: str, folder: Path, settings: str) -> Path:
    """A copy of the tiny model with an inference.yaml, as a committed checkpoint has."""
    shutil.copytree(model, folder)
    (folder / "inference.yaml").write_text(settings, encoding="utf-8")
    return folder


def test_train_dpo_cli_on_a_pairs_file(setup: dict[str, str], tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(p) + "\n" for p in PAIRS), encoding="utf-8")
    out = tmp_path / "run"
    start = _start_with_settings(setup["model"], tmp_path / "start", "k: 2\nfrequency_penalty: 0.3\n")
    args = ["train", "dpo", "--data", str(data), "--config", "configs/dpo/reasonrag_step_dpo.yaml", "--json"]
    args += [f"model={start}", f"output_dir={out}", "protocol=searchr1", "train.max_steps=2"]
    args += ["train.batch_size=1", "save_steps=1", "train.learning_rate=1e-3"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["pairs"] == 2 and summary["steps"] == 2
    assert [s["step"] for s in read_steps(out / "steps.jsonl")] == [1, 2]
    assert (out / "policy" / "model.safetensors").is_file() and (out / "checkpoint-2").is_dir()
    assert (out / "curves.png").stat().st_size > 0 and (out / "config.yaml").is_file()
    carried = load_settings(out / "policy")  # the trained policy runs the way its start was measured
    assert carried is not None and (carried.k, carried.frequency_penalty) == (2, 0.3)
    # --resume continues from checkpoint-2 to the new max_steps; the log has each step once.
    assert runner.invoke(app, args).exit_code != 0  # a finished run is not overwritten
    r = runner.invoke(app, [*args, "--resume", "train.max_steps=3"])
    assert r.exit_code == 0, r.output
    assert [s["step"] for s in read_steps(out / "steps.jsonl")] == [1, 2, 3]


def _ipdpo(setup: dict[str, str], out: Path, *extra: str) -> Any:
    args = ["train", "ipdpo", "--config", "configs/dpo/tearag_ipdpo.yaml", "--json", *extra]
    args += [f"env.{k}={v}" for k, v in setup.items()]  # model, index, questions
    args += [f"output_dir={out}", "env.protocol=searchr1", "samples_per_question=2", "env.engine.max_steps=2"]
    args += ["similarity=lexical"]  # the BM25-only index has no embedding similarity
    args += ["env.engine.max_new_tokens=8", "env.engine.passage_mode=sparse", "env.engine.max_inserted_tokens=48"]
    return runner.invoke(app, args)


@pytest.mark.slow
def test_train_ipdpo_cli_round_writes_log_checkpoint_and_policy_and_resumes(
    setup: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "ipdpo"
    start = _start_with_settings(setup["model"], tmp_path / "start", "max_steps: 2\n")
    setup = {**setup, "model": str(start)}
    r = _ipdpo(setup, out, "rounds=1")
    assert r.exit_code == 0, r.output
    [rec] = read_steps(out / "rounds.jsonl")
    assert rec["round"] == 1 and rec["paths"] == 4 and rec["questions"] == 2
    for key in ("pairs", "reward/total", "format_rate", "em", "loss", "sample_s", "train_s", "s_per_path", "eta"):
        assert key in rec, key
    assert rec["eta"] == 1.0  # the recipe's η for round 1
    assert (out / "round-1" / "policy" / "config.json").is_file() and (out / "round-1" / "pairs.jsonl").is_file()
    assert (out / "policy" / "config.json").is_file() and (out / "curves.png").stat().st_size > 0
    assert all(load_settings(p) is not None for p in (out / "round-1" / "policy", out / "policy"))
    # Without --resume a finished run is refused; with it, round 1 is kept and only round 2 runs.
    assert _ipdpo(setup, out, "rounds=1").exit_code != 0
    r = _ipdpo(setup, out, "rounds=2", "--resume")
    assert r.exit_code == 0, r.output
    recs = read_steps(out / "rounds.jsonl")
    assert [x["round"] for x in recs] == [1, 2] and recs[0] == rec and recs[1]["eta"] == 0.5
    assert json.loads(r.stdout)["rounds"] == 2
