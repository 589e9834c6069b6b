"""``effirag demo``: the main job on the embedded defaults (what `make demo` runs).

Stages are added as the project grows; each prints real results computed now.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from effirag.cli.common import console, friendly_errors


@friendly_errors
def demo(
    data: Path = typer.Option(Path("../shared/data"), help="Folder of the shared real benchmark data."),
) -> None:
    """Run the main job: dataset statistics on the shared real data and a metrics check on its gold answers."""
    from effirag.data import dataset_stats, load_corpus, load_openie, load_questions
    from effirag.metrics import cover_exact_match, exact_match, f1_score

    table = Table(title="Shared benchmark data")
    for col in ("dataset", "questions", "passages", "triplets", "hops", "gold found"):
        table.add_column(col)
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
    pop_corpus = load_corpus(data / "popqa" / "corpus.json")
    pop = load_questions(data / "popqa" / "questions.json", pop_corpus)
    ps = dataset_stats(pop, pop_corpus)
    table.add_row(
        "popqa",
        str(ps["n_questions"]),
        str(ps["n_passages"]),
        "-",
        ", ".join(f"{k}:{v}" for k, v in ps["hops"].items()),
        f"{ps['gold_passages']['found']}/{ps['gold_passages']['total']}",
    )
    console.print(table)

    # Metrics check: the last gold sub-answer of each MuSiQue decomposition scored against the question's answers.
    preds = [(e.decomposition[-1].answer, e.answers) for e in qs.examples if e.decomposition]
    n = len(preds)
    m = Table(title=f"Metrics of MuSiQue's final gold sub-answers vs gold answers ({n} questions)")
    for col in ("EM", "F1", "cover-EM"):
        m.add_column(col)
    m.add_row(
        *(f"{100 * sum(fn(p, g) for p, g in preds) / n:.1f}" for fn in (exact_match, f1_score, cover_exact_match))
    )
    console.print(m)
