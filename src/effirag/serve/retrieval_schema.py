"""The retrieval server's request schema, its limits, and the checks that name the field and the limit broken.

``/retrieve`` takes the request Search-R1's retrieval server defines and verl's search tool sends
(``{"queries": [str], "topk": int, "return_scores": bool}``); ``/search`` is EffiRAG's own call (one query, a mode,
``k``, ``offset``, key entities). Types are pydantic's to check; every limit that depends on the deployment is checked
here and answered 422 with ``param`` naming the field and a message naming the value and the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from effirag.config import check, option
from effirag.retrieval.context import MAX_K
from effirag.retrieval.modes import mode_names
from effirag.serve.errors import APIError
from effirag.serve.limits import ServeLimits
from effirag.types import ItemKind, RetrievedItem

INVALID = 422


@dataclass(frozen=True)
class RetrievalServeLimits:
    """Per-request limits and batching of ``effirag serve retrieval`` (transport limits nested under ``http``)."""

    http: ServeLimits = option(
        factory=lambda: ServeLimits(max_queue=256, request_timeout_s=30.0),
        help="Body size, admission queue, deadline and drain.",
    )
    max_queries: int = option(256, help="Most queries in one /retrieve request.")
    max_query_chars: int = option(2048, help="Longest query, in characters.")
    max_topk: int = option(100, help="Largest topk (/retrieve) or offset + k (/search); also capped by the corpus.")
    default_topk: int = option(3, help="topk of a /retrieve request that does not set it (Search-R1's default: 3).")
    max_entities: int = option(32, help="Most key entities in one /search request.")
    max_batch: int = option(128, help="Most queries merged into one encoder / FAISS call.")
    max_wait_ms: float = option(2.0, help="How long the batcher waits for more queries before it searches.")
    workers: int = option(
        2, help="Threads running batches (dense/BM25 batches run side by side; other modes one at a time)."
    )

    def __post_init__(self) -> None:
        for name in ("max_queries", "max_query_chars", "max_entities", "max_batch", "workers"):
            check(getattr(self, name) >= 1, self, name, "must be >= 1")
        check(1 <= self.max_topk <= MAX_K, self, "max_topk", f"must be in [1, {MAX_K}]")
        check(1 <= self.default_topk <= self.max_topk, self, "default_topk", "must be in [1, max_topk]")
        check(self.max_wait_ms >= 0, self, "max_wait_ms", "must be >= 0")


class RetrieveRequest(BaseModel):
    """Search-R1 / verl's ``/retrieve`` body."""

    model_config = ConfigDict(extra="ignore")
    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


class SearchRequest(BaseModel):
    """EffiRAG's ``/search`` body: one query through any registered mode."""

    model_config = ConfigDict(extra="forbid")
    query: str
    mode: str = "passage"
    k: int = 5
    offset: int = 0
    entities: list[str] | None = None


def _bad(param: str, message: str) -> APIError:
    return APIError(INVALID, f"{param}: {message}", param=param)


def check_query(text: str, param: str, limits: RetrievalServeLimits) -> None:
    if not text.strip():
        raise _bad(param, "must not be empty")
    if len(text) > limits.max_query_chars:
        raise _bad(param, f"{len(text)} characters exceed the limit of {limits.max_query_chars}")


def check_k(value: int, param: str, cap: int) -> None:
    if value <= 0:
        raise _bad(param, f"{value} must be >= 1")
    if value > cap:
        raise _bad(param, f"{value} exceeds the limit of {cap}")


def check_retrieve(req: RetrieveRequest, limits: RetrievalServeLimits, corpus_size: int) -> int:
    """The request's topk once every field is within the limits; else a 422 naming the field."""
    if not req.queries:
        raise _bad("queries", "must not be empty")
    if len(req.queries) > limits.max_queries:
        raise _bad("queries", f"{len(req.queries)} queries exceed the limit of {limits.max_queries}")
    for i, q in enumerate(req.queries):
        check_query(q, f"queries[{i}]", limits)
    topk = limits.default_topk if req.topk is None else req.topk
    check_k(topk, "topk", min(limits.max_topk, corpus_size))
    return topk


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
