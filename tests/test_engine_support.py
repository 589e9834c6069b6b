"""A deterministic in-test Retriever (lexical overlap over a handful of passages and triplets) and its own checks.

Other agent tests import :class:`LexicalRetriever` and :data:`PASSAGES` from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from effirag.retrieval.base import RetrievalResult, Retriever
from effirag.types import ItemKind, RetrievedItem

PASSAGES = [
    ("p1", "Lyon", "Lyon is a city in France on the Rhone river."),
    ("p2", "Rhone", "The Rhone river flows from Switzerland to the Mediterranean Sea."),
    ("p3", "Ana Lopez", "Ana Lopez directed the film Blue River in 1999."),
    ("p4", "Blue River", "Blue River is a film shot in Lyon."),
    ("p5", "Madrid", "Madrid is the capital of Spain."),
    ("p6", "Paris", "Paris is the capital of France."),
]
TRIPLETS = [
    ("t1", "(Blue River, directed by, Ana Lopez)"),
    ("t2", "(Lyon, located in, France)"),
    ("t3", "(Paris, capital of, France)"),
]
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class LexicalRetriever:
    """Scores = number of shared lowercase words with the query (and entities); ties broken by id. Records calls."""

    def __init__(self, passages: Sequence[tuple[str, str, str]] = PASSAGES, fail_on: str | None = None) -> None:
        self.passages = list(passages)
        self.fail_on = fail_on
        self.calls: list[tuple[str, str, int, tuple[str, ...], int]] = []

    def _rank(self, query: str, docs: list[RetrievedItem]) -> list[RetrievedItem]:
        q = _words(query)
        scored = [(len(q & _words(d.title + " " + d.text)), d) for d in docs]
        scored.sort(key=lambda p: (-p[0], p[1].id))
        return [RetrievedItem(d.kind, d.id, d.text, float(s), title=d.title) for s, d in scored]

    def retrieve(
        self,
        query: str,
        mode: str = "passage",
        k: int = 5,
        entities: Sequence[str] | None = None,
        offset: int = 0,
    ) -> RetrievalResult:
        self.calls.append((query, str(mode), k, tuple(entities or ()), offset))
        if self.fail_on is not None and self.fail_on in query:
            raise RuntimeError(f"index offline for {query!r}")
        full = query + " " + " ".join(entities or ())
        chunks = self._rank(full, [RetrievedItem(ItemKind.CHUNK, i, x, 0.0, title=t) for i, t, x in self.passages])
        trips = self._rank(full, [RetrievedItem(ItemKind.TRIPLET, i, x, 0.0) for i, x in TRIPLETS])
        if mode == "chunks_triplets":
            items = chunks[offset : offset + k] + trips[offset : offset + k]
        elif mode == "kag":
            items = sorted(chunks + trips, key=lambda d: (-d.score, d.id))[offset : offset + k]
        else:
            items = chunks[offset : offset + k]
        return RetrievalResult(items, timings={"kag_ppr": 0.001} if mode == "kag" else {})


def test_lexical_retriever_ranks_and_pages() -> None:
    r = LexicalRetriever()
    assert isinstance(r, Retriever)
    top = r.retrieve("who directed Blue River", k=2).items
    assert [it.id for it in top] == ["p3", "p4"]  # p3 shares directed, blue, river; p4 shares blue, river
    nxt = r.retrieve("who directed Blue River", k=2, offset=2).items
    assert [it.id for it in nxt] == ["p1", "p2"]  # "river" only, ties broken by id
    ct = r.retrieve("Lyon France", mode="chunks_triplets", k=1).items
    assert [(it.kind.value, it.id) for it in ct] == [("chunk", "p1"), ("triplet", "t2")]


def test_lexical_retriever_fails_on_request() -> None:
    with pytest.raises(RuntimeError, match="offline"):
        LexicalRetriever(fail_on="boom").retrieve("boom")


Q = "Who directed Blue River?"
DOC_P3 = "Doc 1 (Title: Ana Lopez) Ana Lopez directed the film Blue River in 1999."
DOC_P4 = "Doc 2 (Title: Blue River) Blue River is a film shot in Lyon."


def run(protocol: str, completions: list[str], question: str = Q, retriever: LexicalRetriever | None = None, **cfg):  # type: ignore[no-untyped-def]
    """Run one episode of ``protocol`` on scripted ``completions``; return (trajectory, generator, retriever)."""
    from effirag.agent import EngineConfig, get_protocol, run_episodes
    from effirag.llm.scripted import ScriptedGenerator

    gen = ScriptedGenerator(completions)
    ret = retriever if retriever is not None else LexicalRetriever()
    cfg.setdefault("k", 2)
    [traj] = run_episodes(gen, ret, get_protocol(protocol), [question], EngineConfig(**cfg))
    return traj, gen, ret
