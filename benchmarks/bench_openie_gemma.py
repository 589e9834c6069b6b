"""LLM OpenIE with Gemma 3 270M (base model, few-shot prompts) against the shipped GPT-3.5 extraction of MuSiQue.

Runs :func:`effirag.retrieval.openie_run.run_openie` (what ``effirag index build --openie-llm`` runs) over the first
``--n`` passages of ``musique_mini/corpus.json`` into ``--out`` (resumable: a rerun only extracts what is missing),
then compares with ``openie_gpt-3.5-turbo-1106.json`` on the same passages. Both files are read by
:func:`effirag.data.load_openie` (malformed and duplicate triples dropped). Backends (``--backend``):
- ``llamacpp`` (default): llama-cpp-python's server on the Q4_K_M GGUF, one thread, through EffiRAG's OpenAI backend
  with server-side stop strings (the server reuses the KV cache of the few-shot prefix the prompts share);
- ``hf``: the HF float32 folder, ``--threads`` torch threads, ``--batch`` passages per batched generate call.

Metrics, per system, over the passages:
- triples / passage, entities / passage (NER entities), reply statuses (ok / empty / truncated at the token limit,
  complete items kept / missing / malformed) and passages with a reply that did not parse;
- grounded triples: share of triples whose head and tail both occur in the passage (title + text), after
  normalisation (NFKC, lower case, punctuation → space, whitespace collapsed);
- entity overlap of Gemma's NER entities with GPT-3.5's: per passage the two sets of normalised entities; micro
  precision = Σ|G∩R| / Σ|G|, recall = Σ|G∩R| / Σ|R|, F1 their harmonic mean (G Gemma's, R GPT-3.5's);
- pair overlap: the same micro precision / recall over unordered normalised (head, tail) pairs of the triples.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_openie_gemma.py [--backend llamacpp|hf] [--n 50] [--batch 10]
        [--out /tmp/openie-gemma.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("EFFIRAG_SHARED_DATA", REPO.parent / "shared" / "data")) / "musique_mini"

from effirag.data import load_corpus, load_openie  # noqa: E402
from effirag.data.corpus import Corpus  # noqa: E402
from effirag.retrieval.openie_run import OpenIERunConfig, progress_path, run_openie  # noqa: E402
from effirag.types import Passage  # noqa: E402


def norm(s: str) -> str:
    s = re.sub(r"[^\w\s]", " ", unicodedata.normalize("NFKC", s).lower())
    return " ".join(s.split())


def _prf(hit: int, got: int, ref: int) -> dict[str, float]:
    p, r = hit / max(1, got), hit / max(1, ref)
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def system_stats(path: Path, corpus: Corpus, passages: list[Passage]) -> dict[str, Any]:
    res = load_openie(path, corpus, skip_invalid=True)
    ids = {p.id for p in passages}
    trips = [t for t in res.triplets if t.source_id in ids]
    text = {p.id: norm(p.key) for p in passages}
    grounded = sum(norm(t.head) in text[t.source_id] and norm(t.tail) in text[t.source_id] for t in trips)
    return {
        "triples_per_passage": len(trips) / len(passages),
        "entities_per_passage": sum(len(res.entities.get(i, [])) for i in ids) / len(passages),
        "grounded_triples": grounded / max(1, len(trips)),
        "entities": {i: {norm(e) for e in res.entities.get(i, [])} - {""} for i in ids},
        "pairs": {i: {frozenset((norm(t.head), norm(t.tail))) for t in trips if t.source_id == i} for i in ids},
    }


def overlap(got: dict[str, set[Any]], ref: dict[str, set[Any]]) -> dict[str, float]:
    hit = sum(len(got[i] & ref[i]) for i in ref)
    return _prf(hit, sum(len(got[i]) for i in ref), sum(len(ref[i]) for i in ref))


@contextmanager
def generator(args: argparse.Namespace) -> Iterator[Any]:
    """Gemma through the chosen backend, for the duration of the block."""
    from effirag.llm.models import prepare

    prepared = prepare("gemma-3-270m")
    if args.backend == "hf":
        import torch

        from effirag.llm.hf import HFGenerator

        torch.set_num_threads(args.threads)
        yield HFGenerator(prepared.hf_dir, device="cpu", max_batch_size=args.batch).load()
        return
    from effirag.llm.models.llamacpp import llama_server
    from effirag.llm.openai_http import OpenAIGenerator

    with llama_server(prepared.gguf, threads=args.threads, log=Path("/tmp/bench-openie-llama.log")) as server:
        # server-side stops: the reply ends at its newline (which stop matched does not matter here)
        yield OpenAIGenerator(
            server.url, server.model, tokenizer_path=prepared.hf_dir, extra_body={"repeat_penalty": 1.0}
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=50, help="the first N passages of the corpus")
    ap.add_argument("--batch", type=int, default=5, help="passages per generate call (the unit a rerun resumes)")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="per reply (a looping reply is cut here)")
    ap.add_argument("--threads", type=int, default=1, help="torch / llama.cpp CPU threads")
    ap.add_argument("--backend", choices=("llamacpp", "hf"), default="llamacpp")
    ap.add_argument("--out", type=Path, default=Path("/tmp/openie-gemma.json"))
    args = ap.parse_args()
    corpus = load_corpus(DATA / "corpus.json")
    passages = corpus.passages[: args.n]
    cfg = OpenIERunConfig(prompt="fewshot", batch_size=args.batch, max_new_tokens=args.max_new_tokens)
    with generator(args) as gen:
        t0 = time.perf_counter()
        summary = run_openie(passages, gen, args.out, cfg, show_progress=True)
        spent = time.perf_counter() - t0
    gemma = system_stats(args.out, corpus, passages)
    ship = system_stats(DATA / "openie_gpt-3.5-turbo-1106.json", corpus, passages)
    recs = [json.loads(line) for line in progress_path(args.out).read_text(encoding="utf-8").splitlines()]
    statuses = {c: Counter(r[f"{c}_status"] for r in recs) for c in ("ner", "triple")}
    row = {
        "passages": len(passages),
        "extracted_now": summary.extracted,
        "failed_to_parse": summary.failed,
        "statuses": statuses,
        "s_per_passage": spent / max(1, summary.extracted),
        "entity_overlap": overlap(gemma["entities"], ship["entities"]),
        "pair_overlap": overlap(gemma["pairs"], ship["pairs"]),
    } | {
        name: {k: v for k, v in s.items() if k not in ("entities", "pairs")}
        for name, s in (("gemma_3_270m", gemma), ("gpt_3_5_shipped", ship))
    }
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
