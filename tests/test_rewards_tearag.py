"""TeaRAG process reward (eq. 7–13), the single-hop rule (§4.3.2) and IP-DPO pair construction (eq. 14)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from effirag.retrieval.similarity import LexicalF1Similarity
from effirag.rewards.tearag import (
    DPOSample,
    SigmoidSimilarity,
    build_dpo_pairs,
    consistency_reward,
    memory_vector,
    process_reward,
    single_hop_rewards,
    trajectory_process_reward,
)
from effirag.types import Action, ItemKind, RetrievedItem, Step, Trajectory

# A hand-written similarity table: sim(g, text). Values are arbitrary numbers in [0, 1].
TABLE = {
    ("g1", "a"): 0.2,
    ("g1", "b"): 0.9,
    ("g1", "c"): 0.4,
    ("g2", "a"): 0.1,
    ("g2", "b"): 0.3,
    ("g2", "c"): 0.6,
}


def table_sim(query: str, texts: Sequence[str]) -> list[float]:
    return [TABLE[(query, t)] for t in texts]


class TableSimilarity:
    """The same table behind the Similarity protocol (``score(query, texts)``)."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return table_sim(query, texts)


def test_consistency_reward_hand_worked() -> None:
    """Step 1: entities {Paris, Eiffel Tower} both in "when was the eiffel tower in paris built" → c = 1.
    Step 2: "John Smith" is not contained in "who is smith" → c = 0.
    Step 3: no key entity → c = 0 by definition.
    Mean (1 + 0 + 0)/3 = 1/3."""
    entities = [["Paris", "the Eiffel Tower"], ["John Smith"], []]
    subqueries = ["When was the Eiffel Tower in Paris built?", "Who is Smith?", "Where?"]
    assert consistency_reward(entities, subqueries) == pytest.approx(1 / 3)


def test_consistency_reward_edges() -> None:
    """Zero steps → 0.0; normalisation makes "U.S.A." match "usa"; mismatched lengths are an error."""
    assert consistency_reward([], []) == 0.0
    assert consistency_reward([["U.S.A."]], ["capital of the USA"]) == 1.0
    with pytest.raises(ValueError, match="entity lists"):
        consistency_reward([["a"]], [])
    with pytest.raises(TypeError, match="lists of entities"):
        consistency_reward(["Paris"], ["Paris"])  # type: ignore[list-item]


def test_memory_vector_hand_worked() -> None:
    """Texts over two steps: step 1 → [a, b], step 2 → c.
    g1: max(0.2, 0.9, 0.4) = 0.9; g2: max(0.1, 0.3, 0.6) = 0.6 → [0.9, 0.6].
    The same through an object implementing the Similarity protocol."""
    assert memory_vector(["g1", "g2"], [["a", "b"], "c"], table_sim) == [0.9, 0.6]
    assert memory_vector(["g1", "g2"], [["a", "b"], "c"], TableSimilarity()) == [0.9, 0.6]


def test_memory_vector_edges() -> None:
    """Missing gold evidence → []; zero steps → 0.0 per evidence; a score outside [0, 1] is refused."""
    assert memory_vector([], [["a"], "c"], table_sim) == []
    assert memory_vector(["g1", "g2"], [], table_sim) == [0.0, 0.0]
    with pytest.raises(ValueError, match="outside"):
        memory_vector(["g1"], ["a"], lambda q, ts: [3.5 for _ in ts])


def test_process_reward_hand_worked() -> None:
    """consistency 0.5; m_q = [0.9, 0.6] (Σ 1.5); m_c = [1.0, 0.8] (Σ 1.8); m_s = [0.7, 0.5] (Σ 1.2).
    k = 2: 0.1·0.5 + 0.3·(1.5/2 + 1.8/2 + 1.2/2) = 0.05 + 0.3·(0.75 + 0.9 + 0.6) = 0.05 + 0.675 = 0.725.
    k = 3 (one redundant step): 0.05 + 0.3·(4.5/3) = 0.05 + 0.45 = 0.5."""
    m_q, m_c, m_s = [0.9, 0.6], [1.0, 0.8], [0.7, 0.5]
    assert process_reward(0.5, m_q, m_c, m_s, k=2) == pytest.approx(0.725)
    assert process_reward(0.5, m_q, m_c, m_s, k=3) == pytest.approx(0.5)


def test_process_reward_edges() -> None:
    """Zero steps: consistency 0, memory [0.0] each, k = 0 → 0.0.
    Missing gold evidence: empty memory vectors, consistency 1, k = 2 → 0.1·1 = 0.1.
    k = 0 with non-zero memory is inconsistent and refused."""
    assert process_reward(0.0, [0.0], [0.0], [0.0], k=0) == 0.0
    assert process_reward(1.0, [], [], [], k=2) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="k=0"):
        process_reward(0.0, [0.5], [], [], k=0)
    with pytest.raises(ValueError, match="m_c"):
        process_reward(0.0, [], [1.5], [], k=1)


