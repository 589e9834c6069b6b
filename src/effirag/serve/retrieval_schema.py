"""The retrieval server's request schema, its limits, and the checks that name the field and the limit broken.

``/retrieve`` takes the request Search-R1's retrieval server defines and Search-R1's trainer, verl's and SkyRL's
search tools send (``{"queries": [str], "topk": int, "return_scores": bool}``), and the one-query form rLLM's
``LocalRetrievalTool`` sends (``{"query": str, "top_k": int}``, answered ``{"results": [...]}``). A batch is one
rollout step's searches, so a bad query in it never fails the others: a blank query (whitespace, control or
zero-width characters only) gets an empty result and an over-long one is searched by its first
``max_query_chars`` characters; ``topk`` 0 or absent means the server's default, as in Search-R1's reference server.
``/search`` is EffiRAG's own call (one query, a mode, ``k``, ``offset``, key entities) and refuses what it cannot
search. Types are pydantic's to check; every limit that depends on the deployment is checked here and answered 422
with ``param`` naming the field and a message naming the value and the limit.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from effirag.config import check, option
from effirag.retrieval.context import MAX_K
from effirag.retrieval.modes import mode_names
from effirag.serve.errors import APIError, JSONInt
from effirag.serve.limits import ServeLimits
from effirag.types import ItemKind, RetrievedItem

INVALID = 422
# Characters that carry no searchable text: controls (NUL, ...), format characters (zero-width space / joiners,
# BOM, word joiner) and separators; a query made only of these is blank, like a whitespace-only one.
_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


@dataclass(frozen=True)
class RetrievalServeLimits:
    """Per-request limits and batching of ``effirag serve retrieval`` (transport limits nested under ``http``)."""

    http: ServeLimits = option(
        factory=lambda: ServeLimits(max_queue=256, request_timeout_s=120.0),
        help="Body size, admission queue, deadline (120 s: a 2,560-query dense batch ran past 30 s on a loaded 2-core "
        "CPU) and drain.",
    )
    max_queries: int = option(
        4096, help="Most queries in one /retrieve request (Search-R1's GRPO step sends 512 x 5 = 2,560)."
    )
    max_rows: int = option(
        25_600, help="Most queries x topk in one /retrieve request: bounds the answer's size and memory."
    )
    max_query_chars: int = option(
        2048, help="Longest query, in characters (/retrieve searches a longer one by its first max_query_chars)."
    )
    max_topk: int = option(100, help="Largest topk (/retrieve) or offset + k (/search); also capped by the corpus.")
    default_topk: int = option(3, help="topk of a /retrieve request that does not set it (Search-R1's default: 3).")
    max_entities: int = option(32, help="Most key entities in one /search request.")
    max_batch: int = option(
        128, help="Most queries in one encoder / FAISS call; a larger /retrieve request is searched in such chunks."
    )
    max_wait_ms: float = option(2.0, help="How long the batcher waits for more queries before it searches.")
    workers: int = option(
        2, help="Threads running batches (dense/BM25 batches run side by side; other modes one at a time)."
    )

    def __post_init__(self) -> None:
        for name in ("max_queries", "max_rows", "max_query_chars", "max_entities", "max_batch", "workers"):
            check(getattr(self, name) >= 1, self, name, "must be >= 1")
        check(1 <= self.max_topk <= MAX_K, self, "max_topk", f"must be in [1, {MAX_K}]")
        check(1 <= self.default_topk <= self.max_topk, self, "default_topk", "must be in [1, max_topk]")
        check(self.max_wait_ms >= 0, self, "max_wait_ms", "must be >= 0")


class RetrieveRequest(BaseModel):
    """``/retrieve``'s body: Search-R1's batch (``queries``, ``topk``) or rLLM's one query (``query``, ``top_k``)."""

    model_config = ConfigDict(extra="ignore")
    queries: list[str] | None = None
    query: str | None = None
    topk: JSONInt | None = None
    top_k: JSONInt | None = None
    return_scores: bool = False


class SearchRequest(BaseModel):
    """EffiRAG's ``/search`` body: one query through any registered mode."""

    model_config = ConfigDict(extra="forbid")
    query: str
    mode: str = "passage"
    k: JSONInt = 5
    offset: JSONInt = 0
    entities: list[str] | None = None


@dataclass(frozen=True)
class RetrievePlan:
    """A checked ``/retrieve`` request: the text to search per query (None: blank, answered empty), the topk, and
    whether it came in rLLM's one-query form (answered ``{"results": [...]}``)."""

    queries: list[str | None]
    topk: int
    single: bool


