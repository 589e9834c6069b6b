"""Prometheus text exposition (format 0.0.4) of the retrieval server: requests and errors by route and status, a
latency histogram per route, a batch-size histogram, and the queue gauges. Counters are plain integers updated on
the event loop (one thread), so they need no lock; batch sizes are handed over by the batcher's worker."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Histogram:
    """Cumulative-bucket histogram as Prometheus exposes it (``le`` buckets, ``_sum``, ``_count``)."""

    def __init__(self, buckets: Iterable[float]) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value

    def lines(self, name: str, labels: str) -> list[str]:
        sep = "," if labels else ""
        out, total = [], 0
        for le, n in zip([*map(_num, self.buckets), "+Inf"], self.counts, strict=True):
            total += n
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {total}')
        tail = f"{{{labels}}}" if labels else ""
        return [*out, f"{name}_sum{tail} {self.sum:.6f}", f"{name}_count{tail} {total}"]


def _num(x: float) -> str:
    return f"{x:g}"


class RetrievalMetrics:
    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = {}
        self.batch = Histogram(BATCH_BUCKETS)
        self.queries = 0

    def record(self, route: str, status: int, seconds: float) -> None:
        self.requests[(route, status)] += 1
        self.latency.setdefault(route, Histogram(LATENCY_BUCKETS)).observe(seconds)

    def render(self, *, queue_depth: int, in_flight: int, refused: int, batch_sizes: Iterable[int]) -> str:
        for n in batch_sizes:
            self.batch.observe(n)
            self.queries += n
        lines = [
            "# HELP effirag_requests_total Requests answered, by route and HTTP status.",
            "# TYPE effirag_requests_total counter",
        ]
        lines += [
            f'effirag_requests_total{{route="{r}",status="{s}"}} {n}' for (r, s), n in sorted(self.requests.items())
        ]
        errors: dict[str, int] = defaultdict(int)
        for (r, s), n in self.requests.items():
            if s >= 400:
                errors[r] += n
        lines += [
            "# HELP effirag_errors_total Requests answered 4xx or 5xx, by route.",
            "# TYPE effirag_errors_total counter",
        ]
        lines += [f'effirag_errors_total{{route="{r}"}} {n}' for r, n in sorted(errors.items())]
        lines += ["# HELP effirag_request_seconds Request latency.", "# TYPE effirag_request_seconds histogram"]
        for route, h in sorted(self.latency.items()):
            lines += h.lines("effirag_request_seconds", f'route="{route}"')
        lines += ["# HELP effirag_batch_queries Queries per search call.", "# TYPE effirag_batch_queries histogram"]
        lines += self.batch.lines("effirag_batch_queries", "")
        gauges = (
            ("effirag_queue_depth", "Jobs waiting for the search worker.", queue_depth),
            ("effirag_in_flight", "Requests admitted now (running + waiting).", in_flight),
        )
        for name, help_, value in gauges:
            lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name} {value}"]
        lines += [
            "# HELP effirag_refused_total Requests answered 503 because the admission queue was full.",
            "# TYPE effirag_refused_total counter",
            f"effirag_refused_total {refused}",
        ]
        return "\n".join(lines) + "\n"
