"""Length-aware IP-DPO pairing: the token cost, the shortest-first tie order and their effect on eq. 14's pairs,
worked by hand; the defaults reproduce TeaRAG's pairs exactly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from effirag.errors import ConfigError
from effirag.rewards.tearag import DPOSample, PairRule, PathLength, build_dpo_pairs, tie_order, token_cost_score
from effirag.train.dpo.config import IPDPORunConfig
from test_rewards_tearag import MULTI, SINGLE


def test_token_cost_score_by_hand() -> None:
    """2.8 − 0.2·150/100 = 2.5; 2.0 − 0.3·50/100 = 1.85; no cost leaves the total as it is; 0 tokens cost nothing."""
    assert token_cost_score(2.8, 150, 0.2) == pytest.approx(2.5)
    assert token_cost_score(2.0, 50, 0.3) == pytest.approx(1.85)
    assert token_cost_score(2.75, 400, 0.0) == 2.75
    assert token_cost_score(1.0, 0, 5.0) == 1.0
    with pytest.raises(ValueError, match="generated_tokens=-1"):
        token_cost_score(1.0, -1, 0.1)


LENGTHS4 = [PathLength(120, 3), PathLength(80, 2), PathLength(60, 2), PathLength(200, 4)]


def test_tie_order_by_hand() -> None:
    """Scores 2.0, 2.0, 1.99, 1.0 with tokens 120, 80, 60, 200.
    first, best-first: by score, ties by index → 0, 1, 2, 3 (lengths unused).
    shortest, tolerance 0, best-first: tie {0, 1} shortest first → 1 (80), 0 (120); then 2, 3.
    shortest, tolerance 0.02, best-first: group {0, 1, 2} (within 0.02 of 2.0) → 2 (60), 1 (80), 0 (120); then 3.
    shortest, tolerance 0, worst-first: 3, 2, then tie {0, 1} longest first → 0 (120), 1 (80)."""
    scores = [2.0, 2.0, 1.99, 1.0]
    assert tie_order(scores, None, descending=True, rule=PairRule()) == [0, 1, 2, 3]
    assert tie_order(scores, LENGTHS4, descending=True, rule=PairRule("shortest")) == [1, 0, 2, 3]
    assert tie_order(scores, LENGTHS4, descending=True, rule=PairRule("shortest", 0.02)) == [2, 1, 0, 3]
    assert tie_order(scores, LENGTHS4, descending=False, rule=PairRule("shortest")) == [3, 2, 0, 1]


def test_tie_order_breaks_equal_tokens_by_steps_then_index() -> None:
    """Three paths of score 1 and 100 tokens with 3, 2, 2 steps: best-first 1, 2 (2 steps, by index), 0;
    worst-first 0 (3 steps), then 1, 2 (by index)."""
    lengths = [PathLength(100, 3), PathLength(100, 2), PathLength(100, 2)]
    assert tie_order([1.0] * 3, lengths, descending=True, rule=PairRule("shortest")) == [1, 2, 0]
    assert tie_order([1.0] * 3, lengths, descending=False, rule=PairRule("shortest")) == [0, 1, 2]


# Single-hop group: two correct one-step answers of different length, two wrong answers of different length.
SHORT_GROUP = [DPOSample(1, 1.0, 0.0), DPOSample(1, 1.0, 0.0), DPOSample(1, 0.0, 0.0), DPOSample(1, 0.0, 0.0)]
SHORT_LENGTHS = [PathLength(140, 3), PathLength(90, 2), PathLength(60, 2), PathLength(200, 4)]


def test_shortest_pairs_the_short_correct_path_with_the_long_wrong_one() -> None:
    """Totals 2, 2, 1, 1 (single-hop). TeaRAG: ascending 2, 3, 0, 1; chosen 0, 1 → (0, 2), (1, 3).
    shortest: chosen 1 (90 tokens) before 0 (140); ascending tie {2, 3} longest first → 3 (200), 2 (60);
    1 → 3, 0 → 2 → (1, 3), (0, 2)."""
    assert build_dpo_pairs(SHORT_GROUP, True, SHORT_LENGTHS) == [(0, 2), (1, 3)]
    assert build_dpo_pairs(SHORT_GROUP, True, SHORT_LENGTHS, PairRule("shortest")) == [(1, 3), (0, 2)]


def test_shortest_decides_which_chosen_path_gets_the_only_rejection() -> None:
    """Two correct paths (140 and 90 tokens) and one format failure: TeaRAG pairs the lower index (0, 2);
    shortest pairs the 90-token path (1, 2)."""
    group = [DPOSample(1, 1.0, 0.0), DPOSample(1, 1.0, 0.0), DPOSample(0, 0.0, 0.0)]
    lengths = [PathLength(140, 3), PathLength(90, 2), PathLength(300, 5)]
    assert build_dpo_pairs(group, True, lengths) == [(0, 2)]
    assert build_dpo_pairs(group, True, lengths, PairRule("shortest")) == [(1, 2)]


# Multi-hop group for the token cost (0.3 per 100 tokens): total → cost-adjusted total.
COST_GROUP = [
    DPOSample(1, 1.0, 0.80),  # 0: 2.80, 180 tokens → 2.80 − 0.54 = 2.26 chosen
    DPOSample(1, 1.0, 0.75),  # 1: 2.75, 110 tokens → 2.75 − 0.33 = 2.42 chosen
    DPOSample(1, 1.0, 0.60),  # 2: 2.60, 20 tokens → 2.54: best adjusted, but never chosen (process < 0.7)
    DPOSample(1, 0.0, 0.50),  # 3: 1.50, 50 tokens → 1.35 easy rejection
    DPOSample(1, 0.0, 0.60),  # 4: 1.60, 150 tokens → 1.15 easy rejection
]
COST_LENGTHS = [PathLength(180, 4), PathLength(110, 3), PathLength(20, 1), PathLength(50, 2), PathLength(150, 3)]


def test_token_cost_reorders_both_sides_but_not_eligibility() -> None:
    """TeaRAG: ascending 3, 4, 2, 1, 0; chosen 0, 1 → (0, 3), (1, 4).
    Cost 0.3: ascending 4 (1.15), 3 (1.35), 0, 1, 2; chosen 1 (2.42), 0 (2.26) — 2 stays out of the chosen set
    although it scores best → (1, 4), (0, 3): the shorter correct path against the longer wrong one."""
    assert build_dpo_pairs(COST_GROUP, False, COST_LENGTHS) == [(0, 3), (1, 4)]
    assert build_dpo_pairs(COST_GROUP, False, COST_LENGTHS, PairRule(token_cost=0.3)) == [(1, 4), (0, 3)]
    # A cost too small to bridge 2.80 − 2.75 = 0.05 over 70 tokens (0.05·70/100 = 0.035) keeps TeaRAG's chosen order.
    assert build_dpo_pairs(COST_GROUP, False, COST_LENGTHS, PairRule(token_cost=0.05))[0][0] == 0


def test_rejected_not_shorter_passes_over_short_rejections() -> None:
    """SHORT_GROUP (chosen 0: 140 tokens, 1: 90; rejections 2: 60, 3: 200), rejected_not_shorter on.
    TeaRAG's orders (ascending 2, 3, 0, 1; chosen 0, 1): c = 0 passes over 2 (60 < 140), takes 3 → (0, 3), the cursor
    moves past 3; c = 1 finds only 0 and itself, neither a rejection → [(0, 3)] (TeaRAG alone: (0, 2), (1, 3)).
    With shortest (ascending 3, 2, 0, 1; chosen 1, 0): c = 1 takes 3 (200 ≥ 90); c = 0 passes over 2 → [(1, 3)]."""
    strict = PairRule(rejected_not_shorter=True)
    assert build_dpo_pairs(SHORT_GROUP, True, SHORT_LENGTHS, strict) == [(0, 3)]
    both = PairRule("shortest", rejected_not_shorter=True)
    assert build_dpo_pairs(SHORT_GROUP, True, SHORT_LENGTHS, both) == [(1, 3)]
    # An equally long rejection is allowed: 60 → 140 tokens makes 2 pair with 0 again.
    even = [*SHORT_LENGTHS[:2], PathLength(140, 2), SHORT_LENGTHS[3]]
    assert build_dpo_pairs(SHORT_GROUP, True, even, strict) == [(0, 2), (1, 3)]
    with pytest.raises(ValueError, match="needs one PathLength per sample"):
        build_dpo_pairs(SHORT_GROUP, True, None, strict)


def test_defaults_reproduce_tearag_pairs_whatever_the_lengths() -> None:
    """With tie_break=first and no cost the lengths are never read: eq. 14's hand-worked pairs are unchanged."""
    long_first = [PathLength(1000 - 10 * i, 9 - i % 5) for i in range(len(MULTI))]
    assert build_dpo_pairs(MULTI, False, long_first, PairRule()) == [(0, 3), (2, 4)]
    assert build_dpo_pairs(SINGLE, True, long_first[: len(SINGLE)], PairRule()) == [(0, 3), (2, 5), (7, 4)]
    assert build_dpo_pairs(SINGLE, True) == [(0, 3), (2, 5), (7, 4)]


