"""RouteRAG's stage-2 reward with modeled retrieval time: the same rollouts get the same rewards in every run.

Measured wall-clock retrieval seconds differ between two runs of one seed (machine load, the first graph search's
warm-up), and the efficiency reward turned that noise into different advantages and a different stage-2 policy; the
recipe prices each search by its route instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.config import load_config
from effirag.errors import ConfigError
from effirag.rewards.compose import RewardConfig, reward_components
from effirag.rewards.routerag import modeled_retrieval_times
from effirag.train.rl.grpo import GRPORunConfig
from effirag.train.rl.run import stage_configs
from effirag.types import Action, Step, Trajectory

ROUTERAG = Path(__file__).resolve().parents[1] / "configs" / "rl" / "routerag_grpo.yaml"
COSTS = {"passage": 0.01, "graph": 0.03, "hybrid": 0.05}


def _traj(pred: str, routes: list[str], seconds: list[float], answered: bool = True) -> Trajectory:
    steps = [Step(Action.SEARCH, query="q", mode=m, retrieval_s=s) for m, s in zip(routes, seconds, strict=True)]
    steps.append(Step(Action.INVALID, error="bad turn"))  # no retrieval, no cost
    if answered:
        steps.append(Step(Action.ANSWER, answer=pred))
    return Trajectory("q1", "q?", "routerag", steps=steps, prediction=pred, format_ok=True)


def _batch(seconds: list[list[float]]) -> list[Trajectory]:
    """Four rollouts of one question, all correct but the last; ``seconds`` are their searches' measured times."""
    routes = [["graph", "passage"], ["hybrid"], ["passage"], ["graph"]]
    preds = ["Paris", "Paris", "Paris", "Lyon"]
    return [_traj(p, r, s) for p, r, s in zip(preds, routes, seconds, strict=True)]


RUN_A = [[0.29, 0.004], [0.011], [0.005], [0.008]]  # the first graph search of the process loads the graph
RUN_B = [[0.007, 0.006], [0.014], [0.004], [0.009]]  # the same rollouts in a second run, on a busier machine


def test_modeled_times_sum_each_searchs_route_cost() -> None:
    """Searches and <more info> requests cost their mode's seconds; other steps nothing: [0.03 + 0.01, 0.05, 0.01,
    0.03], and a <more info> on the graph adds 0.03."""
    assert modeled_retrieval_times(_batch(RUN_A), COSTS) == pytest.approx([0.04, 0.05, 0.01, 0.03])
    more = _traj("x", ["graph"], [0.1])
    more.steps.append(Step(Action.MORE_INFO, query="q", mode="graph", retrieval_s=0.2))
    assert modeled_retrieval_times([more], COSTS) == pytest.approx([0.06])


def test_modeled_reward_is_hand_worked_and_ignores_measured_seconds() -> None:
    """Modeled t = [0.04, 0.05, 0.01, 0.03], t_avg = 0.13 / 4 = 0.0325, T = 0.1: the correct rollouts get
    1 + (0.0325 − t) / 0.1 = [0.925, 0.825, 1.225], the wrong one 0 — in both runs."""
    cfg = RewardConfig(outcome_weight=0.0, routerag_weight=1.0, routerag_T=0.1, routerag_time="modeled",
                       routerag_mode_s=COSTS)  # fmt: skip
    golds = [["Paris"]] * 4
    a = reward_components(cfg, _batch(RUN_A), golds)["total"]
    assert a == pytest.approx([0.925, 0.825, 1.225, 0.0])
    assert reward_components(cfg, _batch(RUN_B), golds)["total"] == a
    measured = RewardConfig(outcome_weight=0.0, routerag_weight=1.0, routerag_T=0.1)
    assert reward_components(measured, _batch(RUN_A), golds)["total"] != a  # the paper's literal t: run-dependent


def test_the_recipes_stage_two_rewards_the_same_rollouts_alike_in_every_run() -> None:
    """The regression: configs/rl/routerag_grpo.yaml's efficiency stage gave these two runs' identical rollouts
    different rewards (their measured seconds differ), hence different advantages, weights and eval figures."""
    cfg = load_config(GRPORunConfig, ROUTERAG, ["env.model=/m", "output_dir=/out"])
    reward = stage_configs(cfg)[1].objective
    golds = [["Paris"]] * 4
    a = reward_components(reward, _batch(RUN_A), golds)
    b = reward_components(reward, _batch(RUN_B), golds)
    assert a["total"] == b["total"] and a["em"] == [1.0, 1.0, 1.0, 0.0]
    assert len(set(a["total"][:3])) == 3  # the routes still set the correct rollouts apart


def test_modeled_time_needs_a_cost_for_every_route() -> None:
    with pytest.raises(ConfigError, match="routerag_mode_s"):
        RewardConfig(routerag_weight=1.0, routerag_time="modeled")
    with pytest.raises(ConfigError, match="routerag_mode_s"):
        RewardConfig(routerag_weight=1.0, routerag_time="modeled", routerag_mode_s={"graph": -1.0})
    with pytest.raises(ConfigError, match="routerag_time"):
        RewardConfig(routerag_weight=1.0, routerag_time="wallclock")
    with pytest.raises(ValueError, match=r"question 'q1' step 0: retrieval mode 'graph' has no modeled cost"):
        modeled_retrieval_times([_traj("x", ["graph"], [0.1])], {"passage": 0.01})
