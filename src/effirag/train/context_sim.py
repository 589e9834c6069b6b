"""Simulated retrieval contexts for SFT data (TeaRAG §4.3.1): gold evidence at random positions among distractors.

SFT needs an observation after every gold search. Rather than running a retriever (slow, and it would sometimes miss
the gold, teaching the policy to answer without evidence), TeaRAG simulates it: the hop's gold passage and evidence
triplets are inserted at random positions among distractors. Distractors are hard when possible (the other gold
passages of the same question, passages and triplets about the hop's key entities) and random otherwise. The
observation is then rendered and cut exactly as the engine does (the protocol's renderer and wrapper, the engine's
token budget rule), so training text and inference text have one format.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from effirag.metrics import normalize_answer
from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.types import ItemKind, Passage, RetrievedItem, Triplet

CHUNK_MODES = ("passage", "sparse")
_SENT = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class SimConfig:
    """How a simulated observation is composed (sizes mirror the engine's ``k``)."""

    k: int = 3
    max_inserted_tokens: int = 512
    hard_share: float = 0.5
    gold_triplet_rate: float = 1.0  # graph modes: P(the gold triplet is shown); the gold passage is shown otherwise


def answer_sentence(passage: Passage | None, answer: str) -> str | None:
    """The first sentence of ``passage`` that contains ``answer`` (SQuAD-normalised), if any."""
    if passage is None:
        return None
    a = normalize_answer(answer)
    for s in _SENT.split(passage.text):
        if a and a in normalize_answer(s):
            return s.strip()
    return None


class ContextSimulator:
    """Builds the retrieved items of a gold search: gold chunk/triplets shuffled among distractors."""

    def __init__(self, passages: Sequence[Passage], triplets: Sequence[Triplet], config: SimConfig) -> None:
        self.passages = list(passages)
        self.triplets = list(triplets)
        self.config = config
        self._by_title: dict[str, list[Passage]] = {}
        for p in self.passages:
            self._by_title.setdefault(normalize_answer(p.title), []).append(p)
        self._trip_by_entity: dict[str, list[Triplet]] = {}
        for t in self.triplets:
            self._trip_by_entity.setdefault(normalize_answer(t.head), []).append(t)

    def items(self, path: GoldPath, hops: Sequence[GoldHop], mode: str, rng: random.Random) -> list[RetrievedItem]:
        """The items a search in ``mode`` returns for ``hops`` (one hop for agent searches; all hops for the
        single-round baselines). Chunks only in passage modes; chunks and triplets in graph modes."""
        k = max(self.config.k, len(hops))
        gold: list[RetrievedItem] = []
        for hop in hops:
            triplet = mode not in CHUNK_MODES and bool(hop.triplets)
            # Drawn only below rate 1, so that data built without the knob is unchanged draw for draw.
            if triplet and hop.passage is not None and self.config.gold_triplet_rate < 1.0:
                triplet = rng.random() < self.config.gold_triplet_rate
            if triplet:
                gold.append(_triplet_item(hop.triplets[0]))
            if hop.passage is not None and (not triplet or rng.random() < 0.5):
                gold.append(_chunk_item(hop.passage))
        gold = _dedup(gold)[:k]
        pool = self._distractors(path, hops, mode, rng)
        out = [d for d in pool if d.id not in {g.id for g in gold}][: k - len(gold)]
        for g in gold:
            out.insert(rng.randrange(len(out) + 1), g)
        return out

    def _distractors(
        self, path: GoldPath, hops: Sequence[GoldHop], mode: str, rng: random.Random
    ) -> list[RetrievedItem]:
        answers = {normalize_answer(h.answer) for h in hops}
        hard: list[RetrievedItem] = []
        for other in path.hops:
            if other not in hops and other.passage is not None:
                hard.append(_chunk_item(other.passage))
        for hop in hops:
            for e in hop.entities:
                if mode not in CHUNK_MODES:
                    hard += [
                        _triplet_item(t)
                        for t in self._trip_by_entity.get(normalize_answer(e), [])
                        if normalize_answer(t.tail) not in answers
                    ][:3]
                hard += [_chunk_item(p) for p in self._by_title.get(normalize_answer(e), []) if p != hop.passage][:1]
        rng.shuffle(hard)
        hard = hard[: max(1, round(self.config.k * self.config.hard_share))]
        easy: list[RetrievedItem] = []
        for _ in range(self.config.k * 2):
            if mode not in CHUNK_MODES and self.triplets and rng.random() < 0.5:
                easy.append(_triplet_item(rng.choice(self.triplets)))
            elif self.passages:
                easy.append(_chunk_item(rng.choice(self.passages)))
        return [d for d in _dedup(hard + easy) if not _mentions_gold(d, hops)]


def render_observation(
    items: Sequence[RetrievedItem],
    protocol: object,
    count_tokens: Callable[[str], int],
    max_inserted_tokens: int,
    truncation_side: str = "right",
) -> str:
    """The observation text the engine would insert for ``items`` (render, budget cut, wrap)."""
    from effirag.agent.config import truncate_to_budget

    body = protocol.render_items(items)  # type: ignore[attr-defined]
    wrap = protocol.wrap_observation  # type: ignore[attr-defined]
    body, _ = truncate_to_budget(body, lambda b: count_tokens(wrap(b)) <= max_inserted_tokens, truncation_side)
    return str(wrap(body))


def _chunk_item(p: Passage) -> RetrievedItem:
    return RetrievedItem(ItemKind.CHUNK, p.id, p.text, 1.0, title=p.title)


def _triplet_item(t: Triplet) -> RetrievedItem:
    return RetrievedItem(ItemKind.TRIPLET, f"{t.source_id}:{t.head}|{t.relation}|{t.tail}", t.text, 1.0)


def _dedup(items: list[RetrievedItem]) -> list[RetrievedItem]:
    seen: set[str] = set()
    out = []
    for it in items:
        if it.id not in seen:
            seen.add(it.id)
            out.append(it)
    return out


def _mentions_gold(item: RetrievedItem, hops: Sequence[GoldHop]) -> bool:
    """A distractor must not be another copy of a gold item (same passage, or a triplet stating a gold fact)."""
    for h in hops:
        if h.passage is not None and item.id == h.passage.id:
            return True
        if item.kind is ItemKind.TRIPLET and any(item.text == t.text for t in h.triplets):
            return True
    return False
