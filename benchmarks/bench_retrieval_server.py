"""Bounded loopback load on ``effirag serve retrieval`` against a plain FastAPI + FAISS peer, in the same run.

Both servers run as their own processes on 127.0.0.1 over the same dense index (all-MiniLM-L6-v2, FAISS flat inner
product) of the real MuSiQue slice (../shared/data/musique_mini/corpus.json, 1,890 passages), built once into
``--index-dir``. The client sends ``--requests`` Search-R1 ``/retrieve`` calls of one query each (what verl's search
tool sends; the 145 real MuSiQue questions and first-hop sub-questions, cycled), topk 3 with scores, keeping
``--concurrency`` in flight. Servers:

- ``effirag``: ``effirag serve retrieval`` with its shipped limits: concurrent queries merged by the batcher into one
  encoder call and one FAISS search;
- peers ``plain FastAPI + FAISS``: written below (``--peer-serve``), the shape of Search-R1's retrieval server: one
  query per call, encoded and searched inside the request (FastAPI's thread pool), no limits; one with torch's
  default thread count (what such a server runs with) and one with one torch thread per call (``--peer-threads``).

Rounds are interleaved with the order rotated each round (the machine is shared); reported per server: answers by
status summed over rounds, errors (anything but 200), the median over rounds of p50 / p99 latency and throughput
(200s per second), and server RSS after a warm-up request, after all rounds, and its peak (VmHWM).

    .venv/bin/python benchmarks/bench_retrieval_server.py [--requests 1000] [--concurrency 64] [--repeats 3] [--json]
        [--grpo-batch 2560]

``--grpo-batch N`` then sends effirag's server, alone, one Search-R1 ``/retrieve`` of N queries (its GRPO step sends
every rollout's search at once: 512 x 5 = 2,560), topk 3 with scores: status, seconds, answers with 3 results, and
the server's RSS just before and after it. (Not the peers: one query per encoder call, 2,560 of them outlasted a
600 s client timeout on the shared CPU.)

``--device cuda`` encodes queries on the GPU in both servers (effirag's then runs sentence-transformers on torch
rather than ONNX Runtime), where one query per forward pass is bound by kernel launches rather than arithmetic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from loadgen import free_port, load, rss_kib, summary
from pydantic import BaseModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data"))
ENV = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


class PeerRequest(BaseModel):  # module level: the annotations are strings FastAPI resolves from module globals
    queries: list[str]
    topk: int = 3
    return_scores: bool = False


def peer_serve(index_dir: Path, port: int, threads: int, device: str = "cpu") -> None:
    """The peer: a plain FastAPI + FAISS server answering Search-R1's /retrieve one query per call."""
    import faiss
    import torch
    import uvicorn
    from fastapi import FastAPI
    from sentence_transformers import SentenceTransformer

    from effirag.retrieval.encoders import default_model_path

    index = faiss.read_index(str(index_dir / "dense" / "faiss.index"))
    docs = [json.loads(line) for line in (index_dir / "passages.jsonl").read_text(encoding="utf-8").splitlines()]
    if threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(default_model_path()), device=device)
    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/retrieve")
    def retrieve(req: PeerRequest) -> dict[str, Any]:
        out = []
        for q in req.queries:
            vec = model.encode([q], normalize_embeddings=True, convert_to_numpy=True).astype("float32")
            scores, rows = index.search(vec, req.topk)
            hits = []
            for r, s in zip(rows[0], scores[0], strict=True):
                d = docs[int(r)]
                doc = {"id": d["id"], "contents": f"{d['title']}\n{d['text']}"}
                hits.append({"document": doc, "score": float(s)} if req.return_scores else doc)
            out.append(hits)
        return {"result": out}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def build_index(index_dir: Path) -> None:
    if (index_dir / "manifest.json").is_file():
        return
    cmd = [sys.executable, "-c", "from effirag.cli.main import app; app()", "index", "build"]
    cmd += ["--corpus", str(DATA / "musique_mini" / "corpus.json"), "--out", str(index_dir), "--no-sparse"]
    subprocess.run(cmd, env=ENV, check=True)


def queries() -> list[str]:
    out = []
    for q in json.loads((DATA / "musique_mini" / "questions.json").read_text(encoding="utf-8")):
        out.append(q["question"])
        out += [sq["question"] for sq in q["question_decomposition"] if "#" not in sq["question"]]
    return out


def start(name: str, index_dir: Path, threads: int, device: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    if name == "effirag":
        cmd = [sys.executable, "-c", "from effirag.cli.main import app; app()", "serve", "retrieval"]
        cmd += ["--index", str(index_dir), "--port", str(port), "--threads", str(threads), "--device", device]
    else:
        cmd = [sys.executable, __file__, "--peer-serve", str(index_dir), str(port), str(threads), device]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} server did not start: {cmd}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.3)


