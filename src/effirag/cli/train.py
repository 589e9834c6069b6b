"""``effirag train …``: SFT on gold decompositions (``train sft``), the KAG reranker (``train reranker``), a
cross-encoder reranker (``train cross-encoder``), the known-fact
recall check (``train recall``) and checkpoint export (``train export``)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from effirag.cli.common import console, emit_json, flag, friendly_errors, setup_logging
from effirag.cli.train_pref import dpo, ipdpo
from effirag.cli.train_rl import grpo, ppo

app = typer.Typer(
    help="Train policies: SFT on agent trajectories (TeaRAG §4.3.1 data, eq. 4 masking), GRPO on engine rollouts.",
    no_args_is_help=True,
)


@app.command("sft")
@friendly_errors
def sft(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML with a `train:` (SFTConfig) and a `data:` (SFTDataConfig) section."
    ),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. train.optim.max_steps=20"),
    quiet: bool = flag("--quiet", "-q", help="No progress bar."),
    as_json: bool = flag("--json", help="Print the run report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log each stage."),
) -> None:
    """Build the SFT data (gold decompositions of a world or a question file → trajectories for every protocol) and
    train with TRL's SFTTrainer."""
    from effirag.config import load_config
    from effirag.train.pipeline import SFTRunConfig, run_pipeline

    setup_logging(verbose)
    cfg = load_config(SFTRunConfig, config, overrides or ())
    rep = run_pipeline(cfg, progress=not quiet)
    assert rep.result is not None
    summary = {
        "output_dir": str(rep.result.output_dir),
        "export_dir": str(cfg.train.export_dir) if cfg.train.export_dir else None,
        "steps": rep.result.steps,
        "train_loss": round(rep.result.train_loss, 4),
        "tokens_per_s": round(rep.result.tokens_per_s, 1),
        "seconds": {k: round(v, 1) for k, v in rep.seconds.items()},
        **{k: v for k, v in rep.counts.items()},
    }
    if as_json:
        emit_json(summary)
        return
    t = Table(title="SFT run", show_header=False)
    for k, v in summary.items():
        t.add_row(k, str(v))
    console.print(t)


@app.command("reranker")
@friendly_errors
def reranker(
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file of RerankerConfig fields."),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. epochs=5"),
    quiet: bool = flag("--quiet", "-q", help="No progress bar."),
    as_json: bool = flag("--json", help="Print the run report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log each stage."),
) -> None:
    """Train the KAG's bilinear reranker on a world's gold hops (retrieval/bilinear.py, train/reranker.py)."""
    from effirag.config import load_config
    from effirag.train.reranker import RerankerConfig, train_reranker

    setup_logging(verbose)
    cfg = load_config(RerankerConfig, config, overrides or ())
    rep = train_reranker(cfg, progress=not quiet)
    if as_json:
        emit_json(rep)
        return
    t = Table(title=f"reranker → {cfg.output_dir}", show_header=False)
    for key in ("train_hops", "train_lists", "eval_hops", "eval_lists", "top1_cosine", "top1_trained", "seconds"):
        v = rep[key]
        t.add_row(key, ", ".join(f"{k} {x:.3f}" if isinstance(x, float) else f"{k} {x}" for k, x in v.items())
                  if isinstance(v, dict) else str(v))  # fmt: skip
    console.print(t)


@app.command("cross-encoder")
@friendly_errors
def cross_encoder(
    config: Path | None = typer.Option(None, "--config", "-c", help="YAML file of CrossEncoderTrainConfig fields."),
    overrides: list[str] | None = typer.Argument(None, help="key=value overrides, e.g. questions=FILE max_steps=50"),
    quiet: bool = flag("--quiet", "-q", help="No progress bar."),
    as_json: bool = flag("--json", help="Print the run report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log each stage."),
) -> None:
    """Fine-tune a cross-encoder reranker on a question file's gold passages with BM25 hard negatives
    (train/cross_encoder.py); use it with --reranker cross-encoder:OUTPUT_DIR."""
    from effirag.config import load_config
    from effirag.train.cross_encoder import CrossEncoderTrainConfig, train_cross_encoder

    setup_logging(verbose)
    cfg = load_config(CrossEncoderTrainConfig, config, overrides or ())
    rep = train_cross_encoder(cfg, progress=not quiet)
    if as_json:
        emit_json(rep)
        return
    t = Table(title=f"cross-encoder → {cfg.output_dir}", show_header=False)
    for key, v in rep.items():
        if key != "config":
            t.add_row(key, str(v))
    console.print(t)


@app.command("recall")
@friendly_errors
def recall(
    model: Path = typer.Option(Path("checkpoints/demo-policy"), help="Policy checkpoint folder (HF layout)."),
    knowledge: Path = typer.Option(..., help="knowledge.jsonl of the world."),
    limit: int | None = typer.Option(None, help="Check only the first N known facts."),
    as_json: bool = flag("--json", help="Print the report as JSON."),
) -> None:
    """Ask every known fact without retrieval (zero-shot protocol) and report recall (cover-EM)."""
    from effirag.llm.hf import HFGenerator
    from effirag.train.knowledge import load_known_facts, recall_check

    setup_logging(False)
    gen = HFGenerator(model, device="cpu").load()
    rep = recall_check(gen, load_known_facts(knowledge), limit=limit)
    if as_json:
        emit_json({"n": rep.n, "recall": rep.recall, "misses": rep.misses[:20]})
        return
    console.print(f"known-fact recall without retrieval: {100 * rep.recall:.1f}% of {rep.n}")
    for q, gold, pred in rep.misses[:5]:
        console.print(f"  miss: {q} → {pred!r} (gold {gold!r})", highlight=False)


@app.command("export")
@friendly_errors
def export_cmd(
    checkpoint: Path = typer.Option(..., help="A checkpoint-N folder of an SFT or RL run."),
    to: Path = typer.Option(Path("checkpoints/demo-policy"), help="Destination folder."),
    base: Path | None = typer.Option(
        None, help="A LoRA checkpoint's base model folder (default: the adapter config's base_model_name_or_path)."
    ),
) -> None:
    """Export an intermediate checkpoint (model, tokenizer, loss curve; no optimiser state) as a policy folder; a
    LoRA checkpoint is merged onto its base model."""
    from effirag.train.pipeline import export_checkpoint

    export_checkpoint(checkpoint, to, checkpoint.parent, base)
    console.print(f"exported {checkpoint} → {to}")


app.command("grpo")(grpo)
app.command("ppo")(ppo)
app.command("dpo")(dpo)
app.command("ipdpo")(ipdpo)
