"""``effirag demo``: the main job on the embedded defaults (what `make demo` runs).

Stages, each printing results computed now: (0) statistics of the shared real data; (1) the demo world
(``--preset demo --seed 0``, generated or reused); (2) its retrieval index (BM25 + MiniLM dense + knowledge graph);
(3) the embedded policy ``checkpoints/demo-policy`` loaded through the ordinary HF backend (``--backend vllm``: vLLM's
engine, in .venv-vllm), and the KAG reranker
``checkpoints/demo-reranker`` (``effirag train reranker``); (4) a few test questions answered with their trajectories
shown; (5) the test split evaluated with TeaRAG (KAG retrieval) and Search-R1 (dense passages), metrics table;
(6) known-fact recall without retrieval; then the HTML viewer of stage 5's run (``effirag view``) and its path.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from effirag.cli.common import console, err_console, fail, flag, friendly_errors, progress, stage
from effirag.cli.demo_backend import demo_backend, describe_checkpoint
from effirag.cli.demo_show import data_stats as _data_stats
from effirag.cli.demo_show import print_trajectory as _print_trajectory

DEMO_PROTOCOLS = (("tearag", "TeaRAG+KAG"), ("searchr1", "Search-R1"))
# Encoding the world's 3,000 passages is most of the index build on a shared 2-core CPU; the demo world is
# deterministic, so its passage embeddings ship with the code (float32, exactly what the build writes)
SHIPPED_EMBEDDINGS = Path("checkpoints/demo-embeddings")
# the demo's settings for a checkpoint without inference.yaml (the values the embedded policy was measured with;
# checkpoints/demo-policy/inference.yaml states the same); the reranker is then relative to the working directory
FALLBACK = {
    "protocol": "tearag",
    "reranker": "checkpoints/demo-reranker",
    "k": 1,
    "max_steps": 8,
    "max_new_tokens": 96,
    "max_total_tokens": 3072,
    "max_inserted_tokens": 160,
    "frequency_penalty": 0.3,
}


@friendly_errors
def demo(
    data: Path = typer.Option(Path("../shared/data"), help="Folder of the shared real benchmark data."),
    work: Path = typer.Option(Path("runs/demo"), help="Working folder: the demo world and its index."),
    model: Path = typer.Option(Path("checkpoints/demo-policy"), help="Policy checkpoint (HF folder)."),
    backend: str = typer.Option(
        "hf",
        "--backend",
        "-b",
        help="Backend running the policy: hf (on the CPU), vllm (vLLM's engine, eager, float32: needs .venv-vllm, "
        "`make vllm-venv`), or hf?OPTIONS / vllm?OPTIONS (the options of `eval qa --backend`, e.g. "
        "vllm?dtype=bfloat16).",
    ),
    limit: int = typer.Option(
        20, help="Test questions evaluated per protocol (the split has 300; 0 = all; 20 keeps `make demo` short)."
    ),
    show: int = typer.Option(3, help="Test questions whose trajectories are printed."),
    k: int | None = typer.Option(None, help="Items per retrieval (default: the checkpoint's inference settings)."),
    reranker: str | None = typer.Option(
        None,
        help="KAG reranker folder (`effirag train reranker`); 'none': cosine similarity (default: the checkpoint's "
        "inference settings).",
    ),
    frequency_penalty: float | None = typer.Option(
        None,
        help="Per-turn frequency penalty on the policy's own tokens (OpenAI's; breaks repetition loops; default: the "
        "checkpoint's inference settings).",
    ),
    skip_stats: bool = flag("--skip-stats", help="Skip the shared-data statistics stage."),
    threads: int = typer.Option(
        1,
        help="torch threads of the policy (1: a 5M-parameter policy gains nothing from a second thread, which on a "
        "shared CPU waits for the first at every step; 0: torch's default).",
    ),
    embeddings: Path = typer.Option(
        SHIPPED_EMBEDDINGS,
        help="The demo world's passage embeddings (embeddings.npy + embeddings.json), reused by the index build when "
        "their key (encoder, prefix, checksum of every passage text) matches this world; otherwise it encodes.",
    ),
    out: Path | None = typer.Option(
        None,
        help="Folder for each protocol's trajectories (OUT/<protocol>/trajectories.jsonl), the report and its viewer "
        "(OUT/report.html); default: the trajectories and viewer in WORK/last-run (replaced each run), the report in "
        "WORK.",
    ),
) -> None:
    """Run the main job: world → index → embedded policy → trajectories → metrics of TeaRAG and Search-R1."""
    from effirag.agent.config import EngineConfig
    from effirag.agent.protocols import get_protocol
    from effirag.data import load_corpus, load_questions

    spec = demo_backend(backend, model)
    settings, rerank = _settings(model, k, reranker, frequency_penalty)
    _set_threads(threads)
    t_start = time.perf_counter()
    # vLLM starts before the BM25 library (numba, llvmlite) is imported by the index stage
    early = _start_vllm(spec) if spec.startswith("vllm:") else None
    if not skip_stats and (data / "musique_mini").is_dir():
        _data_stats(data)
    world = _world(work / "world")
    index = _index(world, work / "index", embeddings)
    with stage("loading the policy and the retriever"):
        gen, retriever = _policy(spec, model, world, index, rerank, settings, early)
    test = load_questions(world / "questions_test.jsonl", load_corpus(world / "corpus.jsonl")).examples
    engine = EngineConfig(**settings.engine_values())

    _show_some(test, show, gen, retriever, get_protocol(settings.protocol or "tearag"), engine)

    # (5) evaluation of the test split
    chosen = test[:limit] if limit else test
    runs = out or _fresh(work / "last-run")  # the run the viewer shows; without --out a fresh folder each time
    reports = _evaluate(chosen, len(test), gen, retriever, engine, runs, _judge(world))

    # (6) parametric knowledge
    recall = _known_fact_recall(gen, world)
    summary = {"eval": reports, "recall": recall, "limit": len(chosen), "backend": spec}
    _write_outputs((out or work) / "demo_report.json", summary, runs, t_start)


def _show_some(test: list[Any], show: int, gen: Any, retriever: Any, protocol: Any, engine: Any) -> None:
    """Stage 4: the trajectories of the first ``show`` of one test question per hop count."""
    from effirag.eval.qa import evaluate_qa

    picked: list[Any] = []
    for hops in (1, 2, 3, 4):
        picked += [e for e in test if e.hops == hops][:1]
    with stage(f"answering {len(picked[:show])} questions"):
        _, trajs = evaluate_qa(picked[:show], gen, retriever, protocol, engine)
    for ex, t in zip(picked, trajs, strict=False):
        _print_trajectory(ex, t)


def _write_outputs(report: Path, summary: dict[str, Any], runs: Path, t_start: float) -> None:
    """The demo's report (JSON) and the HTML viewer of the evaluated run, and their paths printed."""
    from effirag.view import write_report

    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(summary, indent=1), "utf-8")
    console.print(f"report: {report}   total time: {time.perf_counter() - t_start:.0f} s")
    console.print(f"viewer: {write_report(runs, runs / 'report.html').html}", highlight=False, soft_wrap=True)


