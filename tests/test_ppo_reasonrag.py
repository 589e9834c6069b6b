"""PPO trains ReasonRAG (whose prompt is rebuilt every turn) one sequence per turn: a 2-step run of the tiny random-init
policy changes every trained tensor, and every step's rows are exactly the episodes' turns, each under the prompt the
policy saw at that turn and with its episode's outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from effirag.config import load_config
from effirag.train.rl import ppo_trainer
from effirag.train.rl.log import read_steps
from effirag.train.rl.ppo_config import PPORunConfig
from effirag.train.rl.ppo_run import run_ppo
from effirag.types import TokenKind, Trajectory

pytestmark = pytest.mark.slow
CONFIG = Path("configs/rl/dsr1_ppo_cost.yaml")


def _turns(traj: Trajectory) -> list[tuple[int, ...]]:
    """The prompt of each turn of ``traj`` that the policy sampled tokens under, read off its token ledger."""
    out: list[tuple[int, ...]] = []
    prompt: tuple[int, ...] | None = None  # the current prompt until its first sampled token
    for seg in traj.tokens:
        if seg.kind is TokenKind.PROMPT:
            prompt = tuple(seg.ids)
        elif seg.trained and seg.ids and prompt is not None:
            out.append(prompt)
            prompt = None
    return out


def test_two_reasonrag_steps_train_one_row_per_turn(
    setup: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from safetensors.torch import load_file

    from effirag.train.rl.ppo_critic import ValueHead

    seen: list[tuple[list[Trajectory], list[Any], list[float]]] = []
    parts_of: list[Any] = []
    prepare = ppo_trainer.prepare

    def spy(parts: Any, samples: Any, outcome: Any) -> Any:
        parts_of[:] = [parts]
        seen.append((list(parts.rollout.last.trajectories), list(samples), list(outcome)))
        return prepare(parts, samples, outcome)

    monkeypatch.setattr(ppo_trainer, "prepare", spy)
    from test_ppo_run import _overrides  # the tiny PPO run; a later key=value wins

    overrides = [
        *_overrides(setup, tmp_path / "run", steps=2),
        "env.protocol=reasonrag",
        "save_steps=2",
        "env.engine.max_steps=3",
    ]
    res = run_ppo(load_config(PPORunConfig, CONFIG, overrides))
    assert res.steps == 2 and len(seen) == 2
    steps = read_steps(tmp_path / "run" / "steps.jsonl")
    for (trajs, samples, outcome), rec in zip(seen, steps, strict=True):
        turns = [_turns(t) for t in trajs]
        assert rec["turn_rows"] == len(samples) == sum(len(t) for t in turns)
        assert len(samples) > len(trajs), "no episode had two turns: the test would not tell turns from episodes"
        # each row is one turn under the prompt it was sampled with, in episode then turn order (a row that
        # concatenated an episode's turns would have its first prompt only and a longer completion)
        assert [s.prompt_ids for s in samples] == [p for t in turns for p in t]
        by_episode: dict[tuple[str, int], set[float]] = {}
        for s, r in zip(samples, outcome, strict=True):
            by_episode.setdefault((s.question_id, s.sample_index), set()).add(r)
        assert all(len(v) == 1 for v in by_episode.values()), "turns of one episode got different outcomes"
    before = load_file(str(Path(setup["model"]) / "model.safetensors"))
    after = load_file(str(res.policy_dir / "model.safetensors"))
    assert before.keys() == after.keys()
    assert [k for k in before if (before[k] == after[k]).all()] == []
    head = load_file(str(tmp_path / "run" / "value_head.safetensors"))
    start = ValueHead(64, 0).state_dict()
    assert head.keys() == start.keys()
    assert all((head[k] != start[k]).any() for k in start)
