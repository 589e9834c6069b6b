"""``effirag profile cost``: measure Dynamic Search-R1's c_g and c_e (eq. 3) for a policy on this hardware and write
them as config values a dsr1 recipe takes (:mod:`effirag.rewards.profiling`)."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from effirag.cli.common import console, emit_json, fail, flag, friendly_errors, setup_logging

app = typer.Typer(help="Profile a policy's costs on this hardware.", no_args_is_help=True)


@app.command("cost")
@friendly_errors
def cost(
    backend: str = typer.Option(..., "--backend", "-b", help="Policy backend: hf:DIR, openai:URL#MODEL, …"),
    out: Path = typer.Option(..., "--out", "-o", help="YAML file to write: objective.c_g and objective.c_e (s/token)."),
    recipe: Path | None = typer.Option(
        None, "--recipe", help="A training config (e.g. configs/rl/dsr1_grpo_latency.yaml) the file extends."
    ),
    prompt_tokens: list[int] = typer.Option([64, 512], "--prompt-tokens", help="Prompt sizes timed (two or more)."),
    new_tokens: list[int] = typer.Option([1, 32], "--new-tokens", help="Generated-token budgets timed (two or more)."),
    repeats: int = typer.Option(3, "--repeats", help="Timed calls per (prompt, new tokens) cell."),
    as_json: bool = flag("--json", help="Print the fit as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """Time greedy generate calls over prompt sizes × generation budgets, fit t = overhead + c_e·P + c_g·G (Dynamic
    Search-R1 §3.3, eq. 3) and write c_g and c_e into OUT; with --recipe, OUT is that recipe with the measured values
    (`effirag train grpo --config OUT env.model=…`), else a fragment whose values go in as objective.c_g=…
    objective.c_e=…."""
    import yaml

    from effirag.llm.factory import make_generator
    from effirag.rewards.profiling import cost_config, profile_token_costs

    setup_logging(verbose)
    if recipe is not None and not recipe.is_file():
        fail(f"--recipe {recipe}: no such file")
    try:
        costs = profile_token_costs(
            make_generator(backend), prompt_tokens=prompt_tokens, new_tokens=new_tokens, repeats=repeats
        )
    except ValueError as e:
        fail(f"cannot fit c_g and c_e: {e}")
    extends = os.path.relpath(recipe.resolve(), out.resolve().parent) if recipe is not None else None
    values = cost_config(costs, extends)
    header = (
        f"# Dynamic Search-R1 latency coefficients (eq. 3) measured by `effirag profile cost` for {backend}: "
        f"{costs.n_calls} calls, overhead {costs.overhead_s:.4g} s/call, rms residual {costs.rms_residual_s:.3g} s\n"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(header + yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    report = {"c_g": costs.c_g, "c_e": costs.c_e, "overhead_s": costs.overhead_s, "n_calls": costs.n_calls,
              "rms_residual_s": costs.rms_residual_s, "out": str(out)}  # fmt: skip
    if as_json:
        emit_json(report)
        return
    t = Table(title=f"token costs of {backend} → {out}", show_header=False)
    for key, v in report.items():
        t.add_row(key, f"{v:.4g}" if isinstance(v, float) else str(v))
    console.print(t)