def _set_threads(threads: int) -> None:
    if threads < 0:
        fail(f"--threads {threads}: must be >= 0")
    if threads:
        import torch

        torch.set_num_threads(threads)


def _fresh(folder: Path) -> Path:
    """``folder`` emptied: a run folder there would otherwise be resumed."""
    import shutil

    if folder.exists():
        shutil.rmtree(folder)
    return folder


def _judge(world: Path) -> Any:
    """The world oracle: every search step of the evaluation gets an over-search verdict for the viewer."""
    from effirag.env import EnvConfig, make_judge

    return make_judge(EnvConfig(judge=f"world:{world}"), None)


def _settings(model: Path, k: int | None, reranker: str | None, penalty: float | None) -> tuple[Any, Any]:
    """The checkpoint's inference settings (FALLBACK without inference.yaml) under the user's options, and the
    reranker folder; reports on stderr which settings file was used."""
    import dataclasses

    from effirag.agent.settings import InferenceSettings, load_settings
    from effirag.retrieval.rerank import parse_reranker

    found = load_settings(model)
    base = found or InferenceSettings(**FALLBACK)  # type: ignore[arg-type]
    mine: dict[str, Any] = {key: v for key, v in (("k", k), ("frequency_penalty", penalty)) if v is not None}
    settings = dataclasses.replace(base, **mine)
    if reranker is not None:
        rerank = parse_reranker(reranker, "--reranker")
    else:
        rerank = base.reranker_spec(model) if found is not None else parse_reranker(FALLBACK["reranker"])  # type: ignore[arg-type]
    origin = f"inference settings of {model}" if found is not None else f"no inference settings in {model}: demo's own"
    shown = " ".join(f"{key}={v}" for key, v in (settings.shown() | {"reranker": rerank or "none"}).items())
    overridden = [*mine, *(["reranker"] if reranker is not None else [])]
    err_console.print(
        f"{origin}: {shown}" + (f"; overridden: {', '.join(overridden)}" if overridden else ""),
        highlight=False, soft_wrap=True, markup=False,
    )  # fmt: skip
    return settings, rerank


