"""The job queue both micro-batchers share (the LLM server's and the retrieval server's): take the next job whose
client still wants it, jobs held back from an earlier batch first."""

from __future__ import annotations

import queue
from collections import deque
from collections.abc import Callable
from typing import Protocol, TypeVar

from effirag.serve.guard import CancelToken


class Cancellable(Protocol):
    cancel: CancelToken


J = TypeVar("J", bound=Cancellable)


def next_live(held: deque[J], pending: queue.Queue[J], timeout: float | None, drop: Callable[[J], None]) -> J | None:
    """The next job not cancelled: from ``held`` (jobs an earlier batch left for later) first, else from ``pending``
    (waiting up to ``timeout`` seconds; None when nothing came). A cancelled job goes to ``drop`` (which fails it
    for its waiting caller) and is skipped."""
    while True:
        if held:
            job = held.popleft()
        else:
            try:
                job = pending.get(timeout=timeout)
            except queue.Empty:
                return None
        if not job.cancel.cancelled:
            return job
        drop(job)
