"""What `effirag demo` prints besides its tables' rows: a question's trajectory, and the shared data's statistics."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from effirag.cli.common import console


def print_trajectory(ex: Any, t: Any) -> None:
    """One question's trajectory, step by step: searches with their items and summaries, then the verdict."""
    from effirag.metrics import exact_match

    ok = exact_match(t.prediction or "", ex.answers)
    head = f"[bold]{escape(ex.id)}[/] ({ex.hops}-hop) {escape(ex.question)}"
    console.print(head, highlight=False)
    for i, s in enumerate(t.steps, 1):
        if s.action.value == "search":
            ents = f" entities={s.entities}" if s.entities else ""
            console.print(escape(f"  {i}. search[{s.mode}]{ents}: {s.query}"), highlight=False)
            for it in s.items[:3]:  # cut at a word, not mid-word; rich wraps what is left
                text = textwrap.shorten(it.text, width=160, placeholder=" …")
                console.print(escape(f"       · {it.kind.value}: {text}"), highlight=False)
            summary = s.summary
            if summary:
                console.print(escape(f"     summary: {summary}"), highlight=False)
        elif s.action.value == "answer":
            console.print(escape(f"  {i}. answer: {s.answer}"), highlight=False)
        else:
            text = textwrap.shorten(s.text, width=160, placeholder=" …")
            console.print(escape(f"  {i}. {s.action.value}: {text!r}"), highlight=False)
    verdict = "[green]correct[/]" if ok else "[red]wrong[/]"
    gold = escape(repr(ex.answers[0]))
    console.print(f"  → {escape(repr(t.prediction))} (gold {gold}) {verdict}, {t.generated_tokens} generated + "
                  f"{t.inserted_tokens} inserted tokens\n", highlight=False)  # fmt: skip


def data_stats(data: Path) -> None:
    """Stage 0: statistics of the shared real data (MuSiQue slice) and a metrics check on its gold answers."""
    from effirag.data import dataset_stats, load_corpus, load_openie, load_questions
    from effirag.metrics import cover_exact_match, exact_match, f1_score

    table = Table(title="Shared benchmark data")
    for col in ("dataset", "questions", "passages", "triplets", "hops", "gold found"):
        table.add_column(col, overflow="fold")
    mus = data / "musique_mini"
    corpus = load_corpus(mus / "corpus.json")
    qs = load_questions(mus / "questions.json", corpus)
    oie = load_openie(mus / "openie_gpt-3.5-turbo-1106.json", corpus)
    s = dataset_stats(qs, corpus, oie)
    table.add_row(
        "musique_mini",
        str(s["n_questions"]),
        str(s["n_passages"]),
        str(s["n_triplets"]),
        ", ".join(f"{k}:{v}" for k, v in s["hops"].items()),
        f"{s['gold_passages']['found']}/{s['gold_passages']['total']}",
    )
    console.print(table)
    preds = [(e.decomposition[-1].answer, e.answers) for e in qs.examples if e.decomposition]
    n = len(preds)
    m = Table(title=f"Metrics of MuSiQue's final gold sub-answers vs gold answers ({n} questions)")
    for col in ("EM", "F1", "cover-EM"):
        m.add_column(col)
    m.add_row(
        *(f"{100 * sum(fn(p, g) for p, g in preds) / n:.1f}" for fn in (exact_match, f1_score, cover_exact_match))
    )
    console.print(m)
