"""``effirag serve retrieval``: a retrieval server over one EffiRAG index, behind the shared safety layer.

Routes:

- ``POST /retrieve``: the contract of Search-R1's retrieval server, which Search-R1's trainer and verl's and SkyRL's
  search tools call: request ``{"queries": [str], "topk": int, "return_scores": bool}``; response ``{"result":
  [[{"document": {"id", "contents": "Title\\ntext", ...}, "score": float}, ...] per query]}``, or the bare
  documents without scores. A batch of any size up to ``max_queries`` is searched in chunks of ``max_batch``; a blank
  query gets an empty list, an over-long one is searched by its first ``max_query_chars`` characters. rLLM's
  ``LocalRetrievalTool`` sends one ``{"query": str, "top_k": int}`` and reads ``{"results": [{"document", "score"},
  ...]}`` (plus ``query`` and ``num_results``), which the same route answers.
- ``POST /search``: EffiRAG's call, ``{"query", "mode", "k", "offset", "entities"}`` through any registered mode;
  answers the typed items (chunk or triplet, with score and token count), the stage timings and the mode's extras.
- ``GET /health``; ``GET /metrics`` (Prometheus text).

Concurrent queries go through one :class:`~effirag.serve.retrieval_batch.QueryBatcher`, which merges them into one
encoder / FAISS call; admission, body cap, auth, deadline and cancellation are the shared guard's. Bad input is 422,
naming the field and the limit.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from effirag.errors import ConfigError, IndexMismatchError
from effirag.retrieval.base import RetrievalResult
from effirag.retrieval.facade import EffiRetriever
from effirag.serve.errors import APIError
from effirag.serve.guard import CancelToken, cancel_token
from effirag.serve.retrieval_batch import BatchCancelled, QueryBatcher
from effirag.serve.retrieval_metrics import RetrievalMetrics
from effirag.serve.retrieval_schema import (
    INVALID,
    RetrievalServeLimits,
    RetrieveRequest,
    SearchRequest,
    check_retrieve,
    check_search,
    document,
)
from effirag.serve.safety import health_response, install_safety, new_app
from effirag.types import RetrievedItem

# (queries, mode, k, offset, entities): one job for the batcher
_JobArgs = tuple[Sequence[str], str, int, int, tuple[str, ...] | None]
_READ_ONLY_MODES = frozenset({"passage", "sparse"})
_ROUTES = frozenset({"/retrieve", "/search", "/health"})
_CANCEL_STATUS = {"deadline": 504, "server shutting down": 503}


def default_mode(retriever: EffiRetriever) -> str:
    """The mode ``/retrieve`` searches with when none is configured: dense when the index has it, else BM25."""
    return "passage" if retriever.index.dense is not None and retriever.encoder is not None else "sparse"


def create_app(
    retriever: EffiRetriever,
    *,
    limits: RetrievalServeLimits | None = None,
    token: str | None = None,
    retrieve_mode: str | None = None,
) -> FastAPI:
    """The FastAPI app serving ``retriever`` (``token``: bearer auth; ``retrieve_mode``: the mode of /retrieve)."""
    limits = limits or RetrievalServeLimits()
    mode = retrieve_mode or default_mode(retriever)
    retriever.require(mode)  # a /retrieve mode the index cannot serve is refused at start, not per request
    app = new_app("EffiRAG retrieval server", token)
    admission = install_safety(app, limits.http, token=token, validation_status=INVALID)
    metrics = RetrievalMetrics()
    app.add_middleware(_Recorder, metrics=metrics)  # outermost: sees the guard's 401 / 413 / 503 too
    svc = _Service(retriever, limits)

    @app.get("/health")
    def health() -> JSONResponse:
        return health_response(admission, passages=retriever.n_passages, retrieve_mode=mode)

    @app.get("/metrics")
    def prometheus() -> PlainTextResponse:
        text = metrics.render(
            queue_depth=svc.batcher.depth,
            in_flight=admission.in_flight,
            refused=admission.refused,
            batch_sizes=svc.batcher.drain_batch_sizes(),
        )
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.post("/retrieve")
    async def retrieve(req: RetrieveRequest, request: Request) -> dict[str, Any]:
        plan = check_retrieve(req, limits, retriever.n_passages)
        ranked = await svc.run_batch(plan.queries, mode, plan.topk, cancel_token(request))
        if plan.single:  # rLLM's one-query form: scored documents under "results"
            results = [{"document": document(it), "score": it.score} for it in ranked[0]]
            return {"query": req.query, "results": results, "num_results": len(results)}
        if req.return_scores:
            return {"result": [[{"document": document(it), "score": it.score} for it in r] for r in ranked]}
        return {"result": [[document(it) for it in r] for r in ranked]}

    @app.post("/search")
    async def search(req: SearchRequest, request: Request) -> dict[str, Any]:
        check_search(req, limits, retriever.n_passages)
        try:
            retriever.require(req.mode)
        except IndexMismatchError as e:
            raise APIError(INVALID, f"mode: {e}", param="mode") from e
        entities = tuple(req.entities) if req.entities is not None else None
        (res,) = await svc.run([req.query], req.mode, req.k, req.offset, entities, cancel_token(request))
        extras = {k: v for k, v in res.extras.items() if isinstance(v, str | int | float | bool)}
        return {"items": [it.to_dict() for it in res.items], "timings": res.timings, "extras": extras}

    return app


class _Service:
    """The retriever behind the routes: every search runs on the batcher's worker threads. Dense and BM25 searches
    only read the index, encoder and model, so their batches run side by side; the graph modes build shared helpers
    on first use, so they run one at a time."""

    def __init__(self, retriever: EffiRetriever, limits: RetrievalServeLimits) -> None:
        self.retriever, self.max_batch = retriever, limits.max_batch
        self._serial = threading.Lock()
        self.batcher = QueryBatcher(
            self._search, max_batch=limits.max_batch, max_wait_ms=limits.max_wait_ms, workers=limits.workers
        )

    def _search(
        self, queries: Sequence[str], mode: str, k: int, offset: int, entities: tuple[str, ...] | None
    ) -> list[RetrievalResult]:
        if mode in _READ_ONLY_MODES and offset == 0 and entities is None:
            return self.retriever.retrieve_batch(queries, mode, k)
        with self._serial:
            return [self.retriever.retrieve(q, mode, k, entities=entities, offset=offset) for q in queries]

    async def run_batch(
        self, queries: Sequence[str | None], mode: str, k: int, cancel: CancelToken
    ) -> list[list[RetrievedItem]]:
        """The ranked items per query (an empty list for a None, blank, query), searched in chunks of at most
        ``max_batch`` queries, so a request of thousands holds one chunk's encoder activations per worker at a time;
        the chunks go through the batcher like any request, so other requests' queries interleave with them."""
        at = [i for i, q in enumerate(queries) if q is not None]
        texts = [q for q in queries if q is not None]
        step = self.max_batch
        chunks = [texts[i : i + step] for i in range(0, len(texts), step)]
        results = await self.run_many([(c, mode, k, 0, None) for c in chunks], cancel)
        out: list[list[RetrievedItem]] = [[] for _ in queries]
        for i, res in zip(at, (r for chunk in results for r in chunk), strict=True):
            out[i] = res.items
        return out

    async def run(
        self,
        queries: list[str],
        mode: str,
        k: int,
        offset: int,
        entities: tuple[str, ...] | None,
        cancel: CancelToken,
    ) -> list[RetrievalResult]:
        """The batched results of one job."""
        (out,) = await self.run_many([(queries, mode, k, offset, entities)], cancel)
        return out

    async def run_many(self, jobs: Sequence[_JobArgs], cancel: CancelToken) -> list[list[RetrievalResult]]:
        """Each job's batched results, polling ``cancel`` so a cancelled request frees its slot without waiting for
        the worker; the worker drops the jobs that have not started."""
        futs = [asyncio.wrap_future(self.batcher.submit(list(q), m, k, o, e, cancel)) for q, m, k, o, e in jobs]
        pending = set(futs)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=0.05)
            if pending and cancel.cancelled:
                for f in futs:
                    f.cancel()
                _raise_cancelled(cancel.reason)
        try:
            return [f.result() for f in futs]
        except BatchCancelled as e:
            _raise_cancelled(str(e))
        except ConfigError as e:  # a check of the retriever's own the schema did not foresee
            raise APIError(INVALID, f"{e.field}: {e}", param=e.field) from e
        raise AssertionError("unreachable")


def _raise_cancelled(reason: str) -> None:
    raise APIError(_CANCEL_STATUS.get(reason, 499), f"retrieval cancelled: {reason}")


class _Recorder:
    """Pure ASGI middleware recording each request's route, status and latency into the metrics."""

    def __init__(self, app: Any, *, metrics: RetrievalMetrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] == "/metrics":
            await self.app(scope, receive, send)
            return
        t0, status = time.perf_counter(), 0

        async def recording_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = scope["path"] if scope["path"] in _ROUTES else "other"  # bounded label values
            self.metrics.record(route, status or 499, time.perf_counter() - t0)