def _start_vllm(spec: str) -> Any:
    """The policy's vLLM engine, started now (``demo`` says why)."""
    from effirag.llm.factory import make_generator

    with stage(f"starting vLLM ({spec})"):
        return make_generator(spec)


def _policy(
    spec: str, model: Path, world: Path, index: Path, rerank: Any, settings: Any, gen: Any = None
) -> tuple[Any, Any]:
    """Stage 3: the embedded policy through the backend ``spec`` (HF by default; ``gen``: that backend's generator,
    already loaded), and the retriever with the KAG reranker (the environment of :func:`effirag.env.build_env`)."""
    from effirag.env import EnvConfig, build_env

    _check_world(model, world)
    protocol = settings.protocol or "tearag"
    cfg = EnvConfig(model=spec, index=str(index), reranker=str(rerank or ""), protocol=protocol)
    env = build_env(cfg, tokens=gen)  # the retriever counts tokens with the policy's tokenizer
    gen = gen if gen is not None else env.policy
    retriever = env.retriever
    on = "" if spec.startswith("hf:") else f" on {spec}"
    console.print(f"[bold]policy[/] {model}: {describe_checkpoint(model)}{on}", highlight=False)
    console.print(
        f"[bold]KAG reranker[/] {rerank or 'none (cosine)'}; items per retrieval: {settings.k}; "
        f"frequency penalty: {settings.frequency_penalty}"
    )
    return gen, retriever


def _evaluate(
    chosen: list[Any], n_test: int, gen: Any, retriever: Any, engine: Any, out: Path, judge: Any
) -> dict[str, Any]:
    """Stage 5: each demo protocol over the chosen test questions; the metrics table and EM by question type."""
    from effirag.agent.protocols import get_protocol
    from effirag.eval.qa import evaluate_qa

    # short headers and one space between columns: `make demo` output is often 80 columns wide, and the whole table
    # then fits without folding a cell (tokens are per question; ins/ret per retrieval)
    table = Table(
        title=f"Demo world test split ({len(chosen)} of {n_test} questions), embedded policy",
        collapse_padding=True,
        pad_edge=False,
    )
    cols = ("protocol", "EM", "F1", "cEM", "fmt", "steps", "gen", "ins", "ins/ret", "EM 1/2/3/4-hop")
    for col in cols:
        table.add_column(col, overflow="fold")  # a narrow terminal folds a cell rather than cutting it to "…"
    reports: dict[str, Any] = {}
    for name, label in DEMO_PROTOCOLS:
        t0 = time.perf_counter()
        with progress(f"{label} evaluation", len(chosen), " questions") as update:
            rep, _ = evaluate_qa(
                chosen, gen, retriever, get_protocol(name), engine, out_dir=out / name, judge=judge,
                on_progress=lambda done, total, em: update(done, EM=f"{100 * em:.1f}%"),
            )  # fmt: skip
        rep["seconds"] = time.perf_counter() - t0
        reports[name] = rep
        table.add_row(label, *_row(rep))
    console.print(table)
    for name, label in DEMO_PROTOCOLS:
        types = reports[name]["by_type"]
        console.print(
            f"{label} EM by question type: "
            + ", ".join(f"{g} {100 * r['em']:.0f}% (n {r['n']})" for g, r in types.items()),
            highlight=False,
        )
    return reports


def _row(rep: dict[str, Any]) -> list[str]:
    """One protocol's cells of the metrics table (percentages to one decimal, token means rounded)."""
    by = rep["by_hops"]
    return [
        f"{100 * rep['em']:.1f}",
        f"{100 * rep['f1']:.1f}",
        f"{100 * rep['cover_em']:.1f}",
        f"{100 * rep['format_rate']:.1f}",
        f"{rep['mean_steps']:.2f}",
        f"{rep['tokens']['generated']:.0f}",
        f"{rep['tokens']['inserted']:.0f}",
        f"{rep['tokens']['per_retrieval']:.0f}",
        "/".join(f"{100 * by[h]['em']:.0f}" if h in by else "-" for h in ("1", "2", "3", "4")),
    ]


