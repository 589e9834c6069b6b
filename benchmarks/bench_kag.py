"""Gold sub-queries on MuSiQue (chunk top-5 vs TeaRAG KAG top-5) and graph-mode R@2/R@5 vs dense, same run.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_kag.py [--data ../shared/data] [--cache /tmp/effirag-bench-kag]

Corpus: ``musique_mini/corpus.json`` (1,890 passages); KG: the real OpenIE file; questions: the 70 of
``musique_mini/questions.json``; encoder: all-MiniLM-L6-v2 (bundled). Embeddings are cached under ``--cache``.
- chunk top-5: dense top-5 passages for each gold sub-question.
- KAG top-5: dense top-20 → k_d = 5 (reranked with the bi-encoder: no cross-encoder ships here, so this equals the
  dense top-5) + two-stage triplets (entities 10 → 5, triplets 20 → k_t = 10) → KAG + PPR keeps k_f = 5; the
  relevance edges use the bi-encoder cosine through eq. 1/2.
Tokens: all-MiniLM-L6-v2's WordPiece tokenizer (TeaRAG counts with its policy's tokenizer, so absolute numbers differ).
Graph mode: :class:`HippoGraphRetriever` vs dense passage ranking, Recall@k = |gold ∩ top-k| / |gold| averaged.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from effirag.data import load_corpus, load_questions
from effirag.errors import IndexMismatchError
from effirag.eval.subqueries import evaluate_gold_subqueries
from effirag.retrieval.encoders import SentenceTransformerEncoder, default_model_path
from effirag.retrieval.graph import HippoGraphRetriever
from effirag.retrieval.kag import KAGConfig, KAGFilter
from effirag.retrieval.kg import KnowledgeGraph
from effirag.retrieval.triplets import TwoStageTripletRetriever
from effirag.types import ItemKind, Passage, RetrievedItem


class CachedSimilarity:
    """Bi-encoder cosine with the corpus' passage (title\\ntext) and triplet embeddings looked up, not re-encoded."""

    def __init__(self, encoder: SentenceTransformerEncoder, table: dict[str, np.ndarray]) -> None:
        self.encoder, self.table = encoder, table

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        q = self.encoder.encode_queries([query])[0]
        missing = [t for t in texts if t not in self.table]
        if missing:
            for t, v in zip(missing, self.encoder.encode_passages(missing), strict=True):
                self.table[t] = v
        return [float(self.table[t] @ q) for t in texts]


class WordPiece:
    def __init__(self) -> None:
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(default_model_path()))

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tok.decode(list(ids)))


def _item(p: Passage, score: float) -> RetrievedItem:
    return RetrievedItem(ItemKind.CHUNK, p.id, p.text, score, title=p.title)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/effirag-bench-kag"))
    ap.add_argument("--limit", type=int, default=0, help="Use only the first N questions (0: all).")
    args = ap.parse_args()
    mus = args.data / "musique_mini"
    corpus = load_corpus(mus / "corpus.json")
    qs = load_questions(mus / "questions.json", corpus)
    examples = qs.examples[: args.limit] if args.limit else qs.examples
    enc = SentenceTransformerEncoder().load()
    t0 = time.perf_counter()
    try:
        kg = KnowledgeGraph.load(args.cache / "kg")
    except IndexMismatchError:
        kg = KnowledgeGraph.from_openie(mus / "openie_gpt-3.5-turbo-1106.json", corpus, enc)
        kg.save(args.cache / "kg")
    pfile = args.cache / "passages.npy"
    if pfile.is_file():
        pemb = np.load(pfile)
    else:
        pemb = enc.encode_passages([p.key for p in kg.passages])
        np.save(pfile, pemb)
    build_s = time.perf_counter() - t0
    assert kg.triplet_embeddings is not None
    table = {p.key: pemb[i] for i, p in enumerate(kg.passages)}
    table.update({t.text: kg.triplet_embeddings[i] for i, t in enumerate(kg.triplets)})
    sim = CachedSimilarity(enc, table)
    cfg = KAGConfig()
    kag = KAGFilter(cfg)
    triplets = TwoStageTripletRetriever(kg, enc)

    def dense(q: str, k: int) -> list[RetrievedItem]:
        s = pemb @ enc.encode_queries([q])[0]
        order = np.lexsort((np.arange(s.size), -s))[:k]
        return [_item(kg.passages[i], float(s[i])) for i in order]

    def chunk_fn(q: str, ents: list[str]) -> list[RetrievedItem]:
        return dense(q, 5)

    timing = {"kag_total": 0.0, "kag_filter": 0.0, "n": 0}

    def kag_fn(q: str, ents: list[str]) -> list[RetrievedItem]:
        t = time.perf_counter()
        cands = dense(q, cfg.semantic_top)
        scores = sim.score(q, [f"{c.title}\n{c.text}" for c in cands])
        chunks = [cands[i] for i in sorted(range(len(cands)), key=lambda i: (-scores[i], i))[: cfg.k_d]]
        trips = triplets.retrieve_with_triplets(ents, q, cfg.k_t, cfg.k_e, cfg.n_entities, cfg.n_triplets)
        res = kag.filter(q, ents, chunks, trips, sim)
        timing["kag_total"] += time.perf_counter() - t
        timing["kag_filter"] += res.timings["kag_build"] + res.timings["ppr"]
        timing["n"] += 1
        return res.items

    tok = WordPiece()
    out: dict[str, object] = {"questions": len(examples), "index_build_or_load_s": build_s}
    out["chunk_top5"] = evaluate_gold_subqueries(examples, chunk_fn, kg, k=5, tokenizer=tok)
    out["kag_top5"] = evaluate_gold_subqueries(examples, kag_fn, kg, k=5, tokenizer=tok)
    out["kag_ms_per_subquery"] = {
        "total": 1e3 * timing["kag_total"] / max(1, timing["n"]),
        "kag_build_plus_ppr": 1e3 * timing["kag_filter"] / max(1, timing["n"]),
    }
    c5, k5 = out["chunk_top5"], out["kag_top5"]
    out["kag_vs_chunk_tokens_ratio"] = k5["tokens_per_retrieval"] / c5["tokens_per_retrieval"]  # type: ignore[index]

    graph = HippoGraphRetriever(kg, enc, passage_embeddings=pemb).load()
    rec: dict[str, dict[str, list[float]]] = {"dense": {"2": [], "5": []}, "graph": {"2": [], "5": []}}
    for ex in examples:
        gold = set(ex.supporting_ids)
        ranked = {
            "dense": [it.id for it in dense(ex.question, 5)],
            "graph": [it.id for it in graph.retrieve(ex.question, 5)],
        }
        for name, ids in ranked.items():
            for k in (2, 5):
                rec[name][str(k)].append(len(gold & set(ids[:k])) / len(gold))
    out["recall"] = {n: {k: 100.0 * float(np.mean(v)) for k, v in d.items()} for n, d in rec.items()}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
