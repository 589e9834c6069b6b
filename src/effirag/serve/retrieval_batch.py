"""Micro-batching of retrieval queries on one worker thread, with per-request cancellation.

Queries that arrive together (within ``max_wait_ms`` of the first, up to ``max_batch``) and ask for the same mode, k,
offset and entities are answered by one call of the search function (the server's runs
:meth:`~effirag.retrieval.facade.EffiRetriever.retrieve_batch`: one encoder forward pass and one FAISS search for
the dense mode, instead of one per request). A job whose cancel token has fired (client gone, deadline, shutdown)
before its batch starts is dropped. ``workers`` threads take batches in turn, so one batch can be encoded while the
next is being collected (and, with one torch thread each, every core encodes); the search function must therefore
be safe to call from several threads at once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from effirag.retrieval.base import RetrievalResult
from effirag.serve.guard import CancelToken
from effirag.serve.jobs import next_live

log = logging.getLogger(__name__)

Entities = tuple[str, ...] | None
# (queries, mode, k, offset, entities) -> one result per query
BatchFn = Callable[[Sequence[str], str, int, int, Entities], list[RetrievalResult]]


class BatchCancelled(Exception):
    """The job's cancel token fired before its batch ran."""


@dataclass
class _Job:
    queries: list[str]
    mode: str
    k: int
    offset: int
    entities: Entities
    cancel: CancelToken
    future: Future[list[RetrievalResult]] = field(default_factory=Future)


class QueryBatcher:
    """``submit(queries, mode, k, cancel)`` → a Future of one RetrievalResult per query, computed in batches."""

    def __init__(self, search: BatchFn, *, max_batch: int = 128, max_wait_ms: float = 2.0, workers: int = 1) -> None:
        self.search, self.max_batch, self.max_wait_s = search, max_batch, max_wait_ms / 1000.0
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._held: deque[_Job] = deque()
        self.batch_sizes: list[int] = []  # queries per search call since the last drain (read by the metrics)
        self._lock = threading.Lock()
        self._take = threading.Lock()  # one worker at a time collects a batch, so batches are not split between them
        for i in range(workers):
            threading.Thread(target=self._loop, name=f"effirag-retrieval-batcher-{i}", daemon=True).start()

    @property
    def depth(self) -> int:
        """Jobs waiting for the worker (not counting the batch it is running)."""
        return self._queue.qsize() + len(self._held)

    def drain_batch_sizes(self) -> list[int]:
        with self._lock:
            out, self.batch_sizes = self.batch_sizes, []
        return out

    def submit(
        self, queries: list[str], mode: str, k: int, offset: int, entities: Entities, cancel: CancelToken
    ) -> Future[list[RetrievalResult]]:
        job = _Job(list(queries), mode, k, offset, entities, cancel)
        self._queue.put(job)
        return job.future

    def _next(self, timeout: float | None) -> _Job | None:
        return next_live(self._held, self._queue, timeout, lambda job: job.future.set_exception(
            BatchCancelled(job.cancel.reason)))  # fmt: skip

    def _loop(self) -> None:
        while True:
            with self._take:
                batch = self._collect()
            if batch is not None:
                self._run(*batch)

    def _collect(self) -> tuple[list[_Job], int] | None:
        first = self._next(None)
        if first is None:
            return None
        jobs, size, skipped = [first], len(first.queries), []
        deadline = time.monotonic() + self.max_wait_s
        while size < self.max_batch:
            nxt = self._next(max(0.0, deadline - time.monotonic()))
            if nxt is None:
                break
            if _key(nxt) == _key(first) and size + len(nxt.queries) <= self.max_batch:
                jobs.append(nxt)
                size += len(nxt.queries)
            else:
                skipped.append(nxt)
        self._held.extend(skipped)
        return jobs, size

    def _run(self, jobs: list[_Job], size: int) -> None:
        # A request that gave up (deadline, shutdown) cancels its future; a running one can no longer be cancelled,
        # so the results below always find their futures settable (else set_result would kill this worker).
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]
        if not jobs:
            return
        with self._lock:
            self.batch_sizes.append(size)
        try:
            first = jobs[0]
            out = self.search([q for j in jobs for q in j.queries], first.mode, first.k, first.offset, first.entities)
        except Exception as e:  # handed to every waiting request, which answers it
            log.exception("retrieval batch of %d queries failed", size)
            for j in jobs:
                j.future.set_exception(e)
            return
        at = 0
        for j in jobs:
            j.future.set_result(out[at : at + len(j.queries)])
            at += len(j.queries)


def _key(job: _Job) -> tuple[str, int, int, Entities]:
    return job.mode, job.k, job.offset, job.entities
