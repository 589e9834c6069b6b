"""``effirag ask`` (one question, one trajectory) and ``effirag eval qa`` (a question set, scored and resumable)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from effirag.cli.common import console, emit_json, fail, friendly_errors, setup_logging

PROTOCOL_HELP = "searchr1, routerag, dsr1, hiprag, tearag, reasonrag, zeroshot, naive, single-con, single-ppr."
BACKEND_HELP = "hf:DIR, openai:URL#MODEL (or openai-chat:URL#MODEL), scripted:FILE."
SET_HELP = "Engine setting key=value (repeatable), e.g. --set max_steps=4 --set temperature=0.7."
MODE_HELP = (
    "Retrieval mode of every search: passage, sparse, graph, hybrid, kag (or chunks_triplets); default: the "
    "protocol's own (tearag: kag, the others: passage). Not for routerag (its model routes each search) or zeroshot "
    "(never retrieves); single-con and single-ppr take only their own (chunks_triplets, kag)."
)


class _PolicyTokens:
    """Adapts a Generator to the retriever's tokenizer interface so item token counts use the policy's tokenizer."""

    def __init__(self, gen: Any) -> None:
        self.gen = gen

    def encode(self, text: str) -> list[int]:
        return [0] * self.gen.count_tokens(text)


REMOTE_HELP = "URL of `effirag serve retrieval` (http://HOST:PORT) to search through instead of --index."
RERANKER_HELP = "KAG reranker folder (`effirag train reranker`); none: the index's bi-encoder cosines."


def _runtime(
    protocol: str,
    backend: str,
    index: Path | None,
    settings: Sequence[str],
    reranker: Path | None = None,
    mode: str | None = None,
    remote: str | None = None,
) -> tuple[Any, Any, Any, Any]:
    """(protocol, generator, retriever or None, engine config) from CLI options; bad input fails with one line, and
    so does a protocol paired with a retrieval mode it cannot run over (before any model or index is loaded)."""
    from effirag.agent import PROTOCOLS, EngineConfig, get_protocol
    from effirag.agent.run_mode import check_run_mode
    from effirag.config import load_config
    from effirag.llm.factory import make_generator

    if protocol not in PROTOCOLS:
        fail(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    cfg = load_config(EngineConfig, None, [*settings, *([f"mode={mode}"] if mode is not None else [])])
    proto = get_protocol(protocol)
    check_run_mode(proto, cfg.mode)
    needs_index = proto.mode_choice != "none"
    if remote is not None:  # `effirag serve retrieval` holds the index; its token comes from EFFIRAG_TOKEN
        import os

        from effirag.retrieval.remote import RemoteRetriever

        return proto, make_generator(backend), RemoteRetriever(remote, token=os.environ.get("EFFIRAG_TOKEN")), cfg
    if needs_index and index is None:
        fail(f"--index is required for protocol {protocol!r} (it retrieves)")
    if index is not None and not index.is_dir():
        fail(f"index folder not found: {index}")
    gen = make_generator(backend)
    retriever = None
    if needs_index and index is not None:
        from effirag.retrieval.facade import load_retriever

        retriever = load_retriever(index, tokenizer=_PolicyTokens(gen), reranker=reranker).load()
        if cfg.mode is not None:  # an index without what the run's mode needs fails here, not at every search
            retriever.require(cfg.passage_mode if cfg.mode == "passage" else cfg.mode)
    return proto, gen, retriever, cfg


def trajectory_json(t: Any) -> dict[str, Any]:
    """The ``ask --json`` document of one trajectory."""
    steps = [
        {
            "action": s.action.value,
            "query": s.query,
            "mode": s.mode,
            "items": [{"id": i.id, "kind": i.kind.value, "text": i.text, "score": float(i.score)} for i in s.items],
            "generated_tokens": s.generated_tokens,
            "inserted_tokens": s.inserted_tokens,
        }
        for s in t.steps
    ]
    return {
        "question": t.question,
        "prediction": t.prediction,
        "format_ok": t.format_ok,
        "steps": steps,
        "totals": t.totals(),
    }


@friendly_errors
def ask(
    question: str = typer.Argument(..., help="The question to answer."),
    protocol: str = typer.Option("searchr1", "--protocol", "-p", help=PROTOCOL_HELP),
    backend: str = typer.Option(..., "--backend", "-b", help=BACKEND_HELP),
    index: Path | None = typer.Option(None, "--index", "-i", help="Index folder (from `effirag index build`)."),
    mode: str | None = typer.Option(None, "--mode", "-m", help=MODE_HELP),
    settings: list[str] = typer.Option([], "--set", help=SET_HELP),
    reranker: Path | None = typer.Option(None, "--reranker", help=RERANKER_HELP),
    remote: str | None = typer.Option(None, "--retriever", help=REMOTE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the trajectory as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log details."),
) -> None:
    """Answer one question with an agent protocol and print its trajectory."""
    from effirag.agent import run_episodes

    setup_logging(verbose)
    proto, gen, retriever, cfg = _runtime(protocol, backend, index, settings, reranker, mode, remote)
    [t] = run_episodes(gen, retriever, proto, [question], cfg)
    if as_json:
        emit_json(trajectory_json(t))
        return
    for n, s in enumerate(t.steps, start=1):
        head = f"step {n}: [bold]{s.action.value}[/]"
        if s.query:
            head += escape(f"  query={s.query!r} mode={s.mode}")
        body = escape(s.text or "(retrieved before the first turn)")
        for i in s.items:
            body += escape(f"\n  [{i.kind.value}] {i.id} ({i.score:.3f}) {i.text[:100]}")
        if s.error:
            body += f"\n  [red]{escape(s.error)}[/]"
        sub = f"generated {s.generated_tokens} tok, inserted {s.inserted_tokens} tok"
        console.print(Panel(body, title=head, subtitle=sub, title_align="left", highlight=False))
    tot = t.totals()
    console.print(
        f"[bold]prediction:[/] {escape(repr(t.prediction))}  format_ok={t.format_ok}  steps={tot['steps']} "
        f"searches={tot['searches']} generated={tot['generated_tokens']} inserted={tot['inserted_tokens']} "
        f"retrieval={tot['retrieval_s']:.3f}s generation={tot['generation_s']:.3f}s"
    )


@friendly_errors
def eval_qa(
    questions: Path = typer.Option(..., "--questions", "-q", help="Question file (layout auto-detected)."),
    index: Path | None = typer.Option(None, "--index", "-i", help="Index folder (from `effirag index build`)."),
    protocol: str = typer.Option("searchr1", "--protocol", "-p", help=PROTOCOL_HELP),
    backend: str = typer.Option(..., "--backend", "-b", help=BACKEND_HELP),
    limit: int = typer.Option(0, "--limit", help="Evaluate only the first N questions (0 = all)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Folder for trajectories.jsonl; re-running resumes."),
    chunk_size: int = typer.Option(32, "--chunk-size", help="Questions per batched engine call (and per save)."),
    mode: str | None = typer.Option(None, "--mode", "-m", help=MODE_HELP),
    settings: list[str] = typer.Option([], "--set", help=SET_HELP),
    reranker: Path | None = typer.Option(None, "--reranker", help=RERANKER_HELP),
    remote: str | None = typer.Option(None, "--retriever", help=REMOTE_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log details."),
) -> None:
    """Run a protocol over a question set: EM, F1, cover-EM, format rate, steps, tokens and latency."""
    from effirag.data import load_questions
    from effirag.eval.qa import evaluate_qa

    setup_logging(verbose)
    if limit < 0:
        fail(f"--limit {limit}: must be >= 0")
    examples = load_questions(questions).examples
    if limit:
        examples = examples[:limit]
    proto, gen, retriever, cfg = _runtime(protocol, backend, index, settings, reranker, mode, remote)
    report, _ = evaluate_qa(examples, gen, retriever, proto, cfg, out_dir=out, chunk_size=chunk_size)
    if as_json:
        emit_json(report)
        return
    over = f" over {cfg.mode}" if cfg.mode is not None else ""
    table = Table(title=f"{protocol}{over} on {questions} ({report['n']} questions)", show_header=False)
    for key in ("em", "f1", "cover_em", "format_rate", "mean_steps", "retrieval_turns"):
        table.add_row(key, f"{report[key]:.4f}")
    for key, value in report["tokens"].items():
        table.add_row(f"tokens.{key}", f"{value:.2f}")
    for key, value in report["latency_s"].items():
        table.add_row(f"latency_s.{key}", f"{value:.4f}")
    table.add_row("steps_hist", ", ".join(f"{k}: {v}" for k, v in report["steps_hist"].items()))
    for hops, row in report["by_hops"].items():
        table.add_row(f"hops {hops}", f"n={row['n']} em={row['em']:.4f} f1={row['f1']:.4f}")
    console.print(table)
    if out is not None:
        console.print(f"trajectories: {out / 'trajectories.jsonl'}")
