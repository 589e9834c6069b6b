"""Rewards composed from config: terms, weights, the batch-centred RouteRAG term and the group-level cost-aware
advantage, with numbers worked out by hand."""

from __future__ import annotations

import pytest

from effirag.errors import ConfigError
from effirag.rewards.compose import RewardConfig, reward_components
from effirag.train.objective import ComposedReward, build_objective
from effirag.types import Action, Step, Trajectory


def _traj(qid: str, pred: str | None, fmt: bool, gen: int, ins: int, ret_s: float = 0.0) -> Trajectory:
    step = Step(Action.SEARCH, generated_tokens=gen, inserted_tokens=ins, retrieval_s=ret_s)
    return Trajectory(qid, "q?", "searchr1", steps=[step], prediction=pred, format_ok=fmt)


# q1: three samples; q2: two samples with equal rewards.
BATCH = [
    _traj("q1", "Paris", True, 10, 20, 0.2),
    _traj("q1", "paris x", True, 4, 0, 0.4),
    _traj("q1", None, False, 6, 0, 0.0),
    _traj("q2", "Lyon", True, 5, 0, 0.6),
    _traj("q2", "Lyon", True, 5, 10, 0.3),
]
GOLDS = [["Paris"]] * 3 + [["Lyon"]] * 2


def test_weighted_terms_and_metrics() -> None:
    """EM = [1, 0, 0, 1, 1]; cover-EM of "paris x" is 1; F1("paris x", "paris") = 2·(1/2·1)/(1/2 + 1) = 2/3.
    outcome=f1 (weight 1) + format (weight 0.5): r = [1.5, 2/3 + 0.5, 0, 1.5, 1.5]."""
    cfg = RewardConfig(outcome="f1", format_weight=0.5)
    c = reward_components(cfg, BATCH, GOLDS)
    assert c["em"] == [1.0, 0.0, 0.0, 1.0, 1.0]
    assert c["outcome"] == pytest.approx([1.0, 2 / 3, 0.0, 1.0, 1.0])
    assert c["format"] == [1.0, 1.0, 0.0, 1.0, 1.0]
    assert c["total"] == pytest.approx([1.5, 2 / 3 + 0.5, 0.0, 1.5, 1.5])
    assert "cost" not in c and build_objective(cfg, "grpo").group_values(c, BATCH, 1) == c["total"]
    assert reward_components(RewardConfig(outcome="cover_em"), BATCH, GOLDS)["outcome"][1] == 1.0


def test_routerag_term_is_centred_on_the_whole_batch() -> None:
    """Retrieval times [0.2, 0.4, 0, 0.6, 0.3]: t_avg = 1.5 / 5 = 0.3 over the batch (right and wrong alike); T = 1.
    r = o + (t_avg − t) for correct rollouts: [1 + 0.1, 0, 0, 1 − 0.3, 1 + 0] = [1.1, 0, 0, 0.7, 1.0]."""
    cfg = RewardConfig(outcome_weight=0.0, routerag_weight=1.0, routerag_T=1.0)
    c = reward_components(cfg, BATCH, GOLDS)
    assert c["total"] == pytest.approx([1.1, 0.0, 0.0, 0.7, 1.0])


def test_cost_aware_group_values() -> None:
    """EM + 0.5·format: r_q1 = [1.5, 0.5, 0]; memory costs (generated + inserted) c_q1 = [30, 4, 6]; α = 0.5.
    z(r): mean 2/3, deviations (5/6, −1/6, −2/3), population var = (25 + 1 + 16)/36/3 = 7/18, std = 0.623610:
    z(r) = (1.336306, −0.267261, −1.069045). z(c): mean 40/3, deviations (50/3, −28/3, −22/3), var = 3768/27,
    std = 11.813363: z(c) = (1.410828, −0.790063, −0.620764). A = z(r) − 0.5·z(c) = (0.630892, 0.127771, −0.758663).
    q2 (all rewards equal, 1.5 each): z(r) = 0; costs [10, 15] give z(c) = (−1, 1), so A = (0.5, −0.5)."""
    cfg = RewardConfig(format_weight=0.5, cost="memory", cost_alpha=0.5)
    objective = build_objective(cfg, "grpo")
    c = objective.components(BATCH, GOLDS, 1)
    assert c["cost"] == [30.0, 4.0, 6.0, 5.0, 15.0]
    # Groups of one question each: the first three, then the last two — sizes differ, so score them separately.
    a1 = objective.group_values({k: v[:3] for k, v in c.items()}, BATCH[:3], 3)
    a2 = objective.group_values({k: v[3:] for k, v in c.items()}, BATCH[3:], 2)
    assert a1 == pytest.approx([0.630892, 0.127771, -0.758663], abs=1e-5)
    assert a2 == pytest.approx([0.5, -0.5])
    lat = RewardConfig(cost="latency", c_g=0.01, c_e=0.001)
    lat_cost = build_objective(lat, "grpo").components(BATCH[:1], GOLDS[:1], 1)["cost"]
    assert lat_cost == pytest.approx([10 * 0.01 + 20 * 0.001])


def test_trl_style_callable_checks_groups_and_logs_components() -> None:
    logged: dict[str, float] = {}
    fn = ComposedReward(build_objective(RewardConfig(cost="memory", cost_alpha=0.5), "grpo"), group_size=2)
    batch, golds = BATCH[3:], GOLDS[3:]
    out = fn(["p"] * 2, ["c"] * 2, trajectory=batch, golds=golds, log_metric=logged.__setitem__)
    assert out == pytest.approx([0.5, -0.5])
    assert logged["reward/em"] == 1.0 and logged["reward/cost"] == 10.0 and fn.last["total"] == [1.0, 1.0]
    with pytest.raises(ValueError, match="mixes questions"):
        fn(["p"] * 2, ["c"] * 2, trajectory=BATCH[2:4], golds=GOLDS[2:4])


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="cost"):
        RewardConfig(cost="energy")
    with pytest.raises(ConfigError, match="outcome_weight"):
        RewardConfig(outcome_weight=0.0)
    with pytest.raises(ConfigError, match="c_g"):
        RewardConfig(cost="latency")
    with pytest.raises(ConfigError, match=r"\['hiprag'\] need a step judge"):
        build_objective(RewardConfig(hiprag_weight=1.0), "grpo")


class _AllOverSearch:
    """A step judge that calls every search an over-search and no reasoning step wrong."""

    def over_search(self, steps: object) -> list[bool]:
        return [True] * len(steps)  # type: ignore[arg-type]

    def under_search(self, steps: object) -> list[bool]:
        return [False] * len(steps)  # type: ignore[arg-type]


def test_hiprag_term_is_the_hierarchical_reward_with_the_given_judge() -> None:
    """The term is :func:`hierarchical_rewards` of the batch with the judge, weighted (here 2 × it, no outcome)."""
    from effirag.rewards.hiprag import hierarchical_rewards

    judge = _AllOverSearch()
    cfg = RewardConfig(outcome_weight=0.0, hiprag_weight=2.0)
    c = reward_components(cfg, BATCH, GOLDS, judge)
    want = hierarchical_rewards(BATCH, GOLDS, judge, 0.2, 0.4)
    assert c["hiprag"] == want and c["total"] == [2 * w for w in want]
    # A = cover-EM (1, 1, 0, 1, 1); F = format (1, 1, 0, 1, 1): A(1 − 0.2) + 0.2·F is 1 or 0; each trajectory's
    # only step is a search the judge calls an over-search, so N_corr = 0 and the process bonus λp·A·F·N_corr/N is 0.
    assert want == pytest.approx([1.0, 1.0, 0.0, 1.0, 1.0])
