"""``effirag export traces RUN_DIR --format openinference|verl-jsonl``: a QA run's trajectories for other tools."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from effirag.cli.common import console, fail, friendly_errors


@friendly_errors
def traces(
    run_dir: Path = typer.Argument(..., help="An `eval qa --out` folder, or a folder of such runs."),
    fmt: str = typer.Option(..., "--format", "-f", help="openinference (OTLP JSON spans) or verl-jsonl."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="File to write (default: RUN_DIR/traces.otlp.json or RUN_DIR/rollouts.jsonl)."
    ),
) -> None:
    """OpenInference spans (AGENT / LLM / RETRIEVER, OTLP JSON for Phoenix and similar tools) or verl-style rollout
    JSONL (input, output, gts, score, step), one trajectory per trace or line."""
    from effirag.view.runs import load_runs
    from effirag.view.traces import FORMATS, openinference, verl_records

    if fmt not in FORMATS:
        fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    runs = load_runs(run_dir)
    if not runs.qa:
        fail(f"{run_dir}: no QA run (trajectories.jsonl) to export")
    if fmt == "openinference":
        path = out or run_dir / "traces.otlp.json"
        doc = openinference(runs)
        path.write_text(json.dumps(doc, ensure_ascii=False) + "\n", encoding="utf-8")
        n = len(doc["resourceSpans"][0]["scopeSpans"][0]["spans"])
    else:
        path = out or run_dir / "rollouts.jsonl"
        lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in verl_records(runs)]
        path.write_text("".join(lines), encoding="utf-8")
        n = len(lines)
    console.print(f"{n} {'spans' if fmt == 'openinference' else 'rollouts'}: {path}", highlight=False, soft_wrap=True)
