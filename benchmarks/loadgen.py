"""Shared pieces of the loopback load benchmarks (bench_llm_server_load.py, bench_retrieval_server.py): a free port, a
server's RSS, a bounded asyncio load generator and the per-configuration summary over rounds."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of a process, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


async def load(
    url: str,
    path: str,
    body: Callable[[int], dict[str, Any]],
    requests: int,
    concurrency: int,
    *,
    check: Callable[[int, bytes], str] = lambda status, _: str(status),
    allowed: tuple[str, ...] = ("200",),
) -> dict[str, Any]:
    """POST ``body(i)`` to ``url + path`` ``requests`` times, at most ``concurrency`` at once; ``check(status,
    content)`` names each answer's outcome ("200" counts as served, with its latency); outcomes outside ``allowed``
    are errors.

    The client is aiohttp: the load generator shares the CPU with the server, so it must cost little per request.
    httpx's AsyncClient cost ~5 ms of CPU per request against a server that answers in bursts (a micro-batching
    one), enough to cap the measured throughput near 180 requests/s on the 2-core machine; aiohttp costs ~0.2 ms.
    """
    sem = asyncio.Semaphore(concurrency)
    statuses: dict[str, int] = {}
    latencies: list[float] = []
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as client:

        async def one(i: int) -> None:
            async with sem:
                t0 = time.perf_counter()
                try:
                    async with client.post(path, json=body(i)) as r:
                        key = check(r.status, await r.read())
                except (aiohttp.ClientError, TimeoutError) as e:
                    key = type(e).__name__
                if key == "200":
                    latencies.append(time.perf_counter() - t0)
                statuses[key] = statuses.get(key, 0) + 1

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(requests)))
        wall = time.perf_counter() - t0
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else float("nan")
    return {
        "statuses": statuses,
        "errors": sum(v for k, v in statuses.items() if k not in allowed),
        "p50_ms": 1000 * statistics.median(latencies) if latencies else float("nan"),
        "p99_ms": 1000 * p99,
        "ok_per_s": len(latencies) / wall,
        "wall_s": wall,
    }


def summary(key: str, name: str, runs: list[dict[str, Any]], mem: dict[str, float]) -> dict[str, Any]:
    """Statuses summed over the rounds; latency and throughput as the median of the rounds; ``mem`` as rss_*."""
    statuses: dict[str, int] = {}
    for r in runs:
        for k, v in r["statuses"].items():
            statuses[k] = statuses.get(k, 0) + v
    return {
        key: name,
        "statuses": statuses,
        "errors": sum(r["errors"] for r in runs),
        "p50_ms": statistics.median(r["p50_ms"] for r in runs),
        "p99_ms": statistics.median(r["p99_ms"] for r in runs),
        "ok_per_s": statistics.median(r["ok_per_s"] for r in runs),
        "ok_per_s_runs": [round(r["ok_per_s"], 1) for r in runs],
        **{f"rss_{k}": v for k, v in mem.items()},
    }
