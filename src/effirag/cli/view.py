"""``effirag view RUN_DIR``: the run's self-contained HTML report (trajectories, KAG graphs, token ledger, plots)."""

from __future__ import annotations

from pathlib import Path

import typer

from effirag.cli.common import console, friendly_errors


@friendly_errors
def view(
    run_dir: Path = typer.Argument(
        ...,
        help="An `eval qa --out` folder, an RL / DPO / IP-DPO log, a `data mcts` folder, or a folder of runs.",
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="HTML file to write (default: RUN_DIR/report.html)."),
    world: Path | None = typer.Option(
        None, "--world", help="EffiRAG-World folder: judge steps recorded without oracle verdicts (older runs)."
    ),
) -> None:
    """Write one HTML file (no server, no network) showing every question's steps, retrieved items, KAG graph, token
    ledger and oracle verdicts, with the run's metrics and plots; for training logs their curves and per-round
    tables, for MCTS folders every tree with its visits, values and preference pairs. The plots are also written as
    PNG files."""
    from effirag.view import write_report

    rep = write_report(run_dir, out, world)
    console.print(f"{rep.runs.describe()}; plots: {', '.join(rep.plots) or 'none'}", highlight=False)
    console.print(f"report: {rep.html}", highlight=False, soft_wrap=True)
