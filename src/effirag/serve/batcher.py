"""Micro-batching of generate calls on one worker thread, with per-request cancellation.

Concurrent requests with the same sampling settings and no seed are merged into one batched ``generate`` call (up
to ``max_wait_ms`` of waiting for company); seeded requests run alone so that their samples are reproducible. A
request whose cancel token fires (client gone, deadline, shutdown) is dropped if it has not started, and a running
batch stops at its next token once every request in it is cancelled.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
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


class MicroBatcher:
    """Runs ``generate`` on one worker thread, merging queued jobs that share a seedless config."""

    def __init__(self, generator: HFGenerator, max_wait_ms: float = 5.0, max_prompts: int = 64) -> None:
        self.generator = generator
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_prompts = max_prompts
        self._queue: queue.Queue[_Job] = queue.Queue()
        self._held: deque[_Job] = deque()
        self._thread = threading.Thread(target=self._loop, name="effirag-batcher", daemon=True)
        self._thread.start()

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
            first = self._next(None)
            if first is None:
                continue
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
            self._run(jobs)

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
