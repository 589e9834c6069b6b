"""QA evaluation: run a protocol over a question set, score every trajectory, aggregate, and resume safely.

Scores are EM, token F1 and cover-EM (:mod:`effirag.metrics`, SQuAD normalisation, max over gold + aliases) of each
trajectory's prediction (no prediction scores 0), averaged over all trajectories (questions × samples). Efficiency
figures are means per trajectory: steps, retrieval turns (searches + ``<more info>``), generated / inserted / total
tokens, generated tokens split into reasoning / answer / summary by the protocol's format
(:mod:`effirag.eval.annotate`), and seconds of retrieval, of its KAG+PPR stage (timing key ``kag_ppr``) and of
generation; tokens per retrieval is the total of inserted tokens over the total of retrieval turns. Given a judge
(e.g. the world oracle), the report adds over- and under-search rates (``oracle``: OSR, USR and the step counts they
are over).

Run folder: ``OUT/trajectories.jsonl`` (each step with its token ledger and oracle verdict in ``extras``),
``OUT/run.json`` (settings), ``OUT/questions.jsonl`` (the questions with their gold answers, FlashRAG layout) and
``OUT/report.json`` — what ``effirag view`` reads.

Resume: trajectories are appended to ``OUT/trajectories.jsonl`` chunk by chunk (a chunk is a fixed slice of the question
list, so its seed is the same whether or not the run was interrupted); a re-run with the same ``OUT`` skips questions
whose samples are all on disk, drops a torn last line, and refuses a different protocol, backend or engine config,
the run's retrieval mode included (``OUT/run.json``). The report therefore equals that of an uninterrupted run
(latencies aside, which are measured).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from effirag.agent.config import EngineConfig
from effirag.agent.engine import run_episodes
from effirag.agent.protocols.base import AgentProtocol
from effirag.data.writers import write_flashrag_questions
from effirag.errors import ConfigError, DataError
from effirag.eval.annotate import annotate_oracle, annotate_tokens, oracle_rates, split_totals
from effirag.llm.base import Generator
from effirag.metrics import cover_exact_match, exact_match, f1_score
from effirag.retrieval.base import Retriever
from effirag.rewards.judges import Judge
from effirag.types import QAExample, Trajectory

log = logging.getLogger(__name__)

TRAJECTORIES = "trajectories.jsonl"
RUN_FILE = "run.json"
QUESTIONS = "questions.jsonl"
REPORT = "report.json"
CHUNK_SEED_STRIDE = 1_000_003  # chunk i samples with seeds seed + i * stride + round (disjoint across chunks)


ChunkJob = tuple[int, list[QAExample], EngineConfig]
"""One batched engine call of :func:`evaluate_qa`: (chunk number, its unfinished questions, the engine config with
the chunk's seed)."""


class ChunkRunner(Protocol):
    """Runs :data:`ChunkJob` s and yields ``(chunk number, trajectories)`` as each finishes, in any order (each chunk's
    seed is fixed by its number, so where a chunk runs does not change its episodes)."""

    def run(self, jobs: Sequence[ChunkJob]) -> Iterable[tuple[int, list[Trajectory]]]: ...


class LocalChunkRunner:
    """Runs the chunks here, one after the other, with one generator and retriever."""

    def __init__(self, generator: Generator, retriever: Retriever | None, protocol: AgentProtocol) -> None:
        self.generator, self.retriever, self.protocol = generator, retriever, protocol

    def run(self, jobs: Sequence[ChunkJob]) -> Iterator[tuple[int, list[Trajectory]]]:
        for c, chunk, cfg in jobs:
            trajs = run_episodes(self.generator, self.retriever, self.protocol, chunk, cfg)
            annotate_tokens(trajs, self.protocol, self.generator.count_tokens)
            yield c, trajs


def evaluate_qa(
    examples: Sequence[QAExample],
    generator: Generator,
    retriever: Retriever | None,
    protocol: AgentProtocol,
    config: EngineConfig | None = None,
    *,
    out_dir: str | Path | None = None,
    chunk_size: int = 32,
    on_chunk: Callable[[int, int], None] | None = None,
    on_progress: Callable[[int, int, float], None] | None = None,
    runner: ChunkRunner | None = None,
    judge: Judge | None = None,
) -> tuple[dict[str, Any], list[Trajectory]]:
    """Evaluate ``protocol`` on ``examples``; return (report, trajectories in question then sample order).

    ``chunk_size`` questions are run as one batched engine call; ``on_chunk(done, total)`` reports progress after
    each chunk (``done``: questions finished so far, resumed ones included), and ``on_progress(done, total, em)`` too
    with the running EM (mean over the trajectories of the finished questions). ``runner`` runs the chunks elsewhere
    (e.g. :class:`effirag.eval.ray_qa.RayChunkRunner` on Ray actors, each with its own generator and retriever);
    ``generator`` then only names the backend in ``run.json`` (it need not be loaded) and ``retriever`` is unused.
    Every chunk's seed depends on its number only, so the report and trajectories are the same however the chunks
    are spread.
    ``judge`` gives every search / reasoning step an over- / under-search verdict and the report its rates; every
    step gets its token ledger (reasoning / answer / summary / inserted) from the chunk runner.
    """
    cfg = config or EngineConfig()
    if chunk_size < 1:
        raise ConfigError("evaluate_qa", "chunk_size", chunk_size, "must be >= 1")
    ids = [e.id for e in examples]
    if len(set(ids)) != len(ids):
        dup = next(i for i, c in Counter(ids).items() if c > 1)
        raise DataError("duplicate question id", field="id", value=dup)
    done: dict[str, list[Trajectory]] = {}
    traj_path: Path | None = None
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        _check_run_file(out / RUN_FILE, {"protocol": protocol.name, "backend": generator.name, **_engine_dict(cfg)})
        traj_path = out / TRAJECTORIES
        done = _load_finished(traj_path, cfg.n)
    jobs: list[ChunkJob] = []
    for c, start in enumerate(range(0, len(examples), chunk_size)):
        chunk = [e for e in examples[start : start + chunk_size] if e.id not in done]
        if chunk:
            seed = None if cfg.seed is None else cfg.seed + c * CHUNK_SEED_STRIDE
            jobs.append((c, chunk, dataclasses.replace(cfg, seed=seed)))

    def report_progress() -> None:
        n_done = sum(e.id in done for e in examples)
        if on_chunk is not None:
            on_chunk(n_done, len(examples))
        if on_progress is not None:
            on_progress(n_done, len(examples), _running_em(examples, done))

    if done:
        report_progress()  # what a resumed run already has
    for _, trajs in (runner or LocalChunkRunner(generator, retriever, protocol)).run(jobs):
        if judge is not None:
            annotate_oracle(trajs, judge)
        for t in trajs:
            done.setdefault(t.question_id, []).append(t)
        if traj_path is not None:
            _append(traj_path, trajs)
        report_progress()
    ordered = [t for e in examples for t in sorted(done[e.id], key=lambda t: t.sample_index)]
    if judge is not None:  # resumed trajectories written without a verdict
        annotate_oracle([t for t in ordered if not any("oracle" in s.extras for s in t.steps)], judge)
    report = score(examples, ordered)
    if out_dir is not None:
        write_flashrag_questions(Path(out_dir) / QUESTIONS, examples)
        (Path(out_dir) / REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report, ordered


def _running_em(examples: Sequence[QAExample], done: dict[str, list[Trajectory]]) -> float:
    hits = [exact_match(t.prediction or "", e.answers) for e in examples for t in done.get(e.id, [])]
    return sum(hits) / len(hits) if hits else 0.0


def score(examples: Sequence[QAExample], trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """The report of :func:`evaluate_qa` from finished trajectories (pure: no I/O)."""
    by_id = {e.id: e for e in examples}
    rows = [(by_id[t.question_id], t) for t in trajectories]
    report = _aggregate(rows)
    report["n"] = len(examples)
    hops: dict[str, list[tuple[QAExample, Trajectory]]] = {}
    for e, t in rows:
        hops.setdefault(str(e.hops) if e.hops is not None else "unknown", []).append((e, t))
    report["by_hops"] = _groups(hops)
    # hop count and question type together: a comparison question's answer is one of two names the question gives,
    # so its hits can be guesses, and a 2-hop EM means little until compositional and comparison are told apart
    types: dict[str, list[tuple[QAExample, Trajectory]]] = {}
    for e, t in rows:
        types.setdefault(f"{e.hops if e.hops is not None else '?'}-hop {e.qtype or 'unknown'}", []).append((e, t))
    report["by_type"] = _groups(types)
    rates = oracle_rates(trajectories)
    if rates is not None:
        report["oracle"] = rates
    return report


def _groups(groups: dict[str, list[tuple[QAExample, Trajectory]]]) -> dict[str, dict[str, Any]]:
    return {
        g: {k: v for k, v in _aggregate(rs).items() if k in ("em", "f1", "cover_em", "format_rate", "mean_steps")}
        | {"n": len({e.id for e, _ in rs})}
        for g, rs in sorted(groups.items())
    }


def end_counts(trajectories: Sequence[Trajectory]) -> dict[str, int]:
    """How many episodes ended for each reason (answer, max_steps, max_total_tokens, ...; 'unknown' where no engine
    recorded one), by name: a policy that loops shows as max_steps."""
    return dict(sorted(Counter(t.end or "unknown" for t in trajectories).items()))


def _aggregate(rows: Sequence[tuple[QAExample, Trajectory]]) -> dict[str, Any]:
    m = max(len(rows), 1)

    def mean(values: Sequence[float]) -> float:
        return round(sum(values) / m, 6)

    preds = [(t.prediction or "", e.answers) for e, t in rows]
    gen = [t.generated_tokens for _, t in rows]
    ins = [t.inserted_tokens for _, t in rows]
    turns = [t.n_searches for _, t in rows]
    steps = [len(t.steps) for _, t in rows]
    splits = [split_totals(t) for _, t in rows]
    return {
        "n": len(rows),
        "em": mean([exact_match(p, g) for p, g in preds]),
        "f1": mean([f1_score(p, g) for p, g in preds]),
        "cover_em": mean([cover_exact_match(p, g) for p, g in preds]),
        "format_rate": mean([float(t.format_ok) for _, t in rows]),
        "mean_steps": mean(steps),
        "steps_hist": {str(k): v for k, v in sorted(Counter(steps).items())},
        "ends": end_counts([t for _, t in rows]),
        "tokens": {
            "generated": mean(gen),
            "inserted": mean(ins),
            "total": mean([a + b for a, b in zip(gen, ins, strict=True)]),
            "per_retrieval": round(sum(ins) / sum(turns), 6) if sum(turns) else 0.0,
            **{kind: mean([sp[kind] for sp in splits]) for kind in ("reasoning", "answer", "summary")},
        },
        "retrieval_turns": mean(turns),
        "latency_s": {
            "retrieval": mean([t.retrieval_s for _, t in rows]),
            "kag_ppr": mean([sum(s.timings.get("kag_ppr", 0.0) for s in t.steps) for _, t in rows]),
            "generation": mean([t.generation_s for _, t in rows]),
        },
    }


def _engine_dict(cfg: EngineConfig) -> dict[str, Any]:
    return {f"engine.{k}": v for k, v in dataclasses.asdict(cfg).items()}


def _check_run_file(path: Path, settings: dict[str, Any]) -> None:
    """Record the run's settings; on resume refuse any difference (naming the first differing key)."""
    if path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"invalid JSON: {e.msg}", path=path) from e
        for key in sorted(set(old) | set(settings)):
            if old.get(key) != settings.get(key):
                raise ConfigError(
                    "evaluate_qa",
                    key,
                    settings.get(key),
                    f"differs from the run being resumed in {path.parent} ({old.get(key)!r}); use another --out",
                )
        return
    path.write_text(json.dumps(settings, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _load_finished(path: Path, n: int) -> dict[str, list[Trajectory]]:
    """Trajectories already on disk, grouped by question; questions with fewer than ``n`` samples are dropped."""
    if not path.is_file():
        return {}
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1].strip():
        # A torn last line (the run died while writing): drop it so the file stays valid JSONL.
        log.warning("%s: dropping an incomplete last line from an interrupted run", path)
        path.write_bytes(b"\n".join(lines[:-1]) + (b"\n" if len(lines) > 1 else b""))
        lines = lines[:-1]
    groups: dict[str, dict[int, Trajectory]] = {}  # a re-run sample replaces an earlier partial write of it
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            t = Trajectory.from_dict(json.loads(line))
        except (json.JSONDecodeError, KeyError, ValueError, TypeError) as e:
            raise DataError(f"not a trajectory record ({e})", path=path, record=f"line {i}") from e
        groups.setdefault(t.question_id, {})[t.sample_index] = t
    return {q: list(ts.values()) for q, ts in groups.items() if len(ts) >= n}


def _append(path: Path, trajs: Sequence[Trajectory]) -> None:
    data = "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in trajs)
    with path.open("a", encoding="utf-8") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
