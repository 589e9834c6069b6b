"""TeaRAG's process reward and the preference pairs of its Iterative Process-aware DPO (IP-DPO).

A TeaRAG step names key entities, writes a subquery, receives a ``<Reference>`` context and writes a summary. The
process reward (§4.3.2) credits two things:

- *knowledge matching* between the key entities and the subquery (consistency, eq. 7–8);
- *memory* of the golden evidence: how closely the subqueries, the retrieved contexts and the summaries came to each
  gold evidence (eq. 9–11), normalised by the number of steps so that redundant steps dilute it (eq. 12–13).

Single-hop questions get no process reward; their outcome reward is divided by the number of steps instead, so that
the one-step answer is preferred. Samples of one question are then paired chosen/rejected by eq. 14's rules
(:func:`build_dpo_pairs`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from effirag.metrics import cover_exact_match
from effirag.retrieval.base import Similarity
from effirag.retrieval.similarity import sigmoid
from effirag.types import Action, Trajectory

SimFn = Similarity | Callable[[str, Sequence[str]], Sequence[float]]
"""A similarity in [0, 1]: a :class:`~effirag.retrieval.base.Similarity` or a function ``(query, texts) -> scores``."""

CONSISTENCY_WEIGHT = 0.1
MEMORY_WEIGHT = 0.3


def consistency_reward(entities_per_step: Sequence[Sequence[str]], subqueries: Sequence[str]) -> float:
    """Knowledge-matching consistency (TeaRAG eq. 7–8): mean over steps of c_t, where c_t = 1 iff every key entity of
    step t is contained in step t's subquery (cover exact match after SQuAD normalisation), else 0.

    Definitions at the edges: no steps → 0.0; a step that names no key entity scores 0 (TeaRAG's format requires
    entities, and an empty list must not earn the reward for free); an entity that normalises to "" is never contained.
    """
    if len(entities_per_step) != len(subqueries):
        raise ValueError(f"{len(entities_per_step)} entity lists but {len(subqueries)} subqueries")
    if not subqueries:
        return 0.0
    hits = 0
    for entities, subquery in zip(entities_per_step, subqueries, strict=True):
        if isinstance(entities, str):
            raise TypeError(f"entities_per_step items must be lists of entities, got the string {entities!r}")
        if entities and all(cover_exact_match(subquery, e) == 1.0 for e in entities):
            hits += 1
    return hits / len(subqueries)


def _score(sim: SimFn, query: str, texts: Sequence[str]) -> list[float]:
    scores = sim.score(query, texts) if isinstance(sim, Similarity) else sim(query, texts)
    out = [float(s) for s in scores]
    if len(out) != len(texts):
        raise ValueError(f"sim returned {len(out)} scores for {len(texts)} texts")
    for text, s in zip(texts, out, strict=True):
        if not 0.0 <= s <= 1.0:
            raise ValueError(
                f"sim({query!r}, {text[:60]!r}) = {s!r} is outside [0, 1]; pass a sigmoid-normalised score"
            )
    return out


def memory_vector(evidence: Sequence[str], texts_per_step: Sequence[str | Sequence[str]], sim: SimFn) -> list[float]:
    """Evidence memory (TeaRAG eq. 9–11): m[t] = max over all steps' texts of sim(g_t, text), one entry per gold
    evidence g_t.

    ``texts_per_step`` holds, per step, one text or several (the subqueries for m_q, the retrieved contexts for m_c,
    the summaries for m_s). ``sim`` must return values in [0, 1] (a reranker or bi-encoder score through a sigmoid).
    No gold evidence → ``[]``; no texts at all (zero steps) → 0.0 for every evidence.
    """
    texts: list[str] = []
    for step in texts_per_step:
        texts.extend([step] if isinstance(step, str) else step)
    if not texts:
        return [0.0] * len(evidence)
    return [max(_score(sim, g, texts)) for g in evidence]


class SigmoidSimilarity:
    """σ(score) of any :class:`~effirag.retrieval.base.Similarity` (a cosine, a cross-encoder logit), in (0, 1): the
    normalisation TeaRAG applies before its memory rewards."""

    def __init__(self, inner: Similarity) -> None:
        self.inner = inner

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [float(sigmoid(float(s))) for s in self.inner.score(query, texts)]


def process_reward(
    consistency: float, m_q: Sequence[float], m_c: Sequence[float], m_s: Sequence[float], k: int
) -> float:
    """TeaRAG process reward (eq. 12–13): 0.1·consistency + 0.3·(Σm_q/k + Σm_c/k + Σm_s/k).

    ``k`` is the number of steps of the trajectory. Zero steps (k = 0) has no memory term: the reward is
    0.1·consistency (which :func:`consistency_reward` makes 0 for no steps); memory values there must all be 0.
    Missing gold evidence (empty memory vectors) likewise contributes 0.
    """
    if k < 0:
        raise ValueError(f"k={k} must be >= 0")
    if not 0.0 <= consistency <= 1.0:
        raise ValueError(f"consistency={consistency!r} must be in [0, 1]")
    for name, m in (("m_q", m_q), ("m_c", m_c), ("m_s", m_s)):
        if any(not 0.0 <= x <= 1.0 for x in m):
            raise ValueError(f"{name}={list(m)!r} has values outside [0, 1]")
    total = sum(m_q) + sum(m_c) + sum(m_s)
    if k == 0:
        if total:
            raise ValueError(f"k=0 steps but memory sums to {total!r}: memory needs steps")
        return CONSISTENCY_WEIGHT * consistency
    return CONSISTENCY_WEIGHT * consistency + MEMORY_WEIGHT * total / k


def trajectory_process_reward(trajectory: Trajectory, evidence: Sequence[str], sim: SimFn) -> float:
    """TeaRAG's process reward (eq. 7–13) of an engine trajectory: its steps are the retrieval steps, each with
    ``entities``, ``query`` (the subquery), retrieved ``items`` (the context) and ``summary`` ("" when the
    episode ended before the summary); ``evidence`` are the gold evidence texts (e.g. triplets' ``text``).

    Memory steps (TeaRAG's format here lets a sub-question be answered without retrieval: REASON steps within a turn)
    are steps too, with their sub-question as the subquery, no context and their summary: a known hop answered from
    memory earns the evidence its summary states, and counts in k like a search. Consistency (eq. 7–8) stays over the
    retrieval steps, whose entities seed the KAG retrieval it is about."""
    steps = [s for s in trajectory.steps if s.action is Action.SEARCH]
    memory = [s for s in trajectory.steps if s.action is Action.REASON and s.within_turn]
    consistency = consistency_reward([s.entities for s in steps], [s.query or "" for s in steps])
    m_q = memory_vector(evidence, [s.query or "" for s in steps] + [s.reasoning or "" for s in memory], sim)
    m_c = memory_vector(evidence, [[it.text for it in s.items] for s in steps], sim)
    m_s = memory_vector(evidence, [s.summary or "" for s in steps] + [s.conclusion or "" for s in memory], sim)
    return process_reward(consistency, m_q, m_c, m_s, k=len(steps) + len(memory))


def single_hop_rewards(outcome: float, n_steps: int) -> tuple[float, float]:
    """Single-hop rule (TeaRAG §4.3.2): (outcome / k, process = 0.0) for a trajectory of k steps.

    Zero steps (an answer without any retrieval step) is treated as k = 1: nothing was spent, nothing is divided.
    """
    if n_steps < 0:
        raise ValueError(f"n_steps={n_steps} must be >= 0")
    return outcome / max(n_steps, 1), 0.0


@dataclass(frozen=True, slots=True)
class DPOSample:
    """The scores of one sampled trajectory: format ∈ {0, 1}, outcome, and process (already single-hop adjusted)."""

    format: int
    outcome: float
    process: float

    def __post_init__(self) -> None:
        if self.format not in (0, 1):
            raise ValueError(f"DPOSample.format={self.format!r} must be 0 or 1")

    @property
    def total(self) -> float:
        return self.format + self.outcome + self.process


def _as_sample(s: DPOSample | Mapping[str, Any], i: int) -> DPOSample:
    if isinstance(s, DPOSample):
        return s
    try:
        return DPOSample(format=int(s["format"]), outcome=float(s["outcome"]), process=float(s["process"]))
    except KeyError as e:
        raise ValueError(f"sample {i}: missing field {e.args[0]!r} (need format, outcome, process)") from None


def is_chosen(s: DPOSample, single_hop: bool) -> bool:
    """Chosen set W (TeaRAG eq. 14): single-hop format = 1 ∧ outcome = 1; multi-hop format = 1 ∧
    ((outcome = 1 ∧ process ≥ 0.7) ∨ (outcome ≥ 0.8 ∧ process ≥ 0.8))."""
    if s.format != 1:
        return False
    if single_hop:
        return s.outcome == 1
    return (s.outcome == 1 and s.process >= 0.7) or (s.outcome >= 0.8 and s.process >= 0.8)


def rejects(s: DPOSample, chosen: DPOSample, single_hop: bool) -> bool:
    """Whether ``s`` may be the rejected answer for ``chosen``: a format rejection (format = 0), an easy rejection
    (format = 1 ∧ outcome ≤ 0.3) or, multi-hop only, a hard rejection
    (format = 1 ∧ 0.3 < outcome ≤ chosen.outcome − 0.3 ∧ process ≤ chosen.process)."""
    if s.format == 0 or s.outcome <= 0.3:
        return True
    return (not single_hop) and 0.3 < s.outcome <= chosen.outcome - 0.3 and s.process <= chosen.process


TIE_BREAKS = ("first", "shortest")


@dataclass(frozen=True, slots=True)
class PathLength:
    """What one sampled path spent: the tokens the policy generated and its number of steps."""

    generated_tokens: int
    steps: int


@dataclass(frozen=True, slots=True)
class PairRule:
    """How :func:`build_dpo_pairs` orders paths of equal merit; the defaults are TeaRAG's rule exactly.

    ``token_cost`` is subtracted per 100 generated tokens from each path's total before ranking
    (:func:`token_cost_score`); ``tie_break = "shortest"`` orders paths whose (cost-adjusted) totals lie within
    ``tie_tolerance`` of the best remaining one by length: fewest tokens (then steps) first among the chosen, most
    tokens (then steps) first among the rejections. These two never change eligibility (eq. 14's chosen set and
    rejections); ``rejected_not_shorter`` does, opt-in: a chosen path is paired only with a rejection that generated
    at least as many tokens, so that no pair prefers the longer path.
    """

    tie_break: str = "first"
    tie_tolerance: float = 0.0
    token_cost: float = 0.0
    rejected_not_shorter: bool = False

    def __post_init__(self) -> None:
        if self.tie_break not in TIE_BREAKS:
            raise ValueError(f"PairRule.tie_break={self.tie_break!r} must be one of {TIE_BREAKS}")
        if not self.tie_tolerance >= 0:
            raise ValueError(f"PairRule.tie_tolerance={self.tie_tolerance!r} must be >= 0")
        if not self.token_cost >= 0:
            raise ValueError(f"PairRule.token_cost={self.token_cost!r} must be >= 0")

    @property
    def uses_lengths(self) -> bool:
        return self.tie_break != "first" or self.token_cost > 0 or self.rejected_not_shorter


def token_cost_score(total: float, generated_tokens: int, token_cost: float) -> float:
    """A path's total minus ``token_cost`` per 100 generated policy tokens: ``total − token_cost · tokens / 100``.

    This is EffiRAG's efficiency extension of IP-DPO, not part of TeaRAG's eq. 14: in the spirit of TeaRAG's own
    result (−61% output tokens after IP-DPO) and of Dynamic Search-R1's cost-aware reward (retrieval and generation
    priced inside the reward), it makes a longer path of equal merit rank below a shorter one, so the chosen side
    leans short and the rejected side long. E.g. total 2.8 with 150 tokens at cost 0.2 → 2.8 − 0.3 = 2.5.
    """
    if generated_tokens < 0:
        raise ValueError(f"generated_tokens={generated_tokens} must be >= 0")
    return total - token_cost * generated_tokens / 100


def tie_order(
    scores: Sequence[float], lengths: Sequence[PathLength] | None, *, descending: bool, rule: PairRule
) -> list[int]:
    """Indices of ``scores`` best-first (``descending``) or worst-first, ties as ``rule`` says.

    ``first``: by score, equal scores by lower index (the tolerance is not used). ``shortest``: repeatedly take the
    best (or worst) remaining score and every remaining path within ``tie_tolerance`` of it as one tie group; a
    group is ordered shortest-first when descending (the chosen side), longest-first when ascending (the rejected
    side), by generated tokens, then steps, then index.
    """
    if rule.tie_break == "first":
        return sorted(range(len(scores)), key=lambda i: (-scores[i] if descending else scores[i], i))
    if lengths is None or len(lengths) != len(scores):
        raise ValueError(f"tie_break={rule.tie_break!r} needs one PathLength per path ({len(scores)} paths)")
    sign = 1 if descending else -1  # shortest first among the chosen, longest first among the rejections
    left = set(range(len(scores)))
    out: list[int] = []
    while left:
        edge = max(scores[i] for i in left) if descending else min(scores[i] for i in left)
        group = [i for i in left if abs(scores[i] - edge) <= rule.tie_tolerance]
        group.sort(key=lambda i: (sign * lengths[i].generated_tokens, sign * lengths[i].steps, i))
        out += group
        left -= set(group)
    return out


def _long_enough(r: int, c: int, lengths: Sequence[PathLength] | None, rule: PairRule) -> bool:
    """Whether rejection r may pair with chosen c under ``rule.rejected_not_shorter`` (always, when it is off)."""
    if not rule.rejected_not_shorter or lengths is None:
        return True
    return lengths[r].generated_tokens >= lengths[c].generated_tokens


def build_dpo_pairs(
    samples: Sequence[DPOSample | Mapping[str, Any]],
    single_hop: bool,
    lengths: Sequence[PathLength] | None = None,
    rule: PairRule = PairRule(),
) -> list[tuple[int, int]]:
    """IP-DPO preference pairs of one question's samples (TeaRAG eq. 14 and its rejection rules).

    All samples are ranked ascending by format + outcome + process (ties: lower index first). The chosen samples
    (:func:`is_chosen`) are taken in descending total (ties: lower index first); one cursor walks the ascending
    ranking for all of them: for chosen c the first sample at or after the cursor that :func:`rejects` c is paired with
    c and the cursor moves just past it; a chosen sample with no rejection left gets no pair (the cursor stays).
    A non-default ``rule`` (with each path's ``lengths``) changes the two orders (:class:`PairRule`, :func:`tie_order`);
    with ``rejected_not_shorter`` a rejection shorter than c is also passed over (the cursor then moves past it like
    any other skipped sample). Returns ``(chosen index, rejected index)`` pairs in the order made.
    """
    scored = [_as_sample(s, i) for i, s in enumerate(samples)]
    if rule.uses_lengths and (lengths is None or len(lengths) != len(scored)):
        raise ValueError(f"pair rule {rule} needs one PathLength per sample ({len(scored)} samples)")
    totals = [s.total for s in scored]
    if rule.token_cost > 0 and lengths is not None:
        totals = [
            token_cost_score(t, n.generated_tokens, rule.token_cost) for t, n in zip(totals, lengths, strict=True)
        ]
    ranking = tie_order(totals, lengths, descending=False, rule=rule)
    chosen = [i for i in tie_order(totals, lengths, descending=True, rule=rule) if is_chosen(scored[i], single_hop)]
    pairs: list[tuple[int, int]] = []
    cursor = 0
    for c in chosen:
        for pos in range(cursor, len(ranking)):
            r = ranking[pos]
            if r != c and rejects(scored[r], scored[c], single_hop) and _long_enough(r, c, lengths, rule):
                pairs.append((c, r))
                cursor = pos + 1
                break
    return pairs
