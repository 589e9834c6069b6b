"""``effirag data mcts``: ReasonRAG's MCTS + SPRE step-level preference pairs (registered on the ``data`` group)."""

from __future__ import annotations

import functools
from pathlib import Path

import typer
from rich.table import Table

from effirag.cli.common import console, emit_json, err_console, flag, friendly_errors, progress, setup_logging


@friendly_errors
def mcts(
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file of MCTSRunConfig fields."),
    overrides: list[str] | None = typer.Argument(
        None, help="key=value overrides, e.g. max_questions=3 search.iterations=4 search.k=2"
    ),
    quiet: bool = flag("--quiet", "-q", help="No progress bar."),
    as_json: bool = flag("--json", help="Print the run summary as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """A tree per question (UCT selection, k sampled next steps, rollouts, SPRE backup); writes pairs.jsonl,
    trees.jsonl and trees/<id>.json to output_dir. Rerunning resumes: finished questions are skipped."""
    from effirag.env.config import settings_source
    from effirag.train.mcts import load_run_config, mine_trees
    from effirag.train.mcts.runner import open_run

    setup_logging(verbose)
    cfg = load_run_config(config, overrides or ())
    env = cfg.env
    source = settings_source({"inference": env.inference, "model": env.model})
    e = env.engine
    err_console.print(
        f"{env.protocol} on {env.backend} (inference settings: {source or 'none'}): k={e.k} max_steps={e.max_steps} "
        f"max_new_tokens={e.max_new_tokens} frequency_penalty={e.frequency_penalty} reranker={env.reranker or 'none'}",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    examples, policy, out = open_run(cfg)
    run = functools.partial(mine_trees, examples, policy, cfg.search, out, dump_trees=cfg.dump_trees)
    if quiet or as_json:
        summary = run()
    else:
        with progress(f"mcts {env.protocol}", len(examples), " questions") as update:
            summary = run(on_progress=lambda done, _total, pairs: update(done, pairs=pairs))
    totals = {
        "output_dir": str(summary.output_dir),
        "searched": summary.searched,
        "skipped": summary.skipped,
        "pairs": summary.pairs,
        "seconds": round(summary.seconds, 1),
    }
    if as_json:
        emit_json({**totals, "trees": summary.records})
        return
    t = Table(title="MCTS trees", show_header=True)
    for col in ("question", "iter", "nodes", "depth", "N", "Q root", "Q best", "pairs", "s"):
        t.add_column(col)
    for r in summary.records:
        t.add_row(
            r["question_id"], str(r["iterations"]), str(r["nodes"]), str(r["depth"]), str(r["visits"]),
            f"{r['root_value']:.3f}", f"{r['best_value']:.3f}", str(r["pairs"]), f"{r['seconds']:.1f}",
        )  # fmt: skip
    console.print(t)
    console.print(" ".join(f"{k}={v}" for k, v in totals.items()), highlight=False)
