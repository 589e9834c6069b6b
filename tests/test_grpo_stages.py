"""A staged GRPO config (RouteRAG's two stages in one file): the stages load typed, each stage's run config has its
own reward and length, runs in its own folder and starts from the previous stage's saved policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.train.objective import build_objective
from effirag.train.rl.grpo import GRPORunConfig, GRPOStage, scale_rewards
from effirag.train.rl.run import stage_configs
from test_grpo_run import _overrides

RL_QUESTIONS_N = 2  # the `setup` fixture (conftest.py): a tiny policy, a BM25 index and a question file of 2
ROUTERAG = Path(__file__).resolve().parents[1] / "configs" / "rl" / "routerag_grpo.yaml"


def test_routerag_recipe_runs_outcome_then_efficiency_from_the_stage_one_policy() -> None:
    cfg = load_config(GRPORunConfig, ROUTERAG, ["env.model=/m", "output_dir=/out"])
    assert all(isinstance(s, GRPOStage) for s in cfg.stages)
    one, two = stage_configs(cfg)
    assert (one.env.model, one.output_dir, one.max_steps) == ("/m", "/out/outcome", 20)
    assert (two.env.model, two.output_dir, two.max_steps) == ("/out/outcome/policy", "/out/efficiency", 20)
    assert (one.objective.outcome_weight, one.objective.routerag_weight) == (1.0, 0.0)
    assert (two.objective.outcome_weight, two.objective.routerag_weight) == (0.0, 1.0)
    assert one.stages == () and two.stages == ()
    assert (one.num_generations, two.num_generations, two.env.protocol) == (5, 5, "routerag")


def test_unnamed_stages_are_numbered_and_names_must_differ() -> None:
    cfg = GRPORunConfig(output_dir="o", stages=(GRPOStage(max_steps=2), GRPOStage(max_steps=3)))
    assert [(c.output_dir, c.max_steps) for c in stage_configs(cfg)] == [("o/stage1", 2), ("o/stage2", 3)]
    with pytest.raises(ConfigError, match="stage names must differ"):
        GRPORunConfig(stages=(GRPOStage(name="a"), GRPOStage(name="a")))
    assert stage_configs(GRPORunConfig()) == []


def test_a_cost_aware_stage_takes_unscaled_rewards_from_its_estimator() -> None:
    """dsr1_cost's values are advantages already: TRL gets scale_rewards=none; a run that asks for another scaling
    is refused when the trainer is built; a plain stage keeps TRL's group scaling (the run's default)."""
    stages = "stages=[{max_steps: 2, objective: {cost: memory}}, {name: plain, max_steps: 2}]"
    cost, plain = stage_configs(load_config(GRPORunConfig, None, [stages]))
    assert cost.objective.cost == "memory"
    assert scale_rewards(cost, build_objective(cost.objective, "grpo")) == "none"
    assert scale_rewards(plain, build_objective(plain.objective, "grpo")) == "group"
    cost, _ = stage_configs(load_config(GRPORunConfig, None, ["scale_rewards=group", stages]))
    with pytest.raises(ConfigError, match="scale_rewards='group': the dsr1_cost estimator needs 'none'"):
        scale_rewards(cost, build_objective(cost.objective, "grpo"))


@pytest.mark.slow
def test_two_stage_run_trains_stage_two_from_stage_one(setup: dict[str, str], tmp_path: Path) -> None:
    """One step per stage on the tiny policy of the GRPO run test: stage 1 (outcome) moves the start weights, stage 2
    (RouteRAG efficiency term) starts from stage 1's policy and moves it again; --resume keeps finished stages."""
    import yaml
    from safetensors.torch import load_file

    from effirag.train.rl.log import read_steps
    from effirag.train.rl.run import run_grpo

    # Random weights answer nothing right: the memory cost (α = 1) gives each group varied rewards in both stages.
    cost = "cost: memory, cost_alpha: 1"
    stages = f"stages=[{{name: a, max_steps: 1, objective: {{{cost}}}}}, "
    stages += f"{{name: b, max_steps: 1, objective: {{outcome_weight: 0, routerag_weight: 1, {cost}}}}}]"
    cfg = load_config(GRPORunConfig, ROUTERAG, [*_overrides(setup, tmp_path, steps=1), "env.protocol=searchr1", stages])
    res = run_grpo(cfg)
    assert (res.steps, res.policy_dir) == (2, tmp_path / "b" / "policy")
    second = yaml.safe_load((tmp_path / "b" / "config.yaml").read_text(encoding="utf-8"))
    assert second["env"]["model"] == str(tmp_path / "a" / "policy")
    assert "reward/routerag" in read_steps(tmp_path / "b" / "steps.jsonl")[0]
    assert "reward/routerag" not in read_steps(tmp_path / "a" / "steps.jsonl")[0]
    w0, wa, wb = (
        load_file(str(p / "model.safetensors"))
        for p in (Path(setup["model"]), *(tmp_path / s / "policy" for s in "ab"))
    )
    assert all(not (w0[k] == wa[k]).all() and not (wa[k] == wb[k]).all() for k in w0)
    assert run_grpo(cfg, resume=True).steps == 2  # both stages finished: nothing is retrained
