"""``effirag index build`` and ``effirag search``: build a persisted retrieval index, query it."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from effirag.cli.common import (
    RERANK_DEPTH_HELP,
    RERANKER_HELP,
    console,
    emit_json,
    flag,
    friendly_errors,
    setup_logging,
)

app = typer.Typer(help="Build retrieval indexes (BM25, dense FAISS, knowledge graph).", no_args_is_help=True)


def encoder_config(
    encoder: str,
    prefixes: str,
    query_prefix: str | None,
    passage_prefix: str | None,
    device: str,
    threads: int = 0,
    backend: str | None = None,
) -> Any:
    """The encoder's config from CLI options; ``backend`` None keeps EncoderConfig's default engine."""
    import dataclasses

    from effirag.retrieval.encoders import EncoderConfig

    cfg = EncoderConfig(
        model=encoder,
        prefixes=prefixes,
        query_prefix=query_prefix,
        passage_prefix=passage_prefix,
        device=device,
        torch_threads=threads,
    )
    return cfg if backend is None else dataclasses.replace(cfg, backend=backend)


BACKEND_HELP = "Encoding engine: torch, onnx, onnx-int8, openvino, openvino-int8 (default: EncoderConfig's)."


THREADS_HELP = "Torch and FAISS CPU threads (0: the libraries' defaults; 1 is fastest on a shared CPU)."


def apply_threads(threads: int) -> None:
    """FAISS's OpenMP threads (torch's are set by the encoder config when it loads)."""
    if threads > 0:
        import faiss

        faiss.omp_set_num_threads(threads)


def load_triplets(corpus: Any, openie: Path | None, triplets: Path | None) -> list[Any] | None:
    """Triplets from HippoRAG OpenIE json or EffiRAG-World triplets.jsonl, linked to ``corpus`` passages."""
    if openie is not None and triplets is not None:
        raise typer.BadParameter("give --openie or --triplets, not both")
    if openie is not None:
        from effirag.data import load_openie

        return list(load_openie(openie, corpus).triplets)
    if triplets is not None:
        from effirag.retrieval.kg import KnowledgeGraph

        return list(KnowledgeGraph.from_triplets_jsonl(triplets, corpus.passages).triplets)
    return None


OPENIE_LLM_HELP = (
    "Extract triples with an LLM (backend spec: hf:DIR, openai:URL#MODEL, openai-chat:URL#MODEL, scripted:FILE) "
    "and build the knowledge graph from them; resumable (see --openie-out)."
)


def llm_triplets(corpus: Any, backend: str, out: Path, prompt: str, batch: int) -> list[Any]:
    """Run resumable LLM OpenIE over ``corpus`` into ``out`` (HippoRAG layout) and return its triplets."""
    from effirag.data import load_openie
    from effirag.llm.factory import make_generator
    from effirag.retrieval.openie_run import OpenIERunConfig, progress_path, run_openie

    config = OpenIERunConfig(prompt=prompt, batch_size=batch)
    s = run_openie(corpus.passages, make_generator(backend), out, config, show_progress=True)
    console.print(
        f"OpenIE: {s.extracted} passages extracted, {s.resumed} resumed from {progress_path(out)}; "
        f"{s.triplets} triples; {s.failed} passages with a reply that did not parse; written to {out}"
    )
    return list(load_openie(out, corpus).triplets)


def default_index_dir(corpus: Path, encoder: str) -> Path:
    """Per-corpus cache folder: ``$XDG_CACHE_HOME/effirag/indexes/<corpus name>-<hash of path and encoder>``."""
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "effirag" / "indexes"
    tag = hashlib.sha1(f"{corpus.resolve()}|{encoder}".encode()).hexdigest()[:10]
    return base / f"{corpus.parent.name}-{corpus.stem}-{tag}"


@app.command("build")
@friendly_errors
def build(
    corpus: Path = typer.Option(..., "--corpus", "-c", help="Corpus file ([{title,text}], {title:[sents]}, JSONL)."),
    out: Path = typer.Option(..., "--out", "-o", help="Index folder to write (cached embeddings there are reused)."),
    openie: Path | None = typer.Option(None, "--openie", help="HippoRAG OpenIE json: builds the knowledge graph."),
    triplets: Path | None = typer.Option(None, "--triplets", help="triplets.jsonl {head,relation,tail,source}."),
    openie_llm: str | None = typer.Option(None, "--openie-llm", help=OPENIE_LLM_HELP),
    openie_out: Path | None = typer.Option(
        None,
        "--openie-out",
        help="OpenIE json to write with --openie-llm (default OUT/openie_llm.json); a rerun "
        "resumes from its FILE.progress.jsonl.",
    ),
    openie_prompt: str = typer.Option("instruct", help="--openie-llm prompts: instruct, or fewshot for base models."),
    openie_batch: int = typer.Option(8, help="--openie-llm passages per batch (the unit a rerun resumes from)."),
    encoder: str = typer.Option("all-MiniLM-L6-v2", "--encoder", help="Bundled MiniLM, a model folder or hub id."),
    prefixes: str = typer.Option("none", help="Prefix preset: none, e5, bge."),
    query_prefix: str | None = typer.Option(None, help="Query prefix (overrides the preset)."),
    passage_prefix: str | None = typer.Option(None, help="Passage prefix (overrides the preset)."),
    no_dense: bool = flag("--no-dense", help="Skip the dense index (no encoder needed)."),
    no_sparse: bool = flag("--no-sparse", help="Skip the BM25 index."),
    faiss: str = typer.Option("flat", "--faiss", help="FAISS index: flat (exact) or hnsw."),
    stemmer: str = typer.Option("", help="BM25 stemming language via PyStemmer (e.g. english); '' = none."),
    device: str = typer.Option("cpu", help="Torch device for encoding."),
    backend: str | None = typer.Option(None, "--backend", help=BACKEND_HELP),
    threads: int = typer.Option(0, "--threads", help=THREADS_HELP),
    rebuild: bool = flag(
        "--rebuild", help="Replace an index in --out built from another corpus or failing its checks."
    ),
    verbose: bool = flag("--verbose", "-v", help="Log progress details."),
) -> None:
    """Build BM25 + dense (+ knowledge graph with --openie/--triplets/--openie-llm) into one folder with a manifest.

    Progress bars on stderr follow each stage: BM25 tokenising and scoring, passage encoding, graph linking, entity
    and triplet encoding."""
    from effirag.data import load_corpus
    from effirag.retrieval.dense import DenseConfig
    from effirag.retrieval.encoders import SentenceTransformerEncoder
    from effirag.retrieval.index import IndexConfig, build_index, refuse_overwrite
    from effirag.retrieval.sparse import BM25Config

    setup_logging(verbose)
    apply_threads(threads)
    c = load_corpus(corpus)
    trips: list[Any] | None
    if openie_llm is not None:
        if openie is not None or triplets is not None:
            raise typer.BadParameter("give one of --openie, --triplets, --openie-llm")
        if not rebuild:
            refuse_overwrite(out, c.passages)  # before hours of extraction, not after
        trips = llm_triplets(c, openie_llm, openie_out or out / "openie_llm.json", openie_prompt, openie_batch)
    else:
        trips = load_triplets(c, openie, triplets)
    enc = None
    if not no_dense or trips is not None:
        enc = SentenceTransformerEncoder(
            encoder_config(encoder, prefixes, query_prefix, passage_prefix, device, threads, backend)
        )
    config = IndexConfig(
        sparse=not no_sparse, dense=not no_dense, bm25=BM25Config(stemmer=stemmer), faiss=DenseConfig(index_type=faiss)
    )
    m = build_index(
        c.passages,
        out,
        config=config,
        encoder=enc,
        triplets=trips,
        corpus_path=str(corpus),
        show_progress=True,
        replace=rebuild,
    )
    parts = [n for n, v in (("bm25", m.sparse), ("dense", m.dense), ("kg", m.kg)) if v is not None]
    console.print(f"index of {m.n_passages} passages ({', '.join(parts)}) written to {out}")


def search(
    query: str = typer.Argument(..., help="The query."),
    index: Path = typer.Option(..., "--index", "-i", help="Index folder from `effirag index build`."),
    mode: str = typer.Option("passage", "--mode", "-m", help="passage, sparse, graph, hybrid, kag, chunks_triplets."),
    k: int = typer.Option(5, "--k", "-k", help="Items to return."),
    offset: int = typer.Option(0, "--offset", help="Skip this many items of the ranking (deep paging)."),
    entities: str = typer.Option("", "--entities", "-e", help="Key entities, separated by ';' (kag mode)."),
    reranker: str = typer.Option("none", "--reranker", help=RERANKER_HELP),
    rerank_depth: int = typer.Option(20, "--rerank-depth", help=RERANK_DEPTH_HELP),
    device: str = typer.Option("cpu", help="Torch device for query encoding."),
    threads: int = typer.Option(0, "--threads", help=THREADS_HELP),
    as_json: bool = flag("--json", help="Print items and timings as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """Query an index: ranked items with scores, token counts (whitespace) and per-stage timings."""
    from effirag.retrieval.facade import RetrieverConfig, load_retriever

    setup_logging(verbose)
    apply_threads(threads)
    config = RetrieverConfig(rerank_depth=rerank_depth)
    retriever = load_retriever(index, device=device, torch_threads=threads, config=config, reranker=reranker)
    ents = [e.strip() for e in entities.split(";") if e.strip()]
    res = retriever.retrieve(query, mode=mode, k=k, entities=ents or None, offset=offset)
    if as_json:
        emit_json(
            {
                "query": query,
                "mode": mode,
                "items": [it.to_dict() for it in res.items],
                "timings": res.timings,
                "offset": offset,
            }
        )
        return
    t = Table(title=f"{mode}: {query}")
    for col in ("#", "kind", "score", "tokens", "title", "text"):
        t.add_column(col)
    for i, it in enumerate(res.items, start=offset + 1):
        text = it.text if len(it.text) <= 160 else it.text[:157] + "..."
        t.add_row(str(i), it.kind.value, f"{it.score:.4f}", str(it.tokens), it.title, text)
    console.print(t)
    if not res.items:
        console.print("[yellow]no item matched the query[/]")
    console.print("timings (ms): " + ", ".join(f"{n} {1000 * s:.1f}" for n, s in res.timings.items()))


search = friendly_errors(search)
