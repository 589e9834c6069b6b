"""See what the agent did: a self-contained HTML report of a run (``effirag view``), its plots and trace exports.

:func:`write_report` reads ``RUN_DIR`` (:mod:`effirag.view.runs`: an ``eval qa`` run, an RL, DPO or IP-DPO log, an
MCTS folder, or a folder of them), draws the plots (:mod:`effirag.view.plots`, also
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


def write_report(run_dir: str | Path, out: str | Path | None = None, world: str | Path | None = None) -> Report:
    """Write the report of ``run_dir`` to ``out`` (default ``RUN_DIR/report.html``); the plots go to the folder
    ``<out stem>_plots`` beside it. With ``world`` (an EffiRAG-World folder), trajectories recorded without oracle
    verdicts are judged by the world oracle for the page (the run's files are left as they are)."""
    runs = load_runs(run_dir)
    if world is not None:
        from effirag.eval.annotate import annotate_oracle
        from effirag.rewards.judges import WorldJudge
        from effirag.world.world import World

        judge = WorldJudge(World.load(world))
        for run in runs.qa:
            annotate_oracle([t for t in run.trajectories if not any("oracle" in s.extras for s in t.steps)], judge)
    html = Path(out) if out is not None else Path(run_dir) / "report.html"
    html.parent.mkdir(parents=True, exist_ok=True)
    folder = html.with_name(f"{html.stem}_plots")
    plots = make_plots(runs, folder)
    html.write_text(build_html(runs, plots, f"EffiRAG run: {Path(run_dir).resolve().name}"), encoding="utf-8")
    return Report(html, {name: folder / f"{name}.png" for name in plots}, runs)