def test_single_hop_rule() -> None:
    """outcome 1 in 2 steps → (1/2, 0) = (0.5, 0.0); outcome 0.8 in 4 steps → (0.2, 0.0);
    zero steps is treated as one step → (0.6, 0.0)."""
    assert single_hop_rewards(1.0, 2) == (0.5, 0.0)
    assert single_hop_rewards(0.8, 4) == (pytest.approx(0.2), 0.0)
    assert single_hop_rewards(0.6, 0) == (0.6, 0.0)


# Multi-hop samples: (format, outcome, process) → total.
MULTI = [
    DPOSample(1, 1.0, 0.9),  # 0: 2.90 chosen (outcome 1, process ≥ 0.7)
    DPOSample(1, 0.85, 0.85),  # 1: 2.70 chosen (outcome ≥ 0.8, process ≥ 0.8)
    DPOSample(1, 1.0, 0.75),  # 2: 2.75 chosen (outcome 1, process ≥ 0.7)
    DPOSample(0, 1.0, 0.9),  # 3: 1.90 format rejection
    DPOSample(1, 0.5, 0.75),  # 4: 2.25 hard rejection for a chosen with outcome ≥ 0.8 and process ≥ 0.75
    DPOSample(1, 0.6, 0.95),  # 5: 2.55 process too high to be a hard rejection for anyone
    DPOSample(1, 1.0, 0.5),  # 6: 2.50 neither chosen (process < 0.7) nor rejectable (outcome 1)
    DPOSample(1, 0.4, 0.8),  # 7: 2.20 hard rejection only for chosen with process ≥ 0.8 (0 and 1, not 2)
    DPOSample(1, 0.9, 0.7),  # 8: 2.60 neither chosen (outcome ≠ 1, process < 0.8) nor rejectable
]


def test_build_dpo_pairs_multi_hop() -> None:
    """Ascending ranking: 3 (1.90), 7 (2.20), 4 (2.25), 6 (2.50), 5 (2.55), 8 (2.60), 1 (2.70), 2 (2.75), 0 (2.90).
    Chosen in descending total: 0, 2, 1.
    - c = 0 (o 1.0, p 0.9): cursor at 3 → format rejection → (0, 3); cursor → position 1.
    - c = 2 (o 1.0, p 0.75): 7 has outcome 0.4 ∈ (0.3, 0.7] but process 0.8 > 0.75 → skip; 4: outcome 0.5 ∈ (0.3, 0.7],
      process 0.75 ≤ 0.75 → (2, 4); cursor → position 3 (past 4, and so past 7 too).
    - c = 1 (o 0.85, p 0.85): from position 3: 6 (outcome 1.0 > 0.55), 5 (0.6 > 0.55), 8 (0.9), 1 (itself), 2, 0
      (outcome 1.0) — none rejects it; 7 would have, but the cursor has passed it → no pair.
    Expected [(0, 3), (2, 4)]."""
    assert build_dpo_pairs(MULTI, single_hop=False) == [(0, 3), (2, 4)]


# Single-hop samples, outcome already divided by the number of steps, process 0.
SINGLE = [
    DPOSample(1, 1.0, 0.0),  # 0: 2.0 chosen (correct in one step)
    DPOSample(1, 0.5, 0.0),  # 1: 1.5 correct in two steps: neither chosen nor rejectable
    DPOSample(1, 1.0, 0.0),  # 2: 2.0 chosen
    DPOSample(0, 1.0, 0.0),  # 3: 1.0 format rejection
    DPOSample(1, 0.25, 0.0),  # 4: 1.25 easy rejection (correct in four steps: 0.25 ≤ 0.3)
    DPOSample(1, 0.0, 0.0),  # 5: 1.0 easy rejection (wrong)
    DPOSample(1, 1 / 3, 0.0),  # 6: 1.333 correct in three steps: 0.333 > 0.3, not rejectable
    DPOSample(1, 1.0, 0.0),  # 7: 2.0 chosen
]


def test_build_dpo_pairs_single_hop() -> None:
    """Ascending ranking (ties by index): 3 (1.0), 5 (1.0), 4 (1.25), 6 (1.333), 1 (1.5), 0, 2, 7 (2.0).
    Chosen in descending total, ties by index: 0, 2, 7.
    c = 0 → 3 (format) ; c = 2 → 5 (easy) ; c = 7 → 4 (easy). Expected [(0, 3), (2, 5), (7, 4)].
    The same samples read as multi-hop: no sample has process ≥ 0.7, so nothing is chosen → []."""
    assert build_dpo_pairs(SINGLE, single_hop=True) == [(0, 3), (2, 5), (7, 4)]
    assert build_dpo_pairs(SINGLE, single_hop=False) == []


