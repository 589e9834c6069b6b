"""``effirag reproduce``: train each paper's recipe from the SFT start, evaluate every policy on the same questions,
and write report.md, report.json and plots (``effirag.reproduce``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from effirag.cli.common import console, emit_json, err_console, fail, flag, friendly_errors, setup_logging

EFFIRAG = (sys.executable, "-c", "from effirag.cli.main import app; app(prog_name='effirag')")


def available(words: tuple[str, ...]) -> bool:
    """Whether ``effirag <words>`` is a command of this build (looked up in the CLI's own command tree)."""
    import typer.main

    from effirag.cli.main import app

    node: Any = typer.main.get_command(app)
    for w in words:
        commands = getattr(node, "commands", None)
        if not commands or w not in commands:
            return False
        node = commands[w]
    return True


@friendly_errors
def reproduce(
    methods: str = typer.Option(
        "tearag,hiprag,routerag,reasonrag,dsr1", "--methods", help="Comma-separated methods to reproduce."
    ),
    budget_minutes: float = typer.Option(60.0, "--budget-minutes", help="Total budget, split evenly across methods."),
    out: Path = typer.Option(Path("runs/reproduce"), "--out", "-o", help="Report folder (re-running reuses stages)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file of ReproduceConfig fields."),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. start=DIR eval_limit=20"),
    as_json: bool = flag("--json", help="Print report.json to stdout."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """Reproduce the papers' headline claims in miniature: per stage progress, resumable after kill -9."""
    from effirag.config import load_config
    from effirag.llm.factory import vllm_missing
    from effirag.reproduce.config import ReproduceConfig
    from effirag.reproduce.run import reproduce as run

    setup_logging(verbose)
    extra = [f"methods=[{methods}]", f"budget_minutes={budget_minutes}", *(overrides or [])]
    cfg = load_config(ReproduceConfig, config, extra)
    why = vllm_missing(cfg.eval_python) if cfg.eval_spec("").startswith("vllm:") else ""
    if why:
        fail(f"eval_backend={cfg.eval_backend}: {why} (or give eval_python=.venv-vllm/bin/python)")

    def on_stage(i: int, n: int, stage: Any, record: dict[str, Any] | None) -> None:
        if record is None:
            err_console.print(f"[{i + 1}/{n}] {stage.key} …", highlight=False)
        else:
            how = "reused" if record["reused"] else f"{record['seconds']:.0f} s"
            err_console.print(f"[{i + 1}/{n}] {stage.key}: done ({how})", highlight=False)

    report = run(cfg, out, available, EFFIRAG, on_stage)
    if as_json:
        emit_json(report)
        return
    console.print(f"report: {out / 'report.md'}, {out / 'report.json'}; plots: {', '.join(report['plots'])}")
