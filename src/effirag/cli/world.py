"""``effirag world …``: generate EffiRAG-World, the multi-hop world with exact ground truth."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from effirag.cli.common import console, emit_json, flag, friendly_errors, progress, setup_logging

app = typer.Typer(help="Generate EffiRAG-World: corpus, triplets, questions and known facts.", no_args_is_help=True)


@app.command("generate")
@friendly_errors
def generate(
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (files have fixed names)."),
    preset: str = typer.Option("demo", help="Preset: demo (3k passages), small (20k), large (1M)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file with WorldConfig fields."),
    passages: int | None = typer.Option(None, "--passages", "-n", help="Number of passages (overrides the preset)."),
    seed: int | None = typer.Option(None, "--seed", help="Random seed (overrides the preset and the file)."),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. two_hop=0.5 one_hop=0.1"),
    as_json: bool = flag("--json", help="Print the summary as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log progress."),
) -> None:
    """Generate a world into OUT: corpus.jsonl, triplets.jsonl, questions_*.jsonl, knowledge.jsonl, world.json."""
    from effirag.world import generate_world, load_world_config

    setup_logging(verbose)
    cfg = load_world_config(preset, config, overrides or (), passages=passages, seed=seed)
    with progress("world generate", cfg.passages, " passages") as update:  # on stderr: --json keeps stdout clean
        summary = generate_world(cfg, out, progress=update)
    if as_json:
        emit_json(summary)
        return
    t = Table(title=f"EffiRAG-World → {out}", show_header=False)
    for key, value in summary.items():
        t.add_row(key, str(value))
    console.print(t)
