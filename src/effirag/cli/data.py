"""``effirag data …``: inspect and convert datasets."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from effirag.cli.common import console, emit_json, flag, friendly_errors
from effirag.cli.data_mcts import mcts

app = typer.Typer(help="Inspect and convert question sets, corpora and OpenIE files.", no_args_is_help=True)
app.command("mcts")(mcts)


@app.command("stats")
@friendly_errors
def stats(
    questions: Path = typer.Option(
        ..., "--questions", "-q", help="Question file (json or jsonl; layout auto-detected)."
    ),
    corpus: Path | None = typer.Option(None, "--corpus", "-c", help="Corpus file to match gold passages against."),
    openie: Path | None = typer.Option(None, "--openie", help="HippoRAG OpenIE json with the corpus's triples."),
    layout: str = typer.Option(
        "auto", help="Question layout: auto, musique, popqa, 2wiki, hotpotqa, flashrag, simple."
    ),
    skip_invalid: bool = flag("--skip-invalid", help="Skip invalid records (their count is printed)."),
    as_json: bool = flag("--json", help="Print the statistics as JSON."),
) -> None:
    """Questions, passages, triplets, hop/type distribution, passage length and gold coverage."""
    from effirag.data import dataset_stats, load_corpus, load_openie, load_questions

    c = load_corpus(corpus, skip_invalid=skip_invalid) if corpus else None
    qs = load_questions(questions, c, layout=layout, skip_invalid=skip_invalid)
    oie = load_openie(openie, c, skip_invalid=skip_invalid) if openie else None
    s = dataset_stats(qs, c, oie)
    if as_json:
        emit_json(s)
        return
    t = Table(title=f"{questions} ({s['layout']})", show_header=False)
    for key in ("n_questions", "n_passages", "n_triplets", "mean_passage_tokens", "skipped_records"):
        t.add_row(key, str(s[key]))
    t.add_row("hops", ", ".join(f"{k}: {v}" for k, v in s["hops"].items()))
    t.add_row("types", ", ".join(f"{k}: {v}" for k, v in list(s["types"].items())[:8]))
    t.add_row("gold passages found", f"{s['gold_passages']['found']} / {s['gold_passages']['total']}")
    if "triplets" in s:
        tr = s["triplets"]
        t.add_row(
            "triplets",
            f"raw {tr['raw']}, malformed {tr['malformed']}, duplicates {tr['duplicates']}, kept {tr['kept']}",
        )
    console.print(t)
    if s["skipped_records"]:
        console.print(f"[yellow]skipped {s['skipped_records']} invalid record(s)[/]")


@app.command("convert")
@friendly_errors
def convert(
    questions: Path = typer.Option(..., "--questions", "-q", help="Question file in any supported layout."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder for FlashRAG JSONL files."),
    corpus: Path | None = typer.Option(None, "--corpus", "-c", help="Corpus to convert and match gold passages."),
    skip_invalid: bool = flag("--skip-invalid", help="Skip invalid records (their count is printed)."),
) -> None:
    """Write questions (and corpus) as FlashRAG / Search-R1 JSONL: questions.jsonl and corpus.jsonl."""
    from effirag.data import load_corpus, load_questions, write_flashrag_corpus, write_flashrag_questions

    c = load_corpus(corpus, skip_invalid=skip_invalid) if corpus else None
    qs = load_questions(questions, c, skip_invalid=skip_invalid)
    n_q = write_flashrag_questions(out / "questions.jsonl", qs.examples)
    n_p = write_flashrag_corpus(out / "corpus.jsonl", c.passages if c else qs.passages)
    console.print(f"wrote {n_q} questions and {n_p} passages to {out}")
    if qs.skipped:
        console.print(f"[yellow]skipped {len(qs.skipped)} invalid record(s)[/]")
