"""``effirag eval …``: evaluation commands (``eval retrieval`` here; other groups add theirs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from effirag.cli import agent as _agent_cli
from effirag.cli.common import (
    RERANK_DEPTH_HELP,
    RERANKER_HELP,
    console,
    emit_json,
    err_console,
    fail,
    flag,
    friendly_errors,
    setup_logging,
)

app = typer.Typer(help="Evaluate retrieval and question answering.", no_args_is_help=True)

RETRIEVERS = {
    "bm25": "sparse",
    "dense": "passage",
    "graph": "graph",
    "hybrid": "hybrid",
    "chunk": "passage",
    "kag": "kag",
}


def parse_ks(first: list[int], extra: list[str]) -> list[int]:
    """``--k 2 5`` arrives as ``[2]`` plus the extra argument ``"5"``; ``--k 2 --k 5`` and ``--k 2,5`` work too."""
    ks: list[int] = list(first)
    for raw in extra:
        for part in raw.split(","):
            try:
                ks.append(int(part))
            except ValueError:
                fail(f"unexpected argument {raw!r} (k values must be integers)")
    if not ks or any(k <= 0 for k in ks):
        fail(f"--k: need positive integers, got {ks}")
    return sorted(set(ks))


@app.command("retrieval", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@friendly_errors
def retrieval(
    ctx: typer.Context,
    questions: Path = typer.Option(..., "--questions", "-q", help="Question file (layout auto-detected)."),
    corpus: Path = typer.Option(..., "--corpus", "-c", help="Corpus the gold passages are matched against."),
    retriever: str = typer.Option("dense", "--retriever", "-r", help="bm25, dense, graph, hybrid (chunk, kag)."),
    k: list[int] = typer.Option([2, 5], "--k", "-k", help="Cut-offs: --k 2 5 (or --k 2 --k 5)."),
    openie: Path | None = typer.Option(None, "--openie", help="HippoRAG OpenIE json (graph, hybrid, kag)."),
    triplets: Path | None = typer.Option(None, "--triplets", help="triplets.jsonl (graph, hybrid, kag)."),
    index: Path | None = typer.Option(None, "--index", help="Index folder to reuse or build (default: user cache)."),
    rebuild: bool = flag(
        "--rebuild", help="Replace an --index folder that holds a non-matching index (otherwise refused)."
    ),
    subqueries: str = typer.Option("", "--subqueries", help="'gold': retrieve per gold sub-question (chunk|kag)."),
    encoder: str = typer.Option("all-MiniLM-L6-v2", "--encoder", help="Bundled MiniLM, a model folder or hub id."),
    prefixes: str = typer.Option("none", help="Prefix preset: none, e5, bge."),
    tokenizer: str = typer.Option(
        "whitespace",
        "--tokenizer",
        help="Token counts: whitespace words, 'encoder' (the encoder's own: WordPiece for MiniLM) or a tokenizer dir.",
    ),
    threads: int = typer.Option(
        0, "--threads", help="Torch and FAISS CPU threads (0: defaults; 1 is fastest on a shared CPU)."
    ),
    limit: int = typer.Option(0, "--limit", help="Evaluate only the first N questions (0 = all)."),
    reranker: str = typer.Option("none", "--reranker", help=RERANKER_HELP),
    rerank_depth: int = typer.Option(20, "--rerank-depth", help=RERANK_DEPTH_HELP),
    per_question: bool = flag(
        "--per-question", help="Include each question's ranking (gold sub-queries: each one's tokens, recall) in JSON."
    ),
    as_json: bool = flag("--json", help="Print the report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """Recall@k (HippoRAG: |gold ∩ top-k| / |gold|), answer recall@k and tokens per retrieval, in %."""
    from effirag.cli.index import apply_threads
    from effirag.data import load_corpus, load_questions
    from effirag.eval.retrieval import evaluate_retrieval
    from effirag.retrieval.modes import mode_class

    setup_logging(verbose)
    apply_threads(threads)
    if retriever not in RETRIEVERS:
        fail(f"--retriever {retriever!r}: known: {', '.join(RETRIEVERS)}")
    if subqueries not in ("", "gold"):
        fail(f"--subqueries {subqueries!r}: only 'gold' is supported")
    ks = parse_ks(k, list(ctx.args))
    mode = RETRIEVERS[retriever]
    needs_kg = "kg" in mode_class(mode).needs or bool(subqueries)
    if needs_kg and openie is None and triplets is None:
        fail(f"--retriever {retriever} needs a knowledge graph: give --openie or --triplets")
    c = load_corpus(corpus)
    qs = load_questions(questions, c)
    examples = qs.examples[:limit] if limit > 0 else qs.examples
    source = _IndexSource(corpus, openie, triplets, encoder, prefixes, threads)
    tok = _load_tokenizer(tokenizer, source)
    second = _Rerank(reranker, rerank_depth)
    r = _open_index(c, index, source, mode, needs_kg, not as_json, rebuild=rebuild, tokenizer=tok, rerank=second)
    if subqueries == "gold":
        _gold_subqueries(examples, r, mode, max(ks), tok, tokenizer, retriever, per_question, as_json)
        return
    rep = evaluate_retrieval(
        examples, lambda q, n: r.retrieve(q, mode=mode, k=n), ks, name=retriever, progress=not as_json
    )
    out = rep.to_dict(per_question=per_question)
    if qs.missing_gold:
        out["missing_gold"] = len(qs.missing_gold)
    if as_json:
        emit_json(out)
        return
    t = Table(title=f"{retriever} on {questions} ({rep.n_questions} questions)")
    t.add_column("k")
    for col in ("Recall@k (%)", "answer recall (%)", "tokens / retrieval"):
        t.add_column(col, justify="right")
    for kk in map(str, ks):
        t.add_row(kk, str(rep.recall.get(kk, "-")), str(rep.answer_recall[kk]), f"{rep.tokens_per_retrieval[kk]:.1f}")
    console.print(t)


def _gold_subqueries(
    examples: Any,
    r: Any,
    mode: str,
    k: int,
    tok: Any,
    tokenizer: str,
    retriever: str,
    per_question: bool,
    as_json: bool,
) -> None:
    """``eval retrieval --subqueries gold``: retrieve per gold sub-question and print the report."""
    from effirag.eval.subqueries import evaluate_gold_subqueries

    assert r.index.kg is not None
    report = evaluate_gold_subqueries(examples, r, r.index.kg, k=k, tokenizer=tok, mode=mode)
    report = {"retriever": retriever, "subqueries": "gold", **report, "tokenizer": tokenizer}
    if not per_question:
        del report["per_subquery"]
    if as_json:
        emit_json(report)
    else:
        console.print(report)


@dataclass(frozen=True)
class _IndexSource:
    """What ``eval retrieval`` builds a missing index from: the corpus file, its KG source and the encoder."""

    corpus: Path
    openie: Path | None
    triplets: Path | None
    encoder: str
    prefixes: str
    threads: int


@dataclass(frozen=True)
class _Rerank:
    """``eval retrieval``'s reranker spec and depth."""

    spec: str = "none"
    depth: int = 20


