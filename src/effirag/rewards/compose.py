"""Rewards composed from config: a weighted sum of the seed methods' reward terms, optionally made cost-aware.

Per trajectory, the scalar reward is ``r = Σ weight_t · term_t`` over the terms with a non-zero weight:

- ``outcome``: EM, F1 or cover-EM of the prediction (Search-R1, TeaRAG eq. 5, HiPRAG's A);
- ``format``: the protocol's own format verdict, ``trajectory.format_ok`` (the engine's parser and rule);
- ``hiprag``: HiPRAG's hierarchical reward A(1 − λf) + λf·F + λp·A·F·N_corr/N, with a judge for the steps;
- ``routerag``: RouteRAG's stage-2 reward (Appendix A eq. 6–7), o + (t_avg − t)/T for correct rollouts, whose
  t_avg is the mean retrieval time over the whole *batch* (it contains the EM outcome o, so stage 2 uses it with
  ``outcome_weight: 0``); t is measured wall-clock seconds or, reproducible run to run, modeled per retrieval mode.

With ``cost`` set (Dynamic Search-R1), the value handed to the trainer for trajectory i of a group of G samples of
one question is the cost-aware advantage A_i = z(r_i) − α·z(c_i) of eq. 2, computed within the *group*; c is the
memory-bound (generated + inserted tokens) or latency-bound (c_g·generated + c_e·inserted seconds) cost of eq. 3.
A has zero mean in every group, so a GRPO trainer that only subtracts the group mean (TRL: ``scale_rewards="none"``)
uses it unchanged as the advantage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.rewards.cost import grpo_cost_aware_advantages, latency_cost, memory_cost
from effirag.rewards.hiprag import hierarchical_rewards
from effirag.rewards.judges import Judge
from effirag.rewards.outcome import OutcomeMetric, outcome_rewards
from effirag.rewards.routerag import efficiency_rewards, modeled_retrieval_times
from effirag.types import Trajectory

COSTS = ("none", "memory", "latency")
ROUTERAG_TIMES = ("measured", "modeled")


@dataclass(frozen=True)
class RewardConfig:
    """Which reward terms make the scalar reward, their weights, and whether the result is made cost-aware."""

    outcome: str = option("em", help="Outcome metric: em (Search-R1), f1 (TeaRAG eq. 5) or cover_em (HiPRAG's A).")
    outcome_weight: float = option(1.0, help="Weight of the outcome term.")
    format_weight: float = option(0.0, help="Weight of the protocol's format verdict (1 when the format held).")
    hiprag_weight: float = option(0.0, help="Weight of HiPRAG's hierarchical reward (needs a step judge).")
    hiprag_lambda_f: float = option(0.2, help="HiPRAG λf: the format share of the hierarchical reward.")
    hiprag_lambda_p: float = option(0.4, help="HiPRAG λp: weight of the process bonus N_corr/N.")
    routerag_weight: float = option(0.0, help="Weight of RouteRAG's stage-2 efficiency reward (contains EM).")
    routerag_T: float = option(1.0, help="RouteRAG's time scale T in seconds (eq. 7).")
    routerag_time: str = option(
        "measured",
        help="RouteRAG's retrieval time t: measured (each rollout's wall-clock retrieval seconds, the paper's; they "
        "vary with the machine's load, so two runs of one seed train different policies) or modeled (the sum of "
        "routerag_mode_s over the rollout's searches: the same in every run).",
    )
    routerag_mode_s: dict[str, float] = option(
        factory=dict,
        help="Modeled seconds of one search per retrieval mode, e.g. {passage: 0.005, graph: 0.008, hybrid: 0.012} "
        "(measure them on your index: the median retrieval seconds per mode of an eval's trajectories).",
    )
    cost: str = option("none", help="Dynamic Search-R1 cost-aware advantage: none, memory or latency (eq. 2-3).")
    cost_alpha: float = option(0.1, help="α of A = z(r) − α·z(c).")
    c_g: float = option(0.0, help="Latency cost: seconds per generated token (profile it on the serving backend).")
    c_e: float = option(0.0, help="Latency cost: seconds per inserted (prefilled) token.")

    def __post_init__(self) -> None:
        metrics = tuple(m.value for m in OutcomeMetric)
        check(self.outcome in metrics, self, "outcome", f"must be one of {metrics}")
        check(self.cost in COSTS, self, "cost", f"must be one of {COSTS}")
        check(self.routerag_T > 0, self, "routerag_T", "must be > 0")
        check(self.routerag_time in ROUTERAG_TIMES, self, "routerag_time", f"must be one of {ROUTERAG_TIMES}")
        modeled = self.routerag_time == "modeled"
        check(not modeled or bool(self.routerag_mode_s), self, "routerag_mode_s", "modeled time needs a cost per mode")
        costs_ok = all(np.isfinite(v) and v >= 0 for v in self.routerag_mode_s.values())
        check(costs_ok, self, "routerag_mode_s", "every mode's seconds must be finite and >= 0")
        check(self.c_g >= 0 and self.c_e >= 0, self, "c_g", "c_g and c_e must be >= 0")
        check(self.cost != "latency" or self.c_g + self.c_e > 0, self, "c_g", "latency cost needs c_g or c_e > 0")
        weights = (self.outcome_weight, self.format_weight, self.hiprag_weight, self.routerag_weight)
        check(any(w != 0 for w in weights), self, "outcome_weight", "every reward weight is 0")
        check(np.isfinite(self.cost_alpha), self, "cost_alpha", "must be finite")


def reward_components(
    cfg: RewardConfig, trajectories: Sequence[Trajectory], golds: Sequence[Sequence[str]], judge: Judge | None = None
) -> dict[str, list[float]]:
    """Every enabled term per trajectory, their weighted sum ``total`` (the scalar reward r), always ``em`` (for
    logging) and, with a cost, ``cost``.

    ``trajectories`` is the whole batch (the RouteRAG term is batch-centred); ``golds[i]`` are trajectory i's answers.
    """
    if len(golds) != len(trajectories):
        raise ValueError(f"{len(golds)} gold lists for {len(trajectories)} trajectories")
    preds = [t.prediction for t in trajectories]
    em = outcome_rewards(preds, golds, OutcomeMetric.EM)
    out: dict[str, list[float]] = {"em": em}
    terms: list[tuple[float, list[float]]] = []
    if cfg.outcome_weight:
        out["outcome"] = outcome_rewards(preds, golds, cfg.outcome)
        terms.append((cfg.outcome_weight, out["outcome"]))
    if cfg.format_weight:
        out["format"] = [float(t.format_ok) for t in trajectories]
        terms.append((cfg.format_weight, out["format"]))
    if cfg.hiprag_weight:
        if judge is None:
            raise ValueError("RewardConfig.hiprag_weight is set but no step judge was given")
        out["hiprag"] = hierarchical_rewards(trajectories, golds, judge, cfg.hiprag_lambda_f, cfg.hiprag_lambda_p)
        terms.append((cfg.hiprag_weight, out["hiprag"]))
    if cfg.routerag_weight:
        if cfg.routerag_time == "modeled":
            times = modeled_retrieval_times(trajectories, cfg.routerag_mode_s)
        else:
            times = [t.retrieval_s for t in trajectories]
        out["routerag"] = efficiency_rewards(em, times, cfg.routerag_T)
        terms.append((cfg.routerag_weight, out["routerag"]))
    out["total"] = [float(sum(w * term[i] for w, term in terms)) for i in range(len(trajectories))]
    gen = [t.generated_tokens for t in trajectories]
    ins = [t.inserted_tokens for t in trajectories]
    if cfg.cost == "memory":
        out["cost"] = [float(x) for x in memory_cost(gen, ins)]
    elif cfg.cost == "latency":
        out["cost"] = [float(x) for x in latency_cost(gen, ins, cfg.c_g, cfg.c_e)]
    return out


def trainer_rewards(cfg: RewardConfig, components: dict[str, list[float]], group_size: int) -> list[float]:
    """What the trainer receives per trajectory: the scalar reward, or with a cost the cost-aware advantage
    z(r) − α·z(c) of each consecutive group of ``group_size`` trajectories (one question's samples)."""
    reward = components["total"]
    if cfg.cost == "none":
        return list(reward)
    if group_size < 1 or len(reward) % group_size:
        raise ValueError(f"{len(reward)} trajectories do not split into groups of {group_size}")
    out: list[float] = []
    for g in range(0, len(reward), group_size):
        cost = components["cost"][g : g + group_size]
        out += grpo_cost_aware_advantages(reward[g : g + group_size], cost, cfg.cost_alpha)
    return out


class ComposedReward:
    """A TRL-style reward function ``(prompts, completions, **kwargs) -> list[float]`` over engine trajectories.

    It reads ``trajectory`` (one :class:`~effirag.types.Trajectory` per completion) and ``golds`` (one list of gold
    answers per completion) from the keyword arguments (the rollout's extra fields and the dataset's columns), checks
    that each consecutive group of ``group_size`` holds one question, returns :func:`trainer_rewards`, keeps the
    components of the last call in ``last`` and reports their means through TRL's ``log_metric`` when given.
    """

    __name__ = "effirag_reward"

    def __init__(self, cfg: RewardConfig, group_size: int, judge: Judge | None = None) -> None:
        if cfg.hiprag_weight and judge is None:
            raise ValueError("RewardConfig.hiprag_weight is set but no step judge was given")
        self.cfg = cfg
        self.group_size = group_size
        self.judge = judge
        self.last: dict[str, list[float]] = {}

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
        trajs: list[Trajectory] = list(kwargs["trajectory"])
        golds: list[Sequence[str]] = list(kwargs["golds"])
        if len(trajs) != len(completions):
            raise ValueError(f"{len(trajs)} trajectories for {len(completions)} completions")
        for g in range(0, len(trajs), self.group_size):
            ids = {t.question_id for t in trajs[g : g + self.group_size]}
            if len(ids) != 1:
                raise ValueError(f"group at {g} mixes questions {sorted(ids)}: groups must hold one question")
        self.last = reward_components(self.cfg, trajs, golds, self.judge)
        values = trainer_rewards(self.cfg, self.last, self.group_size)
        log_metric: Callable[[str, float], None] | None = kwargs.get("log_metric")
        if log_metric is not None:
            for name, vals in self.last.items():
                log_metric(f"reward/{name}", float(np.mean(vals)))
        return values
