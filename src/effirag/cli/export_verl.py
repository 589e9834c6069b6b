"""``effirag export verl``: a question file as verl's RL parquet (see :mod:`effirag.integrations.verl`)."""

from __future__ import annotations

from pathlib import Path

import typer

from effirag.cli.common import console, fail, friendly_errors


@friendly_errors
def verl(
    questions: Path = typer.Option(..., "--questions", "-q", help="Question file (layout auto-detected)."),
    protocol: str = typer.Option("searchr1", "--protocol", "-p", help="Agent protocol whose prompt the rows hold."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for SPLIT.parquet."),
    split: str = typer.Option("train", "--split", help="Split name: the file name and extra_info.split."),
    dataset: str = typer.Option("", "--dataset", help="Dataset name in data_source (default: the file's stem)."),
    limit: int = typer.Option(0, "--limit", help="Export only the first N questions (0 = all)."),
) -> None:
    """Write verl's parquet rows (data_source, chat prompt, ability, reward_model, extra_info with the search tool's
    kwargs); score the responses with effirag.integrations.verl.compute_score."""
    from effirag.agent import PROTOCOLS, get_protocol
    from effirag.data import load_questions
    from effirag.integrations.verl import verl_rows, write_parquet

    if protocol not in PROTOCOLS:
        fail(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    if limit < 0:
        fail(f"--limit {limit}: must be >= 0")
    if not split or "/" in split:
        fail(f"--split {split!r}: need a plain name (it names the file)")
    examples = load_questions(questions).examples
    examples = examples[:limit] if limit else examples
    rows = verl_rows(examples, get_protocol(protocol), split, dataset or questions.stem)
    path = write_parquet(rows, out / f"{split}.parquet")
    console.print(f"{len(rows)} rows ({protocol}, split {split}) -> {path}", highlight=False)
