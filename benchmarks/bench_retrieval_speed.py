"""Retrieval speed and memory on 100k passages: our wrappers vs the libraries called directly, same run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_retrieval_speed.py bm25    [--n 100000] [--runs 3]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_retrieval_speed.py dense   [--n 100000] [--runs 3]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_retrieval_speed.py encode  [--n-encode 256] [--runs 3]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_retrieval_speed.py memory  [--n 100000]

Corpus: the 6,119-passage 2WikiMultiHopQA corpus repeated to n passages; copy j > 0 of a passage has " (j)" added to
its title and its words rotated by j, so BM25 sees n distinct documents. Queries: the first 300 PopQA questions.
Dense: all-MiniLM-L6-v2 embeddings of 512 real passages, tiled to n rows with Gaussian noise (σ = 0.05) and
re-normalised — encoding 100k passages does not fit on the shared 2-core CPU; exact-search cost does not depend on the
values. Torch and FAISS run with 1 thread by default (--threads; on a CPU shared with other jobs 2 threads are several
times slower per query, see BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from effirag.data import load_corpus, load_questions
from effirag.types import Passage

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def corpus(n: int) -> list[Passage]:
    base = load_corpus(DATA / "2wiki_corpus" / "corpus.json").passages
    out: list[Passage] = []
    j = 0
    while len(out) < n:
        for p in base:
            if len(out) >= n:
                break
            words = p.text.split()
            r = j % max(len(words), 1)
            text = " ".join(words[r:] + words[:r]) if j else p.text
            out.append(Passage(f"{p.id}-{j}", f"{p.title} ({j})" if j else p.title, text))
        j += 1
    return out


def queries(n: int = 300) -> list[str]:
    return [ex.question for ex in load_questions(DATA / "popqa" / "questions.json").examples[:n]]


def median_rate(fn: Callable[[], int], runs: int) -> tuple[float, list[float]]:
    """Median items/s of ``fn`` (which returns how many items it processed) over ``runs`` runs."""
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        n = fn()
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates), rates


def report(name: str, rate: tuple[float, list[float]], unit: str) -> None:
    med, all_ = rate
    print(f"{name:<58} {med:>10.1f} {unit}  (runs: {', '.join(f'{r:.1f}' for r in all_)})", flush=True)


def bench_bm25(n: int, runs: int) -> None:
    import bm25s

    from effirag.retrieval.facade import load_retriever
    from effirag.retrieval.index import IndexConfig, build_index, passage_text
    from effirag.retrieval.sparse import BM25Index

    ps = corpus(n)
    texts = [passage_text(p) for p in ps]
    qs = queries()
    t0 = time.perf_counter()
    ours = BM25Index().build(texts)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    raw = bm25s.BM25()
    raw.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    t_raw = time.perf_counter() - t0
    print(f"BM25 build over {n} passages: ours {t_ours:.1f} s, raw bm25s {t_raw:.1f} s (one run each)")
    with tempfile.TemporaryDirectory() as d:
        build_index(ps, d, config=IndexConfig(dense=False))
        facade = load_retriever(d)

        def raw_loop() -> int:
            for q in qs:
                raw.retrieve(bm25s.tokenize([q], stopwords="en", show_progress=False), k=10, show_progress=False)
            return len(qs)

        def raw_batch() -> int:
            raw.retrieve(bm25s.tokenize(qs, stopwords="en", show_progress=False), k=10, show_progress=False)
            return len(qs)

        def ours_loop() -> int:
            for q in qs:
                ours.search(q, 10)
            return len(qs)

        def facade_loop() -> int:
            for q in qs:
                facade.retrieve(q, "sparse", 10)
            return len(qs)

        report("raw bm25s.retrieve, one query per call, k=10", median_rate(raw_loop, runs), "q/s")
        report("raw bm25s.retrieve, all 300 queries in one call, k=10", median_rate(raw_batch, runs), "q/s")
        report("ours BM25Index.search, one query per call, k=10", median_rate(ours_loop, runs), "q/s")
        report("ours EffiRetriever.retrieve(sparse) + items + tokens, k=10", median_rate(facade_loop, runs), "q/s")


class LookupEncoder:
    """Serves precomputed embeddings by text (isolates our wrapper's cost from the model's)."""

    def __init__(self, table: dict[str, np.ndarray], dim: int) -> None:
        self.table, self._dim = table, dim
        self.query_prefix = self.passage_prefix = ""

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return "all-MiniLM-L6-v2-lookup"

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])

    encode_passages = encode_queries


def bench_dense(n: int, runs: int, threads: int) -> None:
    import faiss

    from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
    from effirag.retrieval.facade import load_retriever
    from effirag.retrieval.index import IndexConfig, build_index, passage_text

    faiss.omp_set_num_threads(threads)  # applies to raw FAISS and to ours alike (same process)
    ps = corpus(n)
    texts = [passage_text(p) for p in ps]
    qs = queries()
    enc = SentenceTransformerEncoder(EncoderConfig(torch_threads=1)).load()
    base = enc.encode_passages(texts[:512])  # (512, 384)
    rng = np.random.default_rng(0)
    emb = base[np.arange(n) % 512] + rng.normal(0, 0.05, (n, base.shape[1])).astype(np.float32)  # (n, 384)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    qv = enc.encode_queries(qs)  # (300, 384)
    table = {t: emb[i] for i, t in enumerate(texts)} | {q: qv[i] for i, q in enumerate(qs)}
    raw = faiss.IndexFlatIP(emb.shape[1])
    raw.add(emb)
    with tempfile.TemporaryDirectory() as d:
        build_index(ps, d, config=IndexConfig(sparse=False), encoder=LookupEncoder(table, emb.shape[1]))
        facade = load_retriever(d, encoder=LookupEncoder(table, emb.shape[1]))
        real = load_retriever(d, encoder=LookupEncoder(table, emb.shape[1]))
        real.encoder = enc  # same index, queries encoded by MiniLM for the end-to-end figure

        def raw_loop() -> int:
            for i in range(len(qs)):
                raw.search(qv[i : i + 1], 10)
            return len(qs)

        def raw_batch() -> int:
            raw.search(qv, 10)
            return len(qs)

        def ours_loop() -> int:
            for i in range(len(qs)):
                facade.index.dense.search(qv[i : i + 1], 10)  # type: ignore[union-attr]
            return len(qs)

        def facade_loop() -> int:
            for q in qs:
                facade.retrieve(q, "passage", 10)
            return len(qs)

        def e2e_loop() -> int:
            for q in qs[:50]:
                real.retrieve(q, "passage", 10)
            return 50

        report(f"raw faiss IndexFlatIP.search ({n} x 384), one query/call", median_rate(raw_loop, runs), "q/s")
        report("raw faiss IndexFlatIP.search, 300 queries in one call", median_rate(raw_batch, runs), "q/s")
        report("ours DenseIndex.search, one query per call", median_rate(ours_loop, runs), "q/s")
        report("ours EffiRetriever.retrieve(passage), precomputed query vecs", median_rate(facade_loop, runs), "q/s")
        report("ours EffiRetriever.retrieve(passage) with MiniLM encoding", median_rate(e2e_loop, runs), "q/s")


def bench_encode(n_encode: int, runs: int) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    from effirag.retrieval.dense import encode_to_memmap
    from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder, default_model_path
    from effirag.retrieval.index import passage_text

    texts = [passage_text(p) for p in corpus(n_encode)]
    torch.set_num_threads(1)
    raw = SentenceTransformer(str(default_model_path()), device="cpu")
    ours = SentenceTransformerEncoder(EncoderConfig(torch_threads=1, batch_size=64)).load()
    raw.encode(texts[:64], batch_size=64)  # warm-up
    tmp = Path(tempfile.mkdtemp())
    counter = iter(range(10**6))

    def raw_run() -> int:
        raw.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return len(texts)

    def ours_run() -> int:
        ours.encode_passages(texts)
        return len(texts)

    def ours_stream() -> int:
        encode_to_memmap(ours, texts, tmp / str(next(counter)), chunk_rows=128)
        return len(texts)

    report(f"raw SentenceTransformer.encode, {n_encode} passages, batch 64", median_rate(raw_run, runs), "psg/s")
    report("ours SentenceTransformerEncoder.encode_passages", median_rate(ours_run, runs), "psg/s")
    report("ours encode_to_memmap (streamed to npy, chunks of 128)", median_rate(ours_stream, runs), "psg/s")


def memory_child(n: int, how: str) -> None:
    """Peak RSS of one build in a fresh process (printed as MiB above the RSS after loading the corpus)."""
    import faiss

    from effirag.retrieval.encoders import HashingEncoder
    from effirag.retrieval.index import IndexConfig, build_index, passage_text

    ps = corpus(n)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    enc = HashingEncoder(384)
    t0 = time.perf_counter()
    if how == "ours":
        with tempfile.TemporaryDirectory() as d:
            build_index(ps, d, config=IndexConfig(sparse=False), encoder=enc)
    else:  # naive: every embedding in RAM, then one FAISS add
        emb = enc.encode_passages([passage_text(p) for p in ps])
        index = faiss.IndexFlatIP(384)
        index.add(emb)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{n} {how} peak_mib={peak:.0f} corpus_loaded_mib={before:.0f} secs={time.perf_counter() - t0:.0f}")


def bench_memory(n: int) -> None:
    print(f"FAISS IndexFlatIP payload at n={n}: {n * 384 * 4 / 2**20:.0f} MiB (n x 384 x 4 bytes)")
    for size in (n // 4, n // 2, n):
        for how in ("ours", "naive"):
            out = subprocess.run(
                [sys.executable, __file__, "memory-child", "--n", str(size), "--how", how],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            print(out.strip(), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["bm25", "dense", "encode", "memory", "memory-child"])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--n-encode", type=int, default=256)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--how", default="ours")
    ap.add_argument("--threads", type=int, default=1, help="FAISS OpenMP threads (dense)")
    a = ap.parse_args()
    if a.what == "bm25":
        bench_bm25(a.n, a.runs)
    elif a.what == "dense":
        bench_dense(a.n, a.runs, a.threads)
    elif a.what == "encode":
        bench_encode(a.n_encode, a.runs)
    elif a.what == "memory":
        bench_memory(a.n)
    else:
        memory_child(a.n, a.how)


if __name__ == "__main__":
    main()
