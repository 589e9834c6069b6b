"""Bounded loopback load on ``effirag serve``: many concurrent completion requests against a tiny model.

The server runs as its own process (``effirag serve``, so its RSS is its own) on 127.0.0.1; the client sends
``--requests`` completions with ``--concurrency`` in flight (real MuSiQue questions of ../shared/data/musique_mini as
prompts, greedy, ``--max-tokens`` new tokens). Three configurations, measured in one run, one after the other:
- ``default``: the shipped limits (admission queue of 64, deadline, body cap, every request check);
- ``tight queue``: the same with ``http.max_queue`` below the concurrency, so the promised 503s (+ Retry-After)
  happen; a 503 is counted as such, never as an error;
- peer ``limits off``: the same server with the bounds made non-binding (queue, deadline and body cap at huge
  values): what the safety layer costs when nothing trips it.
The three servers run side by side and the rounds are interleaved, their order rotated each round (the machine is
shared, so a burst of load or a warm-up effect hits every configuration alike). Reported per configuration: answers
by status summed over the rounds, errors (anything but 200 and the promised 503), the median over rounds of p50 / p99
latency of the 200s and of throughput (200s per second), and server RSS after start-up + one warm-up request, after
all rounds, and its peak (VmHWM).

    .venv/bin/python benchmarks/bench_llm_server_load.py [--requests 500] [--concurrency 32] [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from loadgen import free_port, load, rss_kib, summary  # noqa: E402

from tiny_models import make_tiny_model  # noqa: E402

DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))
CONFIGS: dict[str, list[str]] = {
    "default": [],
    "tight queue": ["--set", "http.max_queue=16"],
    "peer: limits off": [
        "--set", "http.max_queue=1000000", "--set", "http.request_timeout_s=1000000",
        "--set", "http.max_body_bytes=1073741824",
    ],
}  # fmt: skip


def questions(n: int) -> list[str]:
    qs = json.loads((DATA / "musique_mini" / "questions.json").read_text(encoding="utf-8"))
    return [f"Question: {q['question']}\nAnswer:" for q in qs[:n]]


def start_server(model: Path, extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-c", "from effirag.cli.main import app; app()", "serve", "--model", str(model)]
    cmd += ["--model-name", "tiny", "--port", str(port), "--device", "cpu", *extra]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"effirag serve did not start: {cmd}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)


def load_llm(url: str, prompts: list[str], requests: int, concurrency: int, max_tokens: int) -> Any:
    """One round of /v1/completions requests; the 503s the queue bound promises are not errors."""

    def body(i: int) -> dict[str, Any]:
        return {"model": "tiny", "prompt": prompts[i % len(prompts)], "max_tokens": max_tokens, "temperature": 0}

    return load(url, "/v1/completions", body, requests, concurrency, allowed=("200", "503"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians are reported")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    model = make_tiny_model(Path(tempfile.mkdtemp(prefix="effirag-bench-load-")), arch="qwen2", seed=0)
    prompts = questions(64)
    servers = {name: start_server(model, extra) for name, extra in CONFIGS.items()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
    rss: dict[str, dict[str, float]] = {}
    load_before = os.getloadavg()
    try:
        for name, (proc, url) in servers.items():
            httpx.post(url + "/v1/completions", json={"model": "tiny", "prompt": prompts[0], "max_tokens": 2})
            rss[name] = {"before_mib": rss_kib(proc.pid)["VmRSS"] / 1024}
        names = list(servers)
        for r in range(args.repeats):  # interleaved, order rotated each round: a load burst or warm-up hits all alike
            for name in names[r % len(names) :] + names[: r % len(names)]:
                url = servers[name][1]
                runs[name].append(asyncio.run(load_llm(url, prompts, args.requests, args.concurrency, args.max_tokens)))
        for name, (proc, _) in servers.items():
            mem = rss_kib(proc.pid)
            rss[name].update(after_mib=mem["VmRSS"] / 1024, peak_mib=mem["VmHWM"] / 1024)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=30)
    rows = [summary("config", name, runs[name], rss[name]) for name in CONFIGS]
    out = {"load_average_before": load_before, "load_average_after": os.getloadavg(), "args": vars(args), "rows": rows}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{args.requests} requests × {args.repeats} rounds, {args.concurrency} concurrent, {args.max_tokens} tokens")
    print(f"load average before: {load_before}")
    for r in rows:
        print(
            f"{r['config']:>18}: {r['statuses']} errors={r['errors']} p50={r['p50_ms']:.0f} ms p99={r['p99_ms']:.0f} "
            f"ms {r['ok_per_s']:.1f} ok/s (rounds {r['ok_per_s_runs']}) RSS {r['rss_before_mib']:.0f} -> "
            f"{r['rss_after_mib']:.0f} MiB (peak {r['rss_peak_mib']:.0f})"
        )
    print(f"load average after: {out['load_average_after']}")


if __name__ == "__main__":
    main()