def _bad(param: str, message: str) -> APIError:
    return APIError(INVALID, f"{param}: {message}", param=param)


def is_blank(text: str) -> bool:
    """True when ``text`` holds no searchable character: empty, or only whitespace, control, zero-width / format
    and separator characters (``"\\x00"``, ``"\\u200b"``, ``"\\ufeff"`` count as blank like ``" "``)."""
    return all(ch.isspace() or unicodedata.category(ch) in _BLANK_CATEGORIES for ch in text)


def batch_query(text: str, limit: int) -> str | None:
    """A batch query as searched: its first ``limit`` characters, or None when that holds nothing to search."""
    text = text[:limit]
    return None if is_blank(text) else text


def check_query(text: str, param: str, limits: RetrievalServeLimits) -> None:
    if is_blank(text):
        raise _bad(param, "must not be empty (nothing but whitespace, control or zero-width characters)")
    if len(text) > limits.max_query_chars:
        raise _bad(param, f"{len(text)} characters exceed the limit of {limits.max_query_chars}")


def check_k(value: int, param: str, cap: int) -> None:
    if value <= 0:
        raise _bad(param, f"{value} must be >= 1")
    if value > cap:
        raise _bad(param, f"{value} exceeds the limit of {cap}")


def _retrieve_topk(req: RetrieveRequest, limits: RetrievalServeLimits, corpus_size: int) -> int:
    if req.topk is not None and req.top_k is not None:
        raise _bad("top_k", "give topk (Search-R1) or top_k (rLLM), not both")
    param, value = ("top_k", req.top_k) if req.top_k is not None else ("topk", req.topk)
    if value is None or value == 0:  # Search-R1's reference server falls back to its default for 0 too
        return limits.default_topk
    if value < 0:
        raise _bad(param, f"{value} must be >= 0 (0: the server's default, {limits.default_topk})")
    check_k(value, param, min(limits.max_topk, corpus_size))
    return value


def check_retrieve(req: RetrieveRequest, limits: RetrievalServeLimits, corpus_size: int) -> RetrievePlan:
    """The request's plan once every field is within the limits; else a 422 naming the field."""
    if req.query is not None and req.queries is not None:
        raise _bad("query", "give queries (a batch) or query (one), not both")
    if req.query is None and req.queries is None:
        raise _bad("queries", "field required (or query, for one)")
    texts = [req.query] if req.query is not None else (req.queries or [])
    if len(texts) > limits.max_queries:
        raise _bad("queries", f"{len(texts)} queries exceed the limit of {limits.max_queries}")
    topk = _retrieve_topk(req, limits, corpus_size)
    if len(texts) * topk > limits.max_rows:
        raise _bad(
            "queries", f"{len(texts)} queries x topk {topk} = {len(texts) * topk} exceed the limit of {limits.max_rows}"
        )
    planned = [batch_query(t, limits.max_query_chars) for t in texts]
    return RetrievePlan(planned, topk, single=req.query is not None)


def check_search(req: SearchRequest, limits: RetrievalServeLimits, corpus_size: int) -> None:
    check_query(req.query, "query", limits)
    if req.mode not in mode_names():
        raise _bad("mode", f"unknown mode {req.mode!r}; known: {', '.join(mode_names())}")
    if req.offset < 0:
        raise _bad("offset", f"{req.offset} must be >= 0")
    cap = min(limits.max_topk, corpus_size)
    check_k(req.k, "k", cap)
    if req.offset + req.k > cap:
        raise _bad("offset", f"offset + k = {req.offset + req.k} exceeds the limit of {cap}")
    if req.entities is not None:
        if len(req.entities) > limits.max_entities:
            raise _bad("entities", f"{len(req.entities)} entities exceed the limit of {limits.max_entities}")
        for i, e in enumerate(req.entities):
            check_query(e, f"entities[{i}]", limits)


def document(item: RetrievedItem) -> dict[str, Any]:
    """Search-R1's corpus row for a chunk: ``contents`` is ``title + "\\n" + text`` (verl's search tool splits the
    first line off as the title); a triplet's contents is its text."""
    contents = f"{item.title}\n{item.text}" if item.kind is ItemKind.CHUNK else item.text
    return {"id": item.id, "contents": contents, "title": item.title, "text": item.text, "kind": item.kind.value}