def _load_tokenizer(spec: str, src: _IndexSource) -> Any:
    """None for whitespace counts; else the Hugging Face tokenizer of the encoder ('encoder') or of a folder."""
    if spec == "whitespace":
        return None
    path = spec
    if spec == "encoder":
        from effirag.cli.index import encoder_config
        from effirag.retrieval.encoders import SentenceTransformerEncoder

        path = SentenceTransformerEncoder(encoder_config(src.encoder, src.prefixes, None, None, "cpu")).model_path
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        fail(f"--tokenizer {spec!r}: cannot load a tokenizer from {path}: {e}")


def _open_index(
    c: Any,
    index: Path | None,
    src: _IndexSource,
    mode: str,
    needs_kg: bool,
    progress: bool,
    rebuild: bool = False,
    tokenizer: Any = None,
    rerank: _Rerank | None = None,
) -> Any:
    """The retriever over ``index`` (default: the corpus's cache folder), (re)built first when it is missing, stale,
    or lacks what ``mode`` needs. A user's ``--index`` folder holding an index that does not match is never
    overwritten without ``rebuild`` (EffiRAG's own cache folder is)."""
    from effirag.cli.index import default_index_dir, encoder_config, load_triplets
    from effirag.errors import IndexMismatchError
    from effirag.retrieval.encoders import SentenceTransformerEncoder
    from effirag.retrieval.facade import RetrieverConfig, load_retriever
    from effirag.retrieval.index import IndexConfig, build_index, load_index

    enc = SentenceTransformerEncoder(encoder_config(src.encoder, src.prefixes, None, None, "cpu", src.threads))
    folder = index or default_index_dir(src.corpus, src.encoder)
    try:
        loaded = load_index(folder, encoder_name=enc.name, corpus=c.passages)
        stale = (mode == "sparse" and loaded.sparse is None) or (mode != "sparse" and loaded.dense is None)
        stale = stale or (needs_kg and loaded.kg is None)
    except IndexMismatchError:
        stale = True
    if stale:
        err_console.print(f"building index in {folder}", style="dim")
        build_index(
            c.passages,
            folder,
            config=IndexConfig(dense=mode != "sparse"),
            encoder=enc,
            triplets=load_triplets(c, src.openie, src.triplets) if needs_kg else None,
            corpus_path=str(src.corpus),
            show_progress=progress,
            replace=rebuild or index is None,
        )
    rerank = rerank or _Rerank()
    config = RetrieverConfig(rerank_depth=rerank.depth)
    return load_retriever(folder, tokenizer=tokenizer, encoder=enc, config=config, reranker=rerank.spec)


