"""``effirag ask`` (one question, one trajectory) and ``effirag eval qa`` (a question set, scored and resumable)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from effirag.cli import fewshot
from effirag.cli.common import console, emit_json, err_console, fail, flag, friendly_errors, progress, setup_logging

if TYPE_CHECKING:
    from effirag.env import Env, EnvConfig

PROTOCOL_HELP = (
    "searchr1, routerag, dsr1, hiprag, tearag, reasonrag, zeroshot, naive, single-con, single-ppr. Default: the "
    "checkpoint's inference settings, else searchr1."
)
BACKEND_HELP = "hf:DIR, vllm:DIR, openai:URL#MODEL (or openai-chat:URL#MODEL), scripted:FILE."
SET_HELP = "Engine setting key=value (repeatable), e.g. --set max_steps=4 --set temperature=0.7."
MODE_HELP = (
    "Retrieval mode of every search: passage, sparse, graph, hybrid, kag (or chunks_triplets); default: the "
    "protocol's own (tearag: kag, the others: passage). Not for routerag (its model routes each search) or zeroshot "
    "(never retrieves); single-con and single-ppr take only their own (chunks_triplets, kag)."
)


RERANKER_HELP = (
    "cross-encoder:DIR (any HF cross-encoder folder: reranks every mode), bilinear:DIR or a bare DIR (`effirag train "
    "reranker`: KAG's scorer), none (the index's bi-encoder cosines). Default: the checkpoint's inference settings, "
    "else none."
)
INFERENCE_HELP = (
    "Inference settings file or checkpoint folder (its inference.yaml); default: the hf:DIR (vllm:DIR) backend's "
    "folder (or an openai backend's ?tokenizer=DIR); none: ignore them. --protocol, --reranker, --mode and --set win "
    "over it."
)
JUDGE_HELP = (
    "Over- / under-search judge of every step: world (exact, EffiRAG-World: the questions file's folder holds "
    "world.json), llm:BACKEND (HiPRAG's LLM judge through any backend, the policy re-answering), closed-book (the "
    "policy's re-answer vs the step's conclusion, token F1 >= 0.5; over-search only), none. Default auto: "
    "world when the questions come from a world, else none."
)
REMOTE_HELP = "URL of `effirag serve retrieval` (http://HOST:PORT) to search through instead of --index."
RAY_HELP = (
    "Spread the question chunks over N Ray actors, each with its own generator and its own --index (or a client of "
    "--retriever); same results as one process. 0: no Ray. Needs the distributed extra."
)
RAY_ADDRESS_HELP = "Ray cluster to join (auto: the local `ray start` one); default: start a local Ray for the run."


def env_config(
    protocol: str | None,
    backend: str,
    index: Path | None,
    settings: Sequence[str],
    reranker: str | None = None,
    mode: str | None = None,
    inference: str | None = None,
    remote: str | None = None,
    judge: str = "none",
    questions: Path | None = None,
) -> EnvConfig:
    """The :class:`~effirag.env.EnvConfig` the command's flags fill, over the policy's inference settings (``auto``
    unless ``--inference`` names a file or folder, or ``none``); reports on stderr, in one line, which settings file
    was used and which of its keys the flags overrode."""
    from effirag.config import from_dict, parse_overrides
    from effirag.env import EnvConfig, with_settings

    if inference is not None and inference.lower() != "none" and not Path(inference).exists():
        fail(f"--inference {inference}: no such file or folder")
    if judge == "world":  # the world the questions come from: world.json beside the questions file
        folder = Path(".") if questions is None else questions.parent
        if not (folder / "world.json").is_file():
            fail(f"--judge world: no world.json beside {questions}")
        judge = f"world:{folder}"
    data: dict[str, Any] = {"model": backend, "inference": "auto" if inference is None else inference}
    data.update(index=str(index or ""), retriever=remote or "", judge=judge, questions=str(questions or ""))
    data["engine"] = parse_overrides([*settings, *([f"mode={mode}"] if mode is not None else [])])
    data.update({k: v for k, v in (("protocol", protocol), ("reranker", reranker)) if v is not None})
    merged, used = with_settings(data)
    if used.settings is not None:
        shown = used.settings.shown() | {"reranker": merged.get("reranker") or "none"}
        mine = f"; overridden: {', '.join(used.overridden)}" if used.overridden else ""
        text = " ".join(f"{k}={v}" for k, v in shown.items())
        err_console.print(
            f"inference settings of {used.source}: {text}{mine}", highlight=False, soft_wrap=True, markup=False
        )
    return from_dict(EnvConfig, merged, source="the command's options")


def _runtime(cfg: EnvConfig, demos: Sequence[Any] = ()) -> Env:
    """The built environment of the flags' config (policy generator loaded), the demos in the protocol's prompt; a
    protocol paired with a retrieval mode it cannot run over fails before any model or index is loaded."""
    from effirag.env import build_env

    env = build_env(cfg)
    env.protocol = env.protocol.use_demos(demos)
    return env


def _ray_plan(cfg: EnvConfig, actors: int, address: str | None, demos: Sequence[Any] = ()) -> tuple[Env, Any]:
    """(environment with an unloaded generator naming the backend and no retriever, Ray chunk runner): each actor
    loads its own generator and retriever from the same checked config (paths made absolute for the actors)."""
    from functools import partial

    from effirag.distributed import import_ray
    from effirag.env import build_env, policy_and_retriever
    from effirag.eval.ray_qa import RayChunkRunner

    import_ray()  # fail before loading anything when Ray is missing
    env = build_env(cfg, with_retriever=False, load_policy=False)
    env.protocol = env.protocol.use_demos(demos)
    make = partial(policy_and_retriever, cfg.absolute(), os.environ.get("EFFIRAG_TOKEN"))
    return env, RayChunkRunner(make, env.protocol, actors, address=address)


def trajectory_json(t: Any) -> dict[str, Any]:
    """The ``ask --json`` document of one trajectory."""
    steps = [
        {
            "action": s.action.value,
            "query": s.query,
            "mode": s.mode,
            "items": [{"id": i.id, "kind": i.kind.value, "text": i.text, "score": float(i.score)} for i in s.items],
            "generated_tokens": s.generated_tokens,
            "inserted_tokens": s.inserted_tokens,
        }
        for s in t.steps
    ]
    return {
        "question": t.question,
        "prediction": t.prediction,
        "format_ok": t.format_ok,
        "steps": steps,
        "totals": t.totals(),
    }


def print_steps(t: Any) -> None:
    """One panel per step; long queries and retrieved texts wrap inside the panel instead of being cut."""
    for n, s in enumerate(t.steps, start=1):
        lines = [escape(f"query={s.query!r} mode={s.mode}")] if s.query else []
        lines.append(escape(s.text or "(retrieved before the first turn)"))
        lines += [escape(f"  [{i.kind.value}] {i.id} ({i.score:.3f}) {i.text}") for i in s.items]
        if s.error:
            lines.append(f"  [red]{escape(s.error)}[/]")
        sub = f"generated {s.generated_tokens} tok, inserted {s.inserted_tokens} tok"
        title = f"step {n}: [bold]{s.action.value}[/]"
        console.print(Panel("\n".join(lines), title=title, subtitle=sub, title_align="left", highlight=False))


@friendly_errors
def ask(
    question: str = typer.Argument(..., help="The question to answer."),
    protocol: str | None = typer.Option(None, "--protocol", "-p", help=PROTOCOL_HELP),
    backend: str = typer.Option(..., "--backend", "-b", help=BACKEND_HELP),
    index: Path | None = typer.Option(None, "--index", "-i", help="Index folder (from `effirag index build`)."),
    mode: str | None = typer.Option(None, "--mode", "-m", help=MODE_HELP),
    settings: list[str] = typer.Option([], "--set", help=SET_HELP),
    reranker: str | None = typer.Option(None, "--reranker", help=RERANKER_HELP),
    inference: str | None = typer.Option(None, "--inference", help=INFERENCE_HELP),
    remote: str | None = typer.Option(None, "--retriever", help=REMOTE_HELP),
    prompt_style: str = fewshot.style_option(),
    demos_file: Path | None = fewshot.demos_option(),
    shots: int = fewshot.shots_option(),
    as_json: bool = flag("--json", help="Print the trajectory as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """Answer one question with an agent protocol and print its trajectory."""
    from effirag.agent import run_episodes
    from effirag.agent.protocols.fewshot import check_disjoint

    setup_logging(verbose)
    demos, _ = fewshot.load_demos(prompt_style, demos_file, shots, [])
    check_disjoint(demos, [question])
    env = _runtime(env_config(protocol, backend, index, settings, reranker, mode, inference, remote), demos)
    [t] = run_episodes(env.policy, env.retriever, env.protocol, [question], env.engine)
    if as_json:
        emit_json(trajectory_json(t))
        return
    print_steps(t)
    tot = t.totals()
    console.print(
        f"[bold]prediction:[/] {escape(repr(t.prediction))}  format_ok={t.format_ok}  steps={tot['steps']} "
        f"searches={tot['searches']} generated={tot['generated_tokens']} inserted={tot['inserted_tokens']} "
        f"retrieval={tot['retrieval_s']:.3f}s generation={tot['generation_s']:.3f}s"
    )


@friendly_errors
def eval_qa(
    questions: Path = typer.Option(..., "--questions", "-q", help="Question file (layout auto-detected)."),
    index: Path | None = typer.Option(None, "--index", "-i", help="Index folder (from `effirag index build`)."),
    protocol: str | None = typer.Option(None, "--protocol", "-p", help=PROTOCOL_HELP),
    backend: str = typer.Option(..., "--backend", "-b", help=BACKEND_HELP),
    limit: int = typer.Option(0, "--limit", help="Evaluate only the first N questions (0 = all)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Folder for trajectories.jsonl; re-running resumes."),
    chunk_size: int = typer.Option(32, "--chunk-size", help="Questions per batched engine call (and per save)."),
    mode: str | None = typer.Option(None, "--mode", "-m", help=MODE_HELP),
    settings: list[str] = typer.Option([], "--set", help=SET_HELP),
    reranker: str | None = typer.Option(None, "--reranker", help=RERANKER_HELP),
    inference: str | None = typer.Option(None, "--inference", help=INFERENCE_HELP),
    remote: str | None = typer.Option(None, "--retriever", help=REMOTE_HELP),
    ray_actors: int = typer.Option(0, "--ray", help=RAY_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    judge: str = typer.Option("auto", "--judge", help=JUDGE_HELP),
    prompt_style: str = fewshot.style_option(),
    demos_file: Path | None = fewshot.demos_option(),
    shots: int = fewshot.shots_option(),
    as_json: bool = flag("--json", help="Print the report as JSON."),
    verbose: bool = flag("--verbose", "-v", help="Log details."),
) -> None:
    """Run a protocol over a question set: EM, F1, cover-EM, format rate, steps, tokens and latency."""
    from effirag.data import load_questions
    from effirag.eval.qa import evaluate_qa

    setup_logging(verbose)
    if limit < 0:
        fail(f"--limit {limit}: must be >= 0")
    if ray_actors < 0:
        fail(f"--ray {ray_actors}: must be >= 0 (0: no Ray)")
    cfg = env_config(protocol, backend, index, settings, reranker, mode, inference, remote, judge, questions)
    demos, examples = fewshot.load_demos(prompt_style, demos_file, shots, load_questions(questions).examples, questions)
    if limit:
        examples = examples[:limit]
    runner = None
    if ray_actors:
        env, runner = _ray_plan(cfg, ray_actors, ray_address, demos)
    else:
        env = _runtime(cfg, demos)
    proto = env.protocol
    with progress(f"eval qa {proto.name}", len(examples), " questions") as update:
        report, _ = evaluate_qa(
            examples, env.policy, env.retriever, proto, env.engine, out_dir=out, chunk_size=chunk_size,
            runner=runner, on_progress=lambda done, total, em: update(done, EM=f"{100 * em:.1f}%"), judge=env.judge,
        )  # fmt: skip
    if as_json:
        emit_json(report)
        return
    over = f" over {env.engine.mode}" if env.engine.mode is not None else ""
    table = Table(title=f"{proto.name}{over} on {questions} ({report['n']} questions)", show_header=False)
    for key in ("em", "f1", "cover_em", "format_rate", "mean_steps", "retrieval_turns"):
        table.add_row(key, f"{report[key]:.4f}")
    for key, value in report["tokens"].items():
        table.add_row(f"tokens.{key}", f"{value:.2f}")
    for key, value in report["latency_s"].items():
        table.add_row(f"latency_s.{key}", f"{value:.4f}")
    table.add_row("steps_hist", ", ".join(f"{k}: {v}" for k, v in report["steps_hist"].items()))
    table.add_row("ends", ", ".join(f"{k}: {v}" for k, v in report["ends"].items()))
    for key, value in report.get("oracle", {}).items():
        table.add_row(f"oracle.{key}", f"{value:.4f}" if isinstance(value, float) else str(value))
    for hops, row in report["by_hops"].items():
        table.add_row(f"hops {hops}", f"n={row['n']} em={row['em']:.4f} f1={row['f1']:.4f}")
    console.print(table)
    if out is not None:
        console.print(f"trajectories: {out / 'trajectories.jsonl'}")
        console.print(f"see every step: effirag view {out}", highlight=False, soft_wrap=True)
