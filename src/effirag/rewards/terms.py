"""Reward terms by name: ``REWARD_TERMS`` maps a name to the term's function, its small typed config and the
resources it needs (a step ``judge``, ...), so that a run names its terms in YAML and the resources are checked once,
when the run is built.

A term is a pure function ``fn(cfg, batch) -> list[float]``: one value per trajectory of ``batch`` (a
:class:`TermBatch`: the whole rollout batch, its gold answers, their EM and the resources). A user's own term lives in
the user's module, registered on import with :func:`register_term`, and named in the run config
(``objective.imports: [mypackage.rewards]``, ``objective.terms: {my_term: {weight: 0.5, ...its config}}``).

The built-in terms (the seed papers'):

- ``outcome``: EM, F1 or cover-EM of the prediction (Search-R1, TeaRAG eq. 5, HiPRAG's A);
- ``format``: the protocol's own (paper's) format rule, ``trajectory.format_ok``, which the engine sets from
  ``AgentProtocol.format_check`` (Search-R1's per-turn state machine, TeaRAG eq. 6, HiPRAG's F(T));
- ``hiprag``: HiPRAG's hierarchical reward A(1 − λf) + λf·F + λp·A·F·N_corr/N, with a judge for the steps;
- ``routerag``: RouteRAG's stage-2 reward (Appendix A eq. 6–7), o + (t_avg − t)/T for correct rollouts, t_avg the
  mean retrieval time over the whole *batch*; t is measured wall-clock seconds or modeled per retrieval mode.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from effirag.config import check, from_dict, option
from effirag.errors import ConfigError
from effirag.rewards.hiprag import hierarchical_rewards
from effirag.rewards.judges import Judge
from effirag.rewards.outcome import OutcomeMetric, outcome_rewards
from effirag.rewards.routerag import efficiency_rewards, modeled_retrieval_times
from effirag.types import Trajectory

RESOURCES = ("judge",)
"""What a term may declare it needs; the run builds each once (``judge``: a step judge, e.g. the world's)."""
ROUTERAG_TIMES = ("measured", "modeled")


@dataclass(frozen=True)
class TermBatch:
    """What every term sees: the whole batch (batch-centred terms need it), gold answers per trajectory, their EM
    (computed once; the RouteRAG term contains it) and the resources the run built."""

    trajectories: Sequence[Trajectory]
    golds: Sequence[Sequence[str]]
    em: list[float]
    judge: Judge | None = None


TermFn = Callable[[Any, TermBatch], list[float]]


@dataclass(frozen=True)
class TermSpec:
    """A registered reward term: its function, its config class and the resources it needs."""

    fn: TermFn
    config: type[Any]
    needs: frozenset[str] = field(default_factory=frozenset)


REWARD_TERMS: dict[str, TermSpec] = {}


def register_term(name: str, config: type[Any], needs: Sequence[str] = ()) -> Callable[[TermFn], TermFn]:
    """Decorator: register ``fn(cfg: config, batch: TermBatch) -> list[float]`` as the reward term ``name``."""
    unknown = set(needs) - set(RESOURCES)
    if unknown:
        raise ValueError(f"term {name!r} needs unknown resources {sorted(unknown)}; known: {list(RESOURCES)}")

    def add(fn: TermFn) -> TermFn:
        if name in REWARD_TERMS and REWARD_TERMS[name].fn is not fn:
            raise ValueError(f"reward term {name!r} is registered already (by {REWARD_TERMS[name].fn.__module__})")
        REWARD_TERMS[name] = TermSpec(fn, config, frozenset(needs))
        return fn

    return add


def import_modules(owner: str, modules: Sequence[str]) -> None:
    """Import the user's modules named in a config (they register their terms and estimators on import)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as e:
            raise ConfigError(owner, "imports", name, f"cannot be imported ({e}); is it on PYTHONPATH?") from e


def term_spec(owner: str, name: str) -> TermSpec:
    """The registered term ``name``, or a ConfigError naming the known ones."""
    if name not in REWARD_TERMS:
        raise ConfigError(owner, "terms", name, f"unknown reward term; known: {sorted(REWARD_TERMS)}")
    return REWARD_TERMS[name]


def term_config(owner: str, name: str, params: Mapping[str, Any]) -> Any:
    """The typed config of term ``name`` from its mapping (without ``weight``)."""
    return from_dict(term_spec(owner, name).config, dict(params), source=f"{owner}.terms.{name}")


@dataclass(frozen=True)
class OutcomeTerm:
    """The outcome term's settings."""

    metric: str = option("em", help="Outcome metric: em (Search-R1), f1 (TeaRAG eq. 5) or cover_em (HiPRAG's A).")

    def __post_init__(self) -> None:
        metrics = tuple(m.value for m in OutcomeMetric)
        check(self.metric in metrics, self, "metric", f"must be one of {metrics}")


@dataclass(frozen=True)
class FormatTerm:
    """The format term has no settings: 1 when the protocol's format held, else 0."""


@dataclass(frozen=True)
class HipragTerm:
    """HiPRAG's hierarchical reward's settings."""

    lambda_f: float = option(0.2, help="HiPRAG λf: the format share of the hierarchical reward.")
    lambda_p: float = option(0.4, help="HiPRAG λp: weight of the process bonus N_corr/N.")


@dataclass(frozen=True)
class RouteragTerm:
    """RouteRAG's stage-2 efficiency reward's settings."""

    T: float = option(1.0, help="RouteRAG's time scale T in seconds (eq. 7).")
    time: str = option("measured", help="Retrieval time t: measured (wall-clock) or modeled (per-mode seconds).")
    mode_s: dict[str, float] = option(factory=dict, help="Modeled seconds of one search per retrieval mode.")

    def __post_init__(self) -> None:
        check(self.T > 0, self, "T", "must be > 0")
        check(self.time in ROUTERAG_TIMES, self, "time", f"must be one of {ROUTERAG_TIMES}")
        check(self.time != "modeled" or bool(self.mode_s), self, "mode_s", "modeled time needs a cost per mode")
        costs_ok = all(np.isfinite(v) and v >= 0 for v in self.mode_s.values())
        check(costs_ok, self, "mode_s", "every mode's seconds must be finite and >= 0")


@register_term("outcome", OutcomeTerm)
def outcome_term(cfg: OutcomeTerm, batch: TermBatch) -> list[float]:
    """EM, F1 or cover-EM of each prediction against its golds."""
    return outcome_rewards([t.prediction for t in batch.trajectories], batch.golds, cfg.metric)


@register_term("format", FormatTerm)
def format_term(cfg: FormatTerm, batch: TermBatch) -> list[float]:
    """1.0 where the protocol's format held, else 0.0."""
    return [float(t.format_ok) for t in batch.trajectories]


@register_term("hiprag", HipragTerm, needs=("judge",))
def hiprag_term(cfg: HipragTerm, batch: TermBatch) -> list[float]:
    """HiPRAG's hierarchical reward with the run's step judge."""
    assert batch.judge is not None  # the run checked the term's needs when it was built
    return hierarchical_rewards(batch.trajectories, batch.golds, batch.judge, cfg.lambda_f, cfg.lambda_p)


@register_term("routerag", RouteragTerm)
def routerag_term(cfg: RouteragTerm, batch: TermBatch) -> list[float]:
    """RouteRAG's batch-centred efficiency reward on measured or modeled retrieval seconds."""
    trajs = batch.trajectories
    times = modeled_retrieval_times(trajs, cfg.mode_s) if cfg.time == "modeled" else [t.retrieval_s for t in trajs]
    return efficiency_rewards(batch.em, times, cfg.T)