def test_length_rules_need_lengths_and_valid_values() -> None:
    with pytest.raises(ValueError, match="needs one PathLength per sample"):
        build_dpo_pairs(SHORT_GROUP, True, None, PairRule("shortest"))
    with pytest.raises(ValueError, match="needs one PathLength per sample"):
        build_dpo_pairs(SHORT_GROUP, True, SHORT_LENGTHS[:2], PairRule(token_cost=0.1))
    with pytest.raises(ValueError, match="tie_break='longest'"):
        PairRule("longest")
    with pytest.raises(ValueError, match=r"tie_tolerance=-0\.1"):
        PairRule("shortest", -0.1)
    with pytest.raises(ValueError, match="token_cost=-1"):
        PairRule(token_cost=-1.0)


def test_ipdpo_config_fields() -> None:
    """Defaults are TeaRAG's rule; the fields map onto the PairRule; bad values are named."""
    assert IPDPORunConfig().pair_rule() == PairRule()
    cfg = IPDPORunConfig(tie_break="shortest", tie_tolerance=0.01, token_cost=0.3)
    assert cfg.pair_rule() == PairRule("shortest", 0.01, 0.3)
    assert IPDPORunConfig(rejected_not_shorter=True).pair_rule() == PairRule(rejected_not_shorter=True)
    with pytest.raises(ConfigError, match=r"tie_break.*'last'"):
        IPDPORunConfig(tie_break="last")
    with pytest.raises(ConfigError, match="token_cost"):
        IPDPORunConfig(token_cost=-0.5)
    with pytest.raises(ConfigError, match="tie_tolerance"):
        IPDPORunConfig(tie_tolerance=-1.0)


