"""Rewards composed from config: a weighted sum of named reward terms (:mod:`effirag.rewards.terms`).

Per trajectory, the scalar reward is ``r = Σ weight_t · term_t`` over the terms with a non-zero weight. The seed
papers' terms have flat fields here (``outcome_weight``, ``format_weight``, ``hiprag_weight``, ``routerag_weight`` and
their settings); any registered term, a user's own included, is named in ``terms`` with its weight and settings, its
module in ``imports``.

How the reward becomes the trainer's advantage is the estimator's business (:mod:`effirag.train.algos`):
``advantage`` names it; ``cost`` (Dynamic Search-R1's memory- or latency-bound cost, eq. 3) selects ``dsr1_cost``, whose
settings are ``cost_alpha``, ``c_g``, ``c_e`` and ``cost_floor``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.errors import ConfigError
from effirag.rewards.judges import Judge
from effirag.rewards.outcome import OutcomeMetric, outcome_rewards
from effirag.rewards.terms import (
    ROUTERAG_TIMES,
    FormatTerm,
    HipragTerm,
    OutcomeTerm,
    RouteragTerm,
    TermBatch,
    import_modules,
    term_config,
    term_spec,
)
from effirag.types import Trajectory

COSTS = ("none", "memory", "latency")


@dataclass(frozen=True)
class RewardConfig:
    """Which reward terms make the scalar reward, their weights, and the advantage estimator that trains on it."""

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
    terms: dict[str, dict[str, Any]] = option(
        factory=dict,
        help="More reward terms by registered name (effirag.rewards.REWARD_TERMS, or a term of a module in "
        "imports): {name: {weight: W, ...the term's settings}}.",
    )
    imports: tuple[str, ...] = option(
        (), help="Python modules imported before the terms and advantage are looked up (they register the user's own)."
    )
    advantage: str = option(
        "",
        help="Advantage estimator by registered name (effirag.train.algos.ADVANTAGES: grpo, dsr1_cost, gae, or one "
        "of a module in imports); '': dsr1_cost when cost is set, else the trainer's own (GRPO: grpo, PPO: gae).",
    )
    advantage_args: dict[str, Any] = option(
        factory=dict, help="Settings of a named estimator that are not the flat cost fields below (a user's own)."
    )
    cost: str = option("none", help="Dynamic Search-R1 cost-aware advantage: none, memory or latency (eq. 2-3).")
    cost_alpha: float = option(0.1, help="α of A = z(r) − α·z(c) (GRPO, eq. 2) and of r − α·c (PPO, eq. 5).")
    c_g: float = option(0.0, help="Latency cost: seconds per generated token (profile it on the serving backend).")
    c_e: float = option(0.0, help="Latency cost: seconds per inserted (prefilled) token.")
    cost_floor: float = option(0.2, help="ε of Dynamic Search-R1 eq. 5 (PPO): the outcome is max(r·ε, r − α·c).")

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
        check(np.isfinite(self.cost_alpha), self, "cost_alpha", "must be finite")
        check(0 <= self.cost_floor <= 1, self, "cost_floor", "must be in [0, 1]")
        object.__setattr__(self, "imports", tuple(self.imports))
        flat = {name for name, _w, _c in self._flat_terms()}
        for name, params in self.terms.items():
            check(isinstance(params, Mapping), self, "terms", f"{name}: needs a mapping {{weight: W, ...}}")
            check("weight" in params, self, "terms", f"{name}: needs a weight")
            check(name not in flat, self, "terms", f"{name} is set by its flat field already")
        weights = [self.outcome_weight, self.format_weight, self.hiprag_weight, self.routerag_weight]
        weights += [float(p["weight"]) for p in self.terms.values()]
        check(any(w != 0 for w in weights), self, "outcome_weight", "every reward weight is 0")
        flat_cost = self.advantage in ("", "dsr1_cost")
        check(self.cost == "none" or flat_cost, self, "cost", f"is dsr1_cost's setting, not {self.advantage}'s")

    def _flat_terms(self) -> list[tuple[str, float, Any]]:
        """The seed papers' terms set by the flat fields, in the order they are summed."""
        out: list[tuple[str, float, Any]] = []
        if self.outcome_weight:
            out.append(("outcome", self.outcome_weight, OutcomeTerm(self.outcome)))
        if self.format_weight:
            out.append(("format", self.format_weight, FormatTerm()))
        if self.hiprag_weight:
            out.append(("hiprag", self.hiprag_weight, HipragTerm(self.hiprag_lambda_f, self.hiprag_lambda_p)))
        if self.routerag_weight:
            route = RouteragTerm(self.routerag_T, self.routerag_time, dict(self.routerag_mode_s))
            out.append(("routerag", self.routerag_weight, route))
        return out

    def weighted_terms(self) -> list[tuple[str, float, Any]]:
        """(name, weight, typed config) of every term with a non-zero weight: the flat ones, then ``terms``. The
        modules of ``imports`` are imported first (a user's terms register on import)."""
        import_modules("RewardConfig", self.imports)
        out = self._flat_terms()
        for name, params in self.terms.items():
            weight = float(params["weight"])
            if weight:
                settings = {k: v for k, v in params.items() if k != "weight"}
                out.append((name, weight, term_config("RewardConfig", name, settings)))
        return out

    def needs(self) -> set[str]:
        """The resources the enabled terms need (e.g. ``judge``)."""
        return {r for name, _w, _c in self.weighted_terms() for r in term_spec("RewardConfig", name).needs}


def check_resources(cfg: RewardConfig, owner: str, field: str, judge: Judge | None) -> None:
    """Fail fast, once, when an enabled term needs a resource the run did not build (``field`` names the setting
    of ``owner`` that would provide it)."""
    missing = sorted(r for r in cfg.needs() if r == "judge" and judge is None)
    if missing:
        names = [n for n, _w, _c in cfg.weighted_terms() if "judge" in term_spec("RewardConfig", n).needs]
        raise ConfigError(owner, field, "", f"the reward term(s) {names} need a step judge: set {field}")


def reward_components(
    cfg: RewardConfig, trajectories: Sequence[Trajectory], golds: Sequence[Sequence[str]], judge: Judge | None = None
) -> dict[str, list[float]]:
    """Every enabled term per trajectory, their weighted sum ``total`` (the scalar reward r) and always ``em`` (for
    logging).

    ``trajectories`` is the whole batch (the RouteRAG term is batch-centred); ``golds[i]`` are trajectory i's answers.
    """
    if len(golds) != len(trajectories):
        raise ValueError(f"{len(golds)} gold lists for {len(trajectories)} trajectories")
    em = outcome_rewards([t.prediction for t in trajectories], golds, OutcomeMetric.EM)
    batch = TermBatch(trajectories, golds, em, judge)
    out: dict[str, list[float]] = {"em": em}
    terms: list[tuple[float, list[float]]] = []
    for name, weight, settings in cfg.weighted_terms():
        spec = term_spec("RewardConfig", name)
        if "judge" in spec.needs and judge is None:
            raise ValueError(f"the reward term {name!r} needs a step judge and none was given")
        values = [float(v) for v in spec.fn(settings, batch)]
        if len(values) != len(trajectories):
            raise ValueError(f"reward term {name!r} gave {len(values)} values for {len(trajectories)} trajectories")
        out[name] = values
        terms.append((weight, values))
    out["total"] = [float(sum(w * term[i] for w, term in terms)) for i in range(len(trajectories))]
    return out