def test_build_dpo_pairs_hard_rejection_is_multi_hop_only() -> None:
    """Chosen 0 (1, 1.0, 0.9); sample 1 (1, 0.5, 0.5) is a hard rejection for it in multi-hop (0.3 < 0.5 ≤ 0.7,
    0.5 ≤ 0.9) → [(0, 1)], but single-hop has no hard rejections → []."""
    samples = [DPOSample(1, 1.0, 0.9), DPOSample(1, 0.5, 0.5)]
    assert build_dpo_pairs(samples, single_hop=False) == [(0, 1)]
    assert build_dpo_pairs(samples, single_hop=True) == []


def test_build_dpo_pairs_edges_and_mappings() -> None:
    """No samples → []; one sample (a group of one) → []; mappings are accepted; a missing field is named."""
    assert build_dpo_pairs([], single_hop=False) == []
    assert build_dpo_pairs([DPOSample(1, 1.0, 0.9)], single_hop=False) == []
    dicts = [{"format": 1, "outcome": 1.0, "process": 0.0}, {"format": 0, "outcome": 0.0, "process": 0.0}]
    assert build_dpo_pairs(dicts, single_hop=True) == [(0, 1)]
    with pytest.raises(ValueError, match="sample 0: missing field 'process'"):
        build_dpo_pairs([{"format": 1, "outcome": 1.0}], single_hop=True)
    with pytest.raises(ValueError, match="format"):
        DPOSample(2, 1.0, 0.0)


def test_sigmoid_similarity() -> None:
    """σ of a lexical F1: evidence "Arvel" vs text "Arvel city" → F1 = 2/3 (precision 1/2, recall 1);
    σ(2/3) = 1/(1 + e^(−0.666667)) = 1/1.513417 = 0.660756."""
    sim = SigmoidSimilarity(LexicalF1Similarity())
    assert memory_vector(["Arvel"], ["Arvel city"], sim) == pytest.approx([0.660756], abs=1e-6)


def test_trajectory_process_reward() -> None:
    """Two TeaRAG steps of an engine trajectory (the answer step is not a step of the process reward):
    texts come from the similarity table: subqueries "a" and "b", items "c" and "b", summaries "c" and "a".
    consistency: step 1's entity "a" normalises to "" (an article) and is never contained → 0; step 2 names no
    entity → 0; consistency = 0.
    m_q over texts [a, b]: g1 max(0.2, 0.9) = 0.9; g2 max(0.1, 0.3) = 0.3 → Σ 1.2.
    m_c over [c, b]: g1 max(0.4, 0.9) = 0.9; g2 max(0.6, 0.3) = 0.6 → Σ 1.5.
    m_s over [c, a]: g1 max(0.4, 0.2) = 0.4; g2 max(0.6, 0.1) = 0.6 → Σ 1.0.
    k = 2: 0.1·0 + 0.3·(1.2 + 1.5 + 1.0)/2 = 0.3·1.85 = 0.555."""
    t = Trajectory("q", "question", "tearag")
    t.steps = [
        Step(Action.SEARCH, query="a", entities=["a"], items=[_item("c")], summary="c"),
        Step(Action.SEARCH, query="b", entities=[], items=[_item("b")], summary="a"),
        Step(Action.ANSWER, answer="x"),
    ]
    assert trajectory_process_reward(t, ["g1", "g2"], table_sim) == pytest.approx(0.555)
    # the empty trajectory: zero steps → 0.0
    assert trajectory_process_reward(Trajectory("q", "question", "tearag"), ["g1"], table_sim) == 0.0


def _item(text: str) -> RetrievedItem:
    return RetrievedItem(ItemKind.CHUNK, text, text, 1.0)


def test_trajectory_process_reward_counts_memory_steps() -> None:
    """One search step (subquery "a", item "c", summary "c") and one memory step (sub-question "b", summary "b", no
    context), then the answer. consistency: the search step's entity "a" normalises to "" → 0.
    m_q over [a, b]: g1 max(0.2, 0.9) = 0.9; g2 max(0.1, 0.3) = 0.3 → Σ 1.2.
    m_c over [c] (the memory step has no context): g1 0.4; g2 0.6 → Σ 1.0.
    m_s over [c, b]: g1 max(0.4, 0.9) = 0.9; g2 max(0.6, 0.3) = 0.6 → Σ 1.5.
    k = 2: 0.3·(1.2 + 1.0 + 1.5)/2 = 0.3·1.85 = 0.555. Without the memory step (search alone, k = 1):
    m_q g1 0.2 + g2 0.1 = 0.3; m_c 1.0; m_s 0.4 + 0.6 = 1.0 → 0.3·2.3 = 0.69."""
    t = Trajectory("q", "question", "tearag")
    t.steps = [
        Step(Action.SEARCH, query="a", entities=["a"], items=[_item("c")], summary="c"),
        Step(Action.REASON, reasoning="b", conclusion="b", within_turn=True),
        Step(Action.ANSWER, answer="x"),
    ]
    assert trajectory_process_reward(t, ["g1", "g2"], table_sim) == pytest.approx(0.555)
    t.steps = [t.steps[0], t.steps[2]]
    assert trajectory_process_reward(t, ["g1", "g2"], table_sim) == pytest.approx(0.69)
