"""See what the agent did: a self-contained HTML report of a run (``effirag view``), its plots and trace exports.

:func:`write_report` reads ``RUN_DIR`` (:mod:`effirag.view.runs`), draws the plots (:mod:`effirag.view.plots`, also
written as PNG files beside the report) and writes one HTML file (:mod:`effirag.view.page`) that needs no server and
no network.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from effirag.view.page import build_html
from effirag.view.plots import make_plots
from effirag.view.runs import RunSet, load_runs

__all__ = ["Report", "load_runs", "write_report"]


@dataclass(frozen=True)
class Report:
    """Where :func:`write_report` wrote the page and its plots, and what it covered."""

    html: Path
    plots: dict[str, Path]
    runs: RunSet

    @property
    def n_questions(self) -> int:
        return sum(len(r.trajectories) for r in self.runs.qa)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Report:
    """Write the report of ``run_dir`` to ``out`` (default ``RUN_DIR/report.html``); the plots go to the folder
    ``<out stem>_plots`` beside it."""
    runs = load_runs(run_dir)
    html = Path(out) if out is not None else Path(run_dir) / "report.html"
    html.parent.mkdir(parents=True, exist_ok=True)
    folder = html.with_name(f"{html.stem}_plots")
    plots = make_plots(runs, folder)
    html.write_text(build_html(runs, plots, f"EffiRAG run: {Path(run_dir).resolve().name}"), encoding="utf-8")
    return Report(html, {name: folder / f"{name}.png" for name in plots}, runs)
