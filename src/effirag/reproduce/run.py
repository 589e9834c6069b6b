"""``effirag reproduce`` end to end: plan the stages, run (or reuse) them, measure, write report.json, report.md,
summary.md and the plots into OUT."""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from effirag.reproduce.config import ReproduceConfig
from effirag.reproduce.markdown import render, render_summary
from effirag.reproduce.plan import Available, Stage, make_plan
from effirag.reproduce.plots import write_plots
from effirag.reproduce.report import build_report
from effirag.reproduce.runner import run_stages, stage_env, write_json_atomic


def machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}"


def reproduce(
    cfg: ReproduceConfig,
    out: Path,
    available: Available,
    effirag: Sequence[str],
    on_stage: Callable[[int, int, Stage, dict[str, Any] | None], None] | None = None,
) -> dict[str, Any]:
    """Run every stage of ``cfg``'s plan (finished ones are reused) and write the report files into ``out``.

    ``available(words)`` says whether ``effirag <words>`` exists in this build; ``effirag`` is the command line that
    runs the CLI (e.g. ``[python, -c, "from effirag.cli.main import app; app()"]``); ``on_stage(i, n, stage,
    record)`` is called before (record None) and after each stage."""
    from effirag.data import load_questions

    out.mkdir(parents=True, exist_ok=True)
    plan = make_plan(cfg, out, available)
    n = len(plan.stages)
    hook = None if on_stage is None else lambda i, s, r: on_stage(i, n, s, r)
    records = run_stages(plan.stages, out, effirag, hook, stage_env(cfg.threads))
    examples = load_questions(cfg.eval_file).examples[: cfg.eval_limit]
    report = build_report(cfg, plan, out, examples)
    report["run"] = {
        "finished": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "minutes": sum(r["seconds"] for r in records.values()) / 60.0,
        "eval_questions": len(examples),
        "eval_file": cfg.eval_file,
        "train_file": cfg.train_file,
        **{k: v for k, v in asdict(cfg).items() if k not in ("eval_questions", "train_questions")},
    }
    report["stages"] = [
        {"key": s.key, "kind": s.kind, "method": s.method, "seconds": records[s.key]["seconds"],
         "reused": records[s.key]["reused"], "command": "effirag " + " ".join(s.argv)}
        for s in plan.stages
    ]  # fmt: skip
    report["plots"] = write_plots(report, out)
    write_json_atomic(out / "report.json", report)
    for name, text in (("report.md", render(report)), ("summary.md", render_summary(report))):
        tmp = out / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out / name)
    return report
