"""``effirag train grpo`` (multi-turn GRPO on TRL's GRPOTrainer) and ``effirag train ppo`` (EffiRAG's own PPO with a
value head), both with EffiRAG rollouts and composed rewards.

The command functions are registered by the ``train`` command group (``app.command("grpo")(grpo)``,
``app.command("ppo")(ppo)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from effirag.cli.common import console, emit_json, flag, friendly_errors, setup_logging


@friendly_errors
def grpo(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML file of a GRPO run: env:, objective: and GRPORunConfig's own fields."
    ),
    overrides: list[str] | None = typer.Argument(
        None, help="key=value overrides, e.g. env.model=DIR max_steps=20 objective.outcome=f1"
    ),
    resume: bool = flag("--resume", help="Continue from the last checkpoint in output_dir."),
    quiet: bool = flag("--quiet", "-q", help="No progress bar."),
    as_json: bool = flag("--json", help="Print the run report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log each stage."),
) -> None:
    """GRPO from a config: engine rollouts with the current policy, composed rewards, per-step log, checkpoints."""
    from effirag.env import load_run_config
    from effirag.train.rl.grpo import GRPORunConfig
    from effirag.train.rl.run import run_grpo

    setup_logging(verbose)
    cfg = load_run_config(GRPORunConfig, config, overrides or ())
    res = run_grpo(cfg, resume=resume, progress=not quiet)
    _report("GRPO run", res, as_json)


def show_summary(title: str, summary: dict[str, Any], as_json: bool) -> None:
    """A training run's summary as a two-column table, or as JSON (floats to 4 significant digits)."""
    summary = {k: float(f"{v:.4g}") if isinstance(v, float) else v for k, v in summary.items()}
    if as_json:
        emit_json(summary)
        return
    t = Table(title=title, show_header=False)
    for k, v in summary.items():
        t.add_row(k, str(v))
    console.print(t)


def _report(title: str, res: Any, as_json: bool) -> None:
    """The run's output folders, step count, seconds and last log record, as a table or JSON."""
    summary = {
        "output_dir": str(res.output_dir),
        "policy": str(res.policy_dir),
        "steps": res.steps,
        "seconds": round(res.seconds, 1),
        **res.last,
    }
    show_summary(title, summary, as_json)


@friendly_errors
def ppo(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML file of a PPO run: env:, objective: and PPORunConfig's own fields."
    ),
    overrides: list[str] | None = typer.Argument(
        None, help="key=value overrides, e.g. env.model=DIR steps=20 kl_coef=0.01"
    ),
    resume: bool = flag("--resume", help="Continue from the last checkpoint in output_dir."),
    quiet: bool = flag("--quiet", "-q", help="No progress bar."),
    as_json: bool = flag("--json", help="Print the run report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log each stage."),
) -> None:
    """PPO from a config: engine rollouts with the current policy, a value head, token-level rewards with a KL penalty
    to the start model, GAE over policy tokens, clipped losses; per-step log, checkpoints."""
    from effirag.env import load_run_config
    from effirag.train.rl.ppo_config import PPORunConfig
    from effirag.train.rl.ppo_run import run_ppo

    setup_logging(verbose)
    cfg = load_run_config(PPORunConfig, config, overrides or ())
    res = run_ppo(cfg, resume=resume, progress=not quiet)
    _report("PPO run", res, as_json)
