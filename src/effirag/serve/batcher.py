"""Generation for the LLM server: micro-batches on a small pool of worker threads, with per-request cancellation.

Concurrent requests with the same sampling settings are merged into one batched ``generate`` call (up to
``max_wait_ms`` of waiting for company). Batches run on ``workers`` threads, so a request with other settings (another
``max_tokens``, temperature, stop list, seed...) starts on a free worker at once instead of waiting for an unrelated
batch to finish: a 2-token request is not held behind a 600-token one (no head-of-line blocking). Concurrent batches
share the device (PyTorch releases the GIL inside its kernels), so each runs slower than alone, but a short request
ends after its own few steps. ``workers`` bounds how many batches (and KV caches) are alive at once.

Why not continuous batching: ``transformers``' ``generate`` cannot take new rows into a running call, and a decode
loop of our own would re-implement its sampling, penalties, stop handling and every architecture's cache (LFM2's
convolution state included). Why not per-request limits within one batch: a request that arrives after the batch has
started would still wait for all of it. Worker threads need neither and keep every output exactly what
``HFGenerator.generate`` gives.

Sampling draws from torch's one global RNG. A seeded request must own it for its whole run (its samples are
reproducible only if nothing else draws in between), so it waits until no other sampling batch runs and holds the
others back while it runs; unseeded sampling batches share the RNG, and greedy batches never touch it, so they run
alongside anything. Seeded requests are never merged with others.

A request whose cancel token fires (client gone, deadline, shutdown) is dropped if it has not started, and a running
batch stops at its next token once every request in it is cancelled.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.hf import GenerationCancelled, HFGenerator
from effirag.serve.guard import CancelToken
from effirag.serve.jobs import next_live

log = logging.getLogger(__name__)


@dataclass
class _Job:
    prompts: list[str]
    config: GenerationConfig
    cancel: CancelToken
    done: threading.Event = field(default_factory=threading.Event)
    result: list[list[Completion]] | None = None
    error: BaseException | None = None


class RNGGate:
    """Who may draw from torch's global RNG: seeded batches one at a time and alone, unseeded sampling batches
    together, greedy batches always. A waiting seeded batch goes before unseeded ones that arrive after it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting_exclusive = 0

    @contextmanager
    def hold(self, config: GenerationConfig) -> Iterator[None]:
        if config.temperature == 0.0:  # greedy: no draws
            yield
            return
        exclusive = config.seed is not None
        with self._cond:
            if exclusive:
                self._waiting_exclusive += 1
                while self._exclusive or self._shared:
                    self._cond.wait()
                self._waiting_exclusive -= 1
                self._exclusive = True
            else:
                while self._exclusive or self._waiting_exclusive:
                    self._cond.wait()
                self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                if exclusive:
                    self._exclusive = False
                else:
                    self._shared -= 1
                self._cond.notify_all()


class MicroBatcher:
    """Runs ``generate`` on ``workers`` threads, each batch merging queued jobs that share a seedless config."""

    def __init__(
        self, generator: HFGenerator, max_wait_ms: float = 5.0, max_prompts: int = 64, workers: int = 4
    ) -> None:
        if workers < 1:
            raise ValueError(f"MicroBatcher: workers={workers!r} must be >= 1")
        self.generator = generator
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_prompts = max_prompts
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._held: deque[_Job] = deque()
        self._take = threading.Lock()  # one worker at a time collects a batch (and touches _held)
        self._rng = RNGGate()
        for i in range(workers):
            threading.Thread(target=self._loop, name=f"effirag-batcher-{i}", daemon=True).start()

    def submit(
        self, prompts: list[str], config: GenerationConfig, cancel: CancelToken | None = None
    ) -> list[list[Completion]]:
        """Completions for ``prompts``; :class:`GenerationCancelled` as soon as ``cancel`` fires."""
        job = _Job(prompts, config, cancel or CancelToken())
        self._queue.put(job)
        while not job.done.wait(0.05):
            if job.cancel.cancelled:  # do not wait for a busy worker to notice: the worker skips or stops it
                raise GenerationCancelled(f"{self.generator.name}: {job.cancel.reason}")
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def _next(self, timeout: float | None) -> _Job | None:
        return next_live(self._held, self._queue, timeout, self._drop)

    def _drop(self, job: _Job) -> None:
        job.error = GenerationCancelled(f"{self.generator.name}: {job.cancel.reason}")
        job.done.set()

    def _loop(self) -> None:
        while True:
            with self._take:
                jobs = self._collect()
            if jobs:
                with self._rng.hold(jobs[0].config):
                    self._run(jobs)

    def _collect(self) -> list[_Job]:
        first = self._next(None)
        if first is None:
            return []
        jobs = [first]
        if first.config.seed is None:
            deadline = time.monotonic() + self.max_wait_s
            skipped: list[_Job] = []
            while sum(len(j.prompts) for j in jobs) < self.max_prompts:
                nxt = self._next(max(0.0, deadline - time.monotonic()))
                if nxt is None:
                    break
                (jobs if nxt.config == first.config else skipped).append(nxt)
            self._held.extend(skipped)
        return jobs

    def _run(self, jobs: list[_Job]) -> None:
        def all_cancelled() -> bool:
            return all(j.cancel.cancelled for j in jobs)

        try:
            out = self.generator.generate(
                [p for j in jobs for p in j.prompts], jobs[0].config, should_stop=all_cancelled
            )
            at = 0
            for j in jobs:
                j.result = out[at : at + len(j.prompts)]
                at += len(j.prompts)
        except BaseException as e:  # handed to the waiting request threads, which answer it
            if not isinstance(e, GenerationCancelled):
                log.exception("generation failed")
            for j in jobs:
                j.error = e
        for j in jobs:
            j.done.set()
