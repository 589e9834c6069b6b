"""``effirag train dpo`` (step-level DPO on a pairs file) and ``effirag train ipdpo`` (TeaRAG's iterative
process-aware DPO with engine sampling), both with inserted tokens masked out of the loss.

The command functions are registered by the ``train`` command group (``app.command("dpo")(dpo)``,
``app.command("ipdpo")(ipdpo)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from effirag.cli.common import friendly_errors, setup_logging
from effirag.cli.train_rl import show_summary


def _report(title: str, summary: dict[str, Any], as_json: bool) -> None:
    show_summary(title, summary, as_json)


@friendly_errors
def dpo(
    data: Path | None = typer.Option(None, "--data", help="Pairs JSONL (prompt, chosen, rejected); overrides `data`."),
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file of StepDPORunConfig fields."),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. train.max_steps=20"),
    resume: bool = typer.Option(False, "--resume", help="Continue from the last checkpoint in output_dir."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the run report as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each stage."),
) -> None:
    """Step-level DPO on RAG-ProGuide-shaped pairs, inserted observations masked; per-step log, final policy."""
    from effirag.config import load_config
    from effirag.train.dpo.config import StepDPORunConfig
    from effirag.train.dpo.step import run_step_dpo

    setup_logging(verbose)
    extra = [f"data={data}"] if data is not None else []
    cfg = load_config(StepDPORunConfig, config, [*(overrides or ()), *extra])
    res = run_step_dpo(cfg, resume=resume, progress=not quiet and not as_json)
    summary = {"output_dir": str(res.output_dir), "policy": str(res.policy_dir), "pairs": res.pairs}
    summary.update(steps=res.steps, seconds=round(res.seconds, 1), **res.last)
    _report("step-level DPO run", summary, as_json)


@friendly_errors
def ipdpo(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML file of an IP-DPO run: env: and IPDPORunConfig's own fields."
    ),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. rounds=1 env.max_questions=50"),
    resume: bool = typer.Option(False, "--resume", help="Keep the finished rounds in output_dir; run the rest."),
    as_json: bool = typer.Option(False, "--json", help="Print the run report as JSON."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each stage."),
) -> None:
    """TeaRAG IP-DPO: per round, sample paths with the current policy, score them (format, outcome, process reward),
    pair them (eq. 14) and train DPO + η·SFT; per-round log, a checkpoint per round, final policy."""
    from effirag.env import load_run_config
    from effirag.train.dpo.config import IPDPORunConfig
    from effirag.train.dpo.ipdpo import run_ipdpo

    setup_logging(verbose)
    cfg = load_run_config(IPDPORunConfig, config, overrides or ())
    res = run_ipdpo(cfg, resume=resume)
    summary = {"output_dir": str(res.output_dir), "policy": str(res.policy_dir), "rounds": res.rounds}
    summary.update(seconds=round(res.seconds, 1), **res.last)
    _report("IP-DPO run", summary, as_json)
