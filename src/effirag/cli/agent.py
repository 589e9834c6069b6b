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
    from effirag.retrieval.rerank import RerankerSpec

DEFAULT_PROTOCOL = "searchr1"  # when neither --protocol nor the checkpoint's inference settings name one
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
    "world.json), llm:BACKEND (HiPRAG's LLM judge through any backend, the policy re-answering), none. Default auto: "
    "world when the questions come from a world, else none."
)
REMOTE_HELP = "URL of `effirag serve retrieval` (http://HOST:PORT) to search through instead of --index."
RAY_HELP = (
    "Spread the question chunks over N Ray actors, each with its own generator and its own --index (or a client of "
    "--retriever); same results as one process. 0: no Ray. Needs the distributed extra."
)
RAY_ADDRESS_HELP = "Ray cluster to join (auto: the local `ray start` one); default: start a local Ray for the run."


def _runtime(
    protocol: str | None,
    backend: str,
    index: Path | None,
    settings: Sequence[str],
    reranker: str | None = None,
    mode: str | None = None,
    inference: str | None = None,
    remote: str | None = None,
    demos: Sequence[Any] = (),
) -> tuple[Any, Any, Any, Any]:
    """(protocol, generator, retriever or None, engine config) from CLI options; bad input fails with one line, and
    so does a protocol paired with a retrieval mode it cannot run over (before any model or index is loaded)."""
    proto, cfg, rerank = _plan(protocol, backend, index, settings, reranker, mode, inference, remote, demos)
    token = os.environ.get("EFFIRAG_TOKEN")  # `effirag serve retrieval`'s token
    gen, retriever = build_components(backend, proto, cfg, index, rerank, remote, token)
    return proto, gen, retriever, cfg


