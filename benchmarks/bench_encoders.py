"""Passage encoding on CPU: passages/s and MuSiQue Recall@5 of each encoder engine, side by side in one run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_encoders.py [--repeats 3] [--options torch onnx ...]

Every option encodes the 1,890 passages of ``musique_mini`` (title + text, as the index does) ``--repeats`` times;
passages/s is the median. Recall@5 is dense retrieval of the 70 questions over the last run's vectors by exact inner
product (what the flat FAISS index does), scored with :func:`effirag.eval.recall_at_k` as ``effirag eval retrieval``
does. ``unsorted`` encodes 64-passage batches in corpus order (no length sorting across batches) to show what sorting
buys; every other ONNX/OpenVINO option sorts the whole input longest first (sentence-transformers does the same).
Threads ``t1`` pin the engine to one thread; ``t0`` leaves the library's default (here: both cores).

``--queries`` measures instead what ``effirag serve retrieval`` encodes: micro-batches of 64 queries (random draws of
the 145 MuSiQue questions and first-hop sub-questions, 10 batches, one thread), each padded to its longest query
(``max_padding=inf``) against the length-bucketed passes of the default ``max_padding``; ms per query, median.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from pathlib import Path

import numpy as np

from effirag.data import load_corpus, load_questions
from effirag.eval.retrieval import recall_at_k
from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
from effirag.retrieval.index import passage_text

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "musique_mini"
# option → (backend, threads, sorted across batches)
OPTIONS = {
    "torch-t0": ("torch", 0, True),
    "torch-t1": ("torch", 1, True),
    "onnx-t0": ("onnx", 0, True),
    "onnx-t1": ("onnx", 1, True),
    "onnx-t1-unsorted": ("onnx", 1, False),
    "onnx-int8-t1": ("onnx-int8", 1, True),
    "openvino-t0": ("openvino", 0, True),
    "openvino-t1": ("openvino", 1, True),
    "openvino-int8-t1": ("openvino-int8", 1, True),
}


def encode(enc: SentenceTransformerEncoder, texts: list[str], sort: bool) -> np.ndarray:
    if sort:
        return enc.encode_passages(texts)
    bs = enc.config.batch_size
    return np.concatenate([enc.encode_passages(texts[i : i + bs]) for i in range(0, len(texts), bs)])


def server_queries() -> list[str]:
    out = []
    for q in json.loads((DATA / "questions.json").read_text(encoding="utf-8")):
        out.append(q["question"])
        out += [sq["question"] for sq in q["question_decomposition"] if "#" not in sq["question"]]
    return out


def query_batches(repeats: int) -> None:
    qs = server_queries()
    rng = random.Random(0)
    batches = [rng.sample(qs, 64) for _ in range(10)]
    print(f"{len(qs)} queries in {len(batches)} batches of 64, load average at start {os.getloadavg()}")
    print("| engine | passes | ms/query (median) | runs |")
    print("|---|---|---|---|")
    for backend in ("onnx", "onnx-int8"):
        for padding in (math.inf, EncoderConfig().max_padding):
            enc = SentenceTransformerEncoder(EncoderConfig(backend=backend, torch_threads=1, max_padding=padding))
            enc.load().encode_queries(batches[0])  # warm-up
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for b in batches:
                    enc.encode_queries(b)
                runs.append(1000 * (time.perf_counter() - t0) / (64 * len(batches)))
            passes = "one per batch, padded to its longest" if padding == math.inf else f"max_padding {padding}"
            text = ", ".join(f"{r:.2f}" for r in runs)
            print(f"| {backend}-t1 | {passes} | {statistics.median(runs):.2f} | {text} |", flush=True)
    print(f"load average at end {os.getloadavg()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--options", nargs="+", default=list(OPTIONS), choices=list(OPTIONS))
    ap.add_argument("--queries", action="store_true", help="the server's 64-query micro-batches instead")
    args = ap.parse_args()
    if args.queries:
        query_batches(args.repeats)
        return
    corpus = load_corpus(DATA / "corpus.json")
    qs = load_questions(DATA / "questions.json", corpus).examples
    texts = [passage_text(p) for p in corpus.passages]
    ids = [p.id for p in corpus.passages]
    print(f"{len(texts)} passages, {len(qs)} questions, load average at start {os.getloadavg()}")
    ref: np.ndarray | None = None
    print("| option | passages/s (median) | runs | Recall@5 | max abs diff vs torch |")
    print("|---|---|---|---|---|")
    for name in args.options:
        backend, threads, sort = OPTIONS[name]
        if backend == "torch":
            import torch

            torch.set_num_threads(threads or os.cpu_count() or 1)  # process-wide: reset between torch options
        enc = SentenceTransformerEncoder(EncoderConfig(backend=backend, torch_threads=threads)).load()
        encode(enc, texts[:64], sort)  # warm-up (first-call allocations, lazy kernels)
        rates, vecs = [], np.zeros(0)
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            vecs = encode(enc, texts, sort)
            rates.append(len(texts) / (time.perf_counter() - t0))
        q = enc.encode_queries([e.question for e in qs])
        top = np.argsort(-(q @ vecs.T), axis=1, kind="stable")[:, :5]  # (n_q, 5)
        rec = [recall_at_k([ids[j] for j in row], e.supporting_ids, 5) for row, e in zip(top, qs, strict=True)]
        ref = vecs if ref is None and backend == "torch" else ref
        diff = f"{np.abs(vecs - ref).max():.1e}" if ref is not None else "-"
        runs = ", ".join(f"{r:.0f}" for r in rates)
        print(f"| {name} | {statistics.median(rates):.0f} | {runs} | {100 * np.mean(rec):.1f} | {diff} |", flush=True)
    print(f"load average at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
