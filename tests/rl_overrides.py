"""The ``key=value`` overrides that the tiny GRPO and PPO run tests share (test_grpo_run, test_ppo_run and the tests
that extend their ``_overrides``): the workspace of conftest's ``setup`` fixture, short episodes with one sparse
passage, and half-weight format reward. Each trainer's own keys (steps, learning rate, samples) stay in its test."""

from __future__ import annotations

from pathlib import Path


def tiny_rl_overrides(setup: dict[str, str], out: Path) -> list[str]:
    """Run in ``out`` on ``setup``'s tiny model, index and questions; a checkpoint every step, two questions a step,
    two-turn episodes of 8 new tokens with one passage (48 tokens at most) inserted per search."""
    return [
        *(f"env.{key}={value}" for key, value in setup.items()),  # model, index, questions
        f"output_dir={out}",
        "save_steps=1",
        "questions_per_step=2",
        "env.engine.max_steps=2",
        "env.engine.max_new_tokens=8",
        "env.engine.max_inserted_tokens=48",
        "env.engine.k=1",
        "env.engine.passage_mode=sparse",
        "objective.format_weight=0.5",
    ]