def _known_fact_recall(gen: Any, world: Path) -> float:
    """Stage 6: how many known facts of the world the policy recalls without retrieval."""
    from effirag.train.knowledge import load_known_facts, recall_check

    facts = load_known_facts(world / "knowledge.jsonl")
    # every n-th fact, not the first 100: knowledge.jsonl is in entity order and the world makes countries, cities and
    # companies first, so its first few hundred facts are four relations of those and would not sample the rest
    stride = max(1, len(facts) // 100)
    with stage("known-fact recall without retrieval"):
        rec = recall_check(gen, facts[::stride], limit=100)
    console.print(
        f"known-fact recall without retrieval: {100 * rec.recall:.1f}% of {rec.n} known facts "
        f"(every {stride}th of {len(facts)})"
    )
    return float(rec.recall)


def _world(folder: Path) -> Path:
    if (folder / "world.json").is_file():
        console.print(f"[bold]world[/] reusing {folder}")
        return folder
    from effirag.world import generate_world, load_world_config

    t0 = time.perf_counter()
    s = generate_world(load_world_config("demo", seed=0), folder)
    console.print(
        f"[bold]world[/] generated {folder} (preset demo, seed 0): {s['passages']} passages, {s['triplets']} "
        f"triplets, {s['known_facts']} known facts, {time.perf_counter() - t0:.1f} s"
    )
    return folder


def _index(world: Path, folder: Path, shipped: Path) -> Path:
    if (folder / "manifest.json").is_file():
        console.print(f"[bold]index[/] reusing {folder}")
        return folder
    from effirag.cli.index import load_triplets
    from effirag.data import load_corpus
    from effirag.retrieval.encoders import EncoderConfig, SentenceTransformerEncoder
    from effirag.retrieval.index import build_index

    t0 = time.perf_counter()
    corpus = load_corpus(world / "corpus.jsonl")
    trips = load_triplets(corpus, None, world / "triplets.jsonl")
    enc = SentenceTransformerEncoder(EncoderConfig())
    _seed_embeddings(shipped, folder / "dense", enc, corpus.passages)
    build_index(  # the demo's own work folder: replaced when it holds another world's index
        corpus.passages,
        folder,
        encoder=enc,
        triplets=trips,
        corpus_path=str(world / "corpus.jsonl"),
        show_progress=True,
        replace=True,
    )
    console.print(
        f"[bold]index[/] built {folder} in {time.perf_counter() - t0:.0f} s (BM25, MiniLM dense on {enc.backend}, KG)"
    )
    return folder


def _seed_embeddings(shipped: Path, dense: Path, enc: Any, passages: Any) -> None:
    """Put the shipped passage embeddings where the index build looks for cached ones, when their key is this world's
    with this encoder; the build then reuses them instead of encoding (and the manifest records their SHA-256)."""
    from effirag.retrieval.dense import EMBEDDINGS_FILE, EMBEDDINGS_META, cache_key
    from effirag.retrieval.index import file_sha256, passage_text

    meta = shipped / EMBEDDINGS_META
    if not (shipped / EMBEDDINGS_FILE).is_file() or not meta.is_file():
        console.print(f"[bold]index[/] no shipped passage embeddings in {shipped}: encoding the passages")
        return
    key = json.loads(meta.read_text("utf-8")).get("key")
    if key != cache_key(enc.load(), [passage_text(p) for p in passages]):
        console.print(f"[bold]index[/] {shipped} holds another world's or encoder's embeddings: encoding the passages")
        return
    import shutil

    dense.mkdir(parents=True, exist_ok=True)
    for name in (EMBEDDINGS_FILE, EMBEDDINGS_META):
        shutil.copyfile(shipped / name, dense / name)
    digest = file_sha256(dense / EMBEDDINGS_FILE)[:12]
    line = f"passage embeddings from {escape(str(shipped))} (key matches this world; sha256 {digest}…)"
    console.print(f"[bold]index[/] {line}", highlight=False, soft_wrap=True)  # one line: the path stays copyable


def _check_world(model: Path, world: Path) -> None:
    """Warn when the world differs from the one the policy was trained on (its known facts would differ)."""
    rec = model / "pipeline_report.json"
    if not rec.is_file():
        return
    want = json.loads(rec.read_text("utf-8")).get("world_sha256")
    have = hashlib.sha256((world / "knowledge.jsonl").read_bytes()).hexdigest()
    if want and want != have:
        console.print("[yellow]warning:[/] this world's knowledge.jsonl differs from the policy's training world")