TEST_NAMES = {"mcnemar_exact": "McNemar", "wilcoxon_exact": "Wilcoxon", "wilcoxon_normal": "Wilcoxon z"}


@app.command("compare")
@friendly_errors
def compare(
    run_a: Path = typer.Argument(..., help="An `eval qa --out` folder (A)."),
    run_b: Path = typer.Argument(..., help="Another `eval qa --out` folder over the same questions (B)."),
    questions: Path | None = typer.Option(
        None, "--questions", "-q", help="Gold answers (default: run A's own questions.jsonl)."
    ),
    start_a: Path | None = typer.Option(
        None, "--start-a", help="A's start run: compare gains (each run minus its start, per question); with --start-b."
    ),
    start_b: Path | None = typer.Option(None, "--start-b", help="B's start run (see --start-a)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the paired bootstrap."),
    resamples: int = typer.Option(10_000, "--resamples", help="Bootstrap resamples."),
    as_json: bool = flag("--json", help="Print the comparison as JSON."),
) -> None:
    """EM, F1, total and generated tokens and steps of two runs on paired questions: B − A with a bootstrap 95%
    interval and p-values (McNemar's exact test for a 0/1 EM, Wilcoxon's signed-rank for the rest). With --start-a
    and --start-b, the gains over each run's own start are compared instead (e.g. two protocols whose start policies
    score apart)."""
    from effirag.data import load_questions
    from effirag.eval.compare import compare_scores, gains, load_run, run_questions

    if (start_a is None) != (start_b is None):
        raise typer.BadParameter("give both --start-a and --start-b, or neither")
    qfile = questions or run_questions(run_a)
    examples = load_questions(qfile).examples
    a, b = load_run(run_a, examples), load_run(run_b, examples)
    starts: dict[str, Any] = {}
    if start_a is not None and start_b is not None:
        a, b = gains(a, load_run(start_a, examples)), gains(b, load_run(start_b, examples))
        starts = {"gains_over": {"a": str(start_a), "b": str(start_b)}}
    result = compare_scores(a, b, seed=seed, n_resamples=resamples)
    result = {"a": str(run_a), "b": str(run_b), "questions": str(qfile), **starts, **result}
    if as_json:
        emit_json(result)
        return
    gained = f"; gains over A's start {start_a} and B's start {start_b}" if starts else ""
    t = Table(title=f"B − A on {result['n']} paired questions (A = {run_a}, B = {run_b}{gained})")
    for col in ("metric", "A", "B", "B − A", "95% interval", "test", "p"):
        t.add_column(col, justify="left" if col in ("metric", "test") else "right")
    for name, row in result["metrics"].items():
        d = row["diff"]
        t.add_row(
            name, f"{row['a']:.4g}", f"{row['b']:.4g}", f"{d['mean']:+.3g}", f"[{d['low']:+.3g}, {d['high']:+.3g}]",
            TEST_NAMES[row["test"]["name"]], f"{row['test']['p_value']:.3g}",
        )  # fmt: skip
    console.print(t)


# `eval qa` lives with the agent CLI (effirag.cli.agent); registered here so both share the `eval` group.
app.command("qa")(_agent_cli.eval_qa)