def test_short_recipe_is_the_tearag_recipe_plus_the_length_rule() -> None:
    """recipes/demo_policy/ipdpo_tearag_short.yaml loads, prices tokens and differs from ipdpo_tearag.yaml only in
    the pairing rule and the output folder."""
    from effirag.config import load_config, to_dict

    root = Path(__file__).resolve().parents[1] / "recipes" / "demo_policy"
    base = to_dict(load_config(IPDPORunConfig, root / "ipdpo_tearag.yaml"))
    short = to_dict(load_config(IPDPORunConfig, root / "ipdpo_tearag_short.yaml"))
    changed = {k for k in base if base[k] != short[k]}
    assert changed == {"tie_break", "tie_tolerance", "token_cost", "output_dir"}
    assert short["tie_break"] == "shortest" and 0 < short["token_cost"] < 0.4  # 50 tokens cost < 0.2 of F1
    strict = to_dict(load_config(IPDPORunConfig, root / "ipdpo_tearag_short_strict.yaml"))
    assert {k for k in short if short[k] != strict[k]} == {"rejected_not_shorter", "output_dir"}
    assert strict["rejected_not_shorter"] is True


def test_round_pairs_apply_the_configs_rule_to_engine_paths(tmp_path: Path) -> None:
    """The scripted round of test_ipdpo_round: q1's rejections s2 ("I do not know." then the answer, format 0) and s3
    (a search, then a wrong answer) both total 1.0. TeaRAG pairs the first chosen path s0 with s2 (lower index);
    with tie_break=shortest the longer one, s3, goes first: (0, 3), (4, 2). q2 has no ties, so its pairs stay
    (0, 2), (1, 4); every path record carries its steps and, when priced, its cost-adjusted total."""
    from transformers import AutoTokenizer

    from effirag.agent import get_protocol, run_episodes
    from effirag.llm.scripted import ScriptedGenerator
    from effirag.train.dpo.scoring import round_pairs
    from test_engine_support import LexicalRetriever
    from test_ipdpo_round import QUESTIONS, SCRIPT, _cfg, tail_sim
    from tiny_models import make_tiny_model

    model = make_tiny_model(tmp_path / "tiny", arch="qwen2", seed=7)
    tok = AutoTokenizer.from_pretrained(str(model))
    cfg = _cfg(model, tmp_path / "out")
    trajs = run_episodes(ScriptedGenerator(SCRIPT, tok), LexicalRetriever(), get_protocol("tearag"), QUESTIONS,
                         cfg.round_engine(1))  # fmt: skip
    q1 = [t for t in trajs if t.question_id == "q1"]
    assert q1[3].generated_tokens > q1[2].generated_tokens  # a search and a summary outweigh "I do not know."
    rule = replace(cfg, tie_break="shortest").pair_rule()
    plain = round_pairs(trajs, QUESTIONS, cfg.outcome, tail_sim)
    short = round_pairs(trajs, QUESTIONS, cfg.outcome, tail_sim, rule)
    assert [(p["chosen"], p["rejected"]) for p in plain.records] == [(0, 2), (4, 3), (0, 2), (1, 4)]
    assert [(p["chosen"], p["rejected"]) for p in short.records] == [(0, 3), (4, 2), (0, 2), (1, 4)]
    assert [p["steps"] for p in short.paths] == [len(t.steps) for t in trajs]
    assert "cost_total" not in short.paths[0]
    priced = round_pairs(trajs, QUESTIONS, cfg.outcome, tail_sim, PairRule(token_cost=0.3))
    assert priced.paths[0]["cost_total"] == pytest.approx(priced.paths[0]["total"] - 0.003 * trajs[0].generated_tokens)