def _plan(
    protocol: str | None,
    backend: str,
    index: Path | None,
    settings: Sequence[str],
    reranker: str | None,
    mode: str | None,
    inference: str | None,
    remote: str | None,
    demos: Sequence[Any] = (),
) -> tuple[Any, Any, RerankerSpec | None]:
    """(protocol, engine config, reranker): the checked settings of a run, nothing loaded yet."""
    from effirag.agent import PROTOCOLS, EngineConfig, get_protocol
    from effirag.agent.run_mode import check_run_mode
    from effirag.config import load_config

    protocol, rerank, sets = resolve_settings(backend, inference, protocol, reranker, [*settings], mode)
    if protocol not in PROTOCOLS:
        fail(f"unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    cfg = load_config(EngineConfig, None, sets)
    proto = get_protocol(protocol).use_demos(demos)
    check_run_mode(proto, cfg.mode)
    if remote is None and proto.mode_choice != "none" and index is None:
        fail(f"--index is required for protocol {protocol!r} (it retrieves)")
    if remote is None and index is not None and not index.is_dir():
        fail(f"index folder not found: {index}")
    return proto, cfg, rerank


def build_components(
    backend: str,
    proto: Any,
    cfg: Any,
    index: Path | None,
    rerank: RerankerSpec | None,
    remote: str | None,
    token: str | None,
) -> tuple[Any, Any]:
    """(generator, retriever or None) of a checked run: a client of ``remote`` (`effirag serve retrieval`, which holds
    the index), else the index loaded here. Module-level, so a Ray actor can build its own from a partial of it."""
    from effirag.llm.factory import make_generator

    if remote is not None:
        from effirag.retrieval.remote import RemoteRetriever

        return make_generator(backend), RemoteRetriever(remote, token=token)
    gen = make_generator(backend)
    retriever = None
    if proto.mode_choice != "none" and index is not None:
        from effirag.retrieval.facade import load_retriever
        from effirag.retrieval.tokens import PolicyTokens

        retriever = load_retriever(index, tokenizer=PolicyTokens(gen), reranker=rerank).load()
        if cfg.mode is not None:  # an index without what the run's mode needs fails here, not at every search
            retriever.require(cfg.passage_mode if cfg.mode == "passage" else cfg.mode)
    return gen, retriever


def _ray_plan(
    actors: int,
    address: str | None,
    protocol: str | None,
    backend: str,
    index: Path | None,
    settings: Sequence[str],
    reranker: str | None,
    mode: str | None,
    inference: str | None,
    remote: str | None,
    demos: Sequence[Any] = (),
) -> tuple[Any, Any, Any, Any]:
    """(protocol, unloaded generator naming the backend, engine config, Ray chunk runner): each actor loads its own
    generator and retriever from the same checked settings (paths made absolute for the actors)."""
    from functools import partial

    from effirag.distributed import import_ray
    from effirag.eval.ray_qa import RayChunkRunner
    from effirag.llm.factory import make_generator

    import_ray()  # fail before loading anything when Ray is missing
    proto, cfg, rerank = _plan(protocol, backend, index, settings, reranker, mode, inference, remote, demos)
    index = None if index is None else index.resolve()
    rerank = None if rerank is None else rerank.absolute()
    token = os.environ.get("EFFIRAG_TOKEN")
    make = partial(build_components, backend, proto, cfg, index, rerank, remote, token)
    runner = RayChunkRunner(make, proto, actors, address=address)
    return proto, make_generator(backend, load=False), cfg, runner


def resolve_settings(
    backend: str, inference: str | None, protocol: str | None, reranker: str | None, sets: list[str], mode: str | None
) -> tuple[str, RerankerSpec | None, list[str]]:
    """(protocol, reranker, engine key=value overrides) from the checkpoint's inference settings under the
    user's options; reports on stderr, in one line, which settings file was used and which keys the user overrode."""
    from effirag.agent.settings import load_settings, overridden, settings_folder
    from effirag.retrieval.rerank import parse_reranker

    source = settings_source(backend, inference)
    found = load_settings(source) if source is not None else None
    user = [*sets, *([f"mode={mode}"] if mode is not None else [])]
    rerank = parse_reranker(reranker, "--reranker")
    if found is None or source is None:
        return protocol or DEFAULT_PROTOCOL, rerank, user
    if reranker is None:
        rerank = found.reranker_spec(settings_folder(source))
    mine = overridden(found, user, protocol=protocol, reranker=reranker)
    shown = " ".join(f"{k}={v}" for k, v in (found.shown() | {"reranker": rerank or "none"}).items())
    err_console.print(
        f"inference settings of {source}: {shown}" + (f"; overridden: {', '.join(mine)}" if mine else ""),
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    return protocol or found.protocol or DEFAULT_PROTOCOL, rerank, [*found.engine_overrides(), *user]


def settings_source(backend: str, inference: str | None) -> Path | None:
    """Where a run's inference settings come from: ``--inference`` (a file or folder; ``none``: nowhere), else the
    checkpoint folder of an ``hf:DIR`` or ``vllm:DIR`` backend, else an openai backend's ``?tokenizer=DIR`` (the
    policy's folder)."""
    from urllib.parse import parse_qs

    if inference is not None:
        if inference.lower() == "none":
            return None
        if not Path(inference).exists():
            fail(f"--inference {inference}: no such file or folder")
        return Path(inference)
    prefix, _, rest = backend.partition(":")
    target, _, query = rest.partition("?")
    if prefix in ("hf", "vllm") and target:
        return Path(target)
    tokenizer = parse_qs(query).get("tokenizer")
    if prefix.startswith("openai") and tokenizer:
        return Path(tokenizer[0])
    return None


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
    proto, gen, retriever, cfg = _runtime(protocol, backend, index, settings, reranker, mode, inference, remote, demos)
    [t] = run_episodes(gen, retriever, proto, [question], cfg)
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
    demos, examples = fewshot.load_demos(prompt_style, demos_file, shots, load_questions(questions).examples, questions)
    if limit:
        examples = examples[:limit]
    runner = None
    if ray_actors < 0:
        fail(f"--ray {ray_actors}: must be >= 0 (0: no Ray)")
    if ray_actors:
        proto, gen, cfg, runner = _ray_plan(
            ray_actors, ray_address, protocol, backend, index, settings, reranker, mode, inference, remote, demos
        )
        retriever = None
    else:
        proto, gen, retriever, cfg = _runtime(
            protocol, backend, index, settings, reranker, mode, inference, remote, demos
        )
    with progress(f"eval qa {proto.name}", len(examples), " questions") as update:
        report, _ = evaluate_qa(
            examples, gen, retriever, proto, cfg, out_dir=out, chunk_size=chunk_size, runner=runner,
            on_progress=lambda done, total, em: update(done, EM=f"{100 * em:.1f}%"),
            judge=_judge(judge, questions, gen),
        )  # fmt: skip
    if as_json:
        emit_json(report)
        return
    over = f" over {cfg.mode}" if cfg.mode is not None else ""
    table = Table(title=f"{proto.name}{over} on {questions} ({report['n']} questions)", show_header=False)
    for key in ("em", "f1", "cover_em", "format_rate", "mean_steps", "retrieval_turns"):
        table.add_row(key, f"{report[key]:.4f}")
    for key, value in report["tokens"].items():
        table.add_row(f"tokens.{key}", f"{value:.2f}")
    for key, value in report["latency_s"].items():
        table.add_row(f"latency_s.{key}", f"{value:.4f}")
    table.add_row("steps_hist", ", ".join(f"{k}: {v}" for k, v in report["steps_hist"].items()))
    for key, value in report.get("oracle", {}).items():
        table.add_row(f"oracle.{key}", f"{value:.4f}" if isinstance(value, float) else str(value))
    for hops, row in report["by_hops"].items():
        table.add_row(f"hops {hops}", f"n={row['n']} em={row['em']:.4f} f1={row['f1']:.4f}")
    console.print(table)
    if out is not None:
        console.print(f"trajectories: {out / 'trajectories.jsonl'}")
        console.print(f"see every step: effirag view {out}", highlight=False, soft_wrap=True)


def _judge(spec: str, questions: Path, policy: Any) -> Any:
    """The step judge ``--judge`` names (see JUDGE_HELP), or None."""
    from effirag.rewards.judges import LLMJudge, WorldJudge
    from effirag.world.world import World

    world = questions.parent / "world.json"
    if spec == "auto":
        spec = "world" if world.is_file() else "none"
    if spec == "none":
        return None
    if spec == "world":
        if not world.is_file():
            fail(f"--judge world: no world.json beside {questions}")
        return WorldJudge(World.load(world))
    if spec.startswith("llm:"):
        from effirag.llm.factory import make_generator

        return LLMJudge(make_generator(spec[4:]), policy=policy)
    fail(f"--judge {spec!r}: expected auto, world, llm:BACKEND or none")
    return None