def load_retrieve(url: str, qs: list[str], requests: int, concurrency: int) -> Any:
    """One round of one-query /retrieve calls; a 200 without 3 results is an error."""

    def check(status: int, content: bytes) -> str:
        wrong = status == 200 and len(json.loads(content)["result"][0]) != 3
        return "200 with a wrong answer" if wrong else str(status)

    def body(i: int) -> dict[str, Any]:
        return {"queries": [qs[i % len(qs)]], "topk": 3, "return_scores": True}

    return load(url, "/retrieve", body, requests, concurrency, check=check)


def grpo_batch(url: str, pid: int, qs: list[str], n: int) -> dict[str, Any]:
    """One Search-R1 /retrieve of ``n`` queries: status, seconds, answers holding 3 results, RSS before / after."""
    before = rss_kib(pid)["VmRSS"] / 1024
    body = {"queries": [qs[i % len(qs)] for i in range(n)], "topk": 3, "return_scores": True}
    t0 = time.perf_counter()
    r = httpx.post(url + "/retrieve", json=body, timeout=600)
    seconds = time.perf_counter() - t0
    full = sum(len(x) == 3 for x in r.json()["result"]) if r.status_code == 200 else 0
    after = rss_kib(pid)["VmRSS"] / 1024
    return {"status": r.status_code, "seconds": seconds, "answers_with_3": full, "rss_mib": [before, after]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians are reported")
    ap.add_argument("--index-dir", type=Path, default=Path("/tmp/effirag-bench-retrieval-index"))
    ap.add_argument("--threads", type=int, default=1, help="torch threads of effirag's server (0: torch's default)")
    ap.add_argument("--peer-threads", type=int, nargs="+", default=[0, 1], help="one peer per value (0: default)")
    ap.add_argument("--device", default="cpu", help="torch device of both servers' query encoders (cpu, cuda)")
    ap.add_argument("--grpo-batch", type=int, default=0, help="then one /retrieve of this many queries per server")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    build_index(args.index_dir)
    qs = queries()
    names = ["effirag", *(f"peer, torch threads {t or 'default'}" for t in args.peer_threads)]
    threads = [args.threads, *args.peer_threads]
    servers = {n: start(n, args.index_dir, t, args.device) for n, t in zip(names, threads, strict=True)}
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    rss: dict[str, dict[str, float]] = {}
    batches: dict[str, dict[str, Any]] = {}
    load_before = os.getloadavg()
    try:
        for n, (proc, url) in servers.items():
            httpx.post(url + "/retrieve", json={"queries": [qs[0]], "topk": 3}, timeout=60)
            rss[n] = {"before_mib": rss_kib(proc.pid)["VmRSS"] / 1024}
        for r in range(args.repeats):
            for n in names[r % len(names) :] + names[: r % len(names)]:
                runs[n].append(asyncio.run(load_retrieve(servers[n][1], qs, args.requests, args.concurrency)))
        if args.grpo_batch:
            proc, url = servers["effirag"]
            batches["effirag"] = grpo_batch(url, proc.pid, qs, args.grpo_batch)
        for n, (proc, _) in servers.items():
            mem = rss_kib(proc.pid)
            rss[n].update(after_mib=mem["VmRSS"] / 1024, peak_mib=mem["VmHWM"] / 1024)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # busy with a request the client gave up on
                proc.kill()
                proc.wait(timeout=30)
    rows = [summary("server", n, runs[n], rss[n]) for n in names]
    out = {"load_average_before": load_before, "load_average_after": os.getloadavg(), "args": vars(args), "rows": rows}
    out["grpo_batch"] = batches
    out["speedup"] = {r["server"]: rows[0]["ok_per_s"] / r["ok_per_s"] for r in rows[1:] if r["ok_per_s"]}
    if args.json:
        print(json.dumps(out, indent=1, default=str))
        return
    print(f"{args.requests} requests × {args.repeats} rounds, {args.concurrency} concurrent; load {load_before}")
    for row in rows:
        print(
            f"{row['server']:>28}: {row['statuses']} errors={row['errors']} p50={row['p50_ms']:.0f} ms "
            f"p99={row['p99_ms']:.0f} ms {row['ok_per_s']:.1f} ok/s (rounds {row['ok_per_s_runs']}) RSS "
            f"{row['rss_before_mib']:.0f} -> {row['rss_after_mib']:.0f} MiB (peak {row['rss_peak_mib']:.0f})"
        )
    for n, b in batches.items():
        print(
            f"{n:>28}: one /retrieve of {args.grpo_batch} queries: {b['status']} in {b['seconds']:.1f} s, "
            f"{b['answers_with_3']} answers of 3, RSS {b['rss_mib'][0]:.0f} -> {b['rss_mib'][1]:.0f} MiB"
        )
    print(f"throughput ratio effirag / peer: {out['speedup']}; load average after: {out['load_average_after']}")


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "--peer-serve":
        peer_serve(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), *sys.argv[5:])
    else:
        main()
