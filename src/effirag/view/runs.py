"""Reading run folders for the viewer: ``eval qa`` runs (trajectories) and RL runs (per-step logs).

A *QA run* is a folder with ``trajectories.jsonl`` (and, from ``eval qa --out``, ``run.json`` with the engine's limits,
``questions.jsonl`` with the gold answers and ``report.json``). An *RL run* is a folder with ``steps.jsonl`` (one
record per optimiser step, :mod:`effirag.train.rl.log`). ``RUN_DIR`` may be one run or a folder of runs (its direct
subfolders, e.g. ``effirag demo --out``'s ``tearag/`` and ``searchr1/``); anything else is refused with a message.

Per question the viewer derives a :class:`Row`: correct / wrong / format failure, hop count, type, over-search.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effirag.data.io import iter_jsonl
from effirag.errors import DataError
from effirag.metrics import exact_match
from effirag.types import QAExample, Trajectory

TRAJECTORIES = "trajectories.jsonl"
STEPS = "steps.jsonl"
KINDS = ("reasoning", "answer", "summary")


@dataclass
class QARun:
    """One ``eval qa`` run: its trajectories, the gold of its questions (empty when unknown) and its settings."""

    name: str
    folder: Path
    trajectories: list[Trajectory]
    examples: dict[str, QAExample] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None

    @property
    def protocol(self) -> str:
        return str(self.settings.get("protocol") or (self.trajectories[0].protocol if self.trajectories else "?"))

    def limit(self, name: str) -> int | None:
        """An engine limit of the run (``max_steps``, ``max_total_tokens``), None when the run did not record it."""
        value = self.settings.get(f"engine.{name}")
        return int(value) if isinstance(value, int) else None


@dataclass
class RLRun:
    """One RL run: its ``steps.jsonl`` records in step order."""

    name: str
    folder: Path
    steps: list[dict[str, Any]]


@dataclass
class RunSet:
    """Everything under one ``RUN_DIR``."""

    root: Path
    qa: list[QARun]
    rl: list[RLRun]


@dataclass(frozen=True)
class Row:
    """What the question list shows and filters on for one trajectory."""

    run: str
    index: int  # position of the trajectory in its run
    trajectory: Trajectory
    example: QAExample | None
    status: str  # correct | wrong | format | unscored (no gold known)
    over_search: int  # search steps the oracle judged over-searches
    under_search: int

    @property
    def hops(self) -> str:
        return str(self.example.hops) if self.example is not None and self.example.hops is not None else "?"

    @property
    def qtype(self) -> str:
        return (self.example.qtype if self.example is not None else None) or "unknown"


def load_runs(root: str | Path) -> RunSet:
    """The QA and RL runs in ``root`` (itself a run, or a folder whose direct subfolders are runs)."""
    base = Path(root)
    if not base.is_dir():
        raise DataError("run folder not found", path=base)
    folders = [base] if _is_run(base) else sorted(p for p in base.iterdir() if p.is_dir() and _is_run(p))
    if not folders:
        raise DataError(f"no run here: expected {TRAJECTORIES} (eval qa --out) or {STEPS} (RL) in it or a subfolder",
                        path=base)  # fmt: skip
    qa, rl = [], []
    for f in folders:
        name = f.name if f != base else base.resolve().name
        if (f / TRAJECTORIES).is_file():
            qa.append(load_qa_run(f, name))
        if (f / STEPS).is_file():
            rl.append(RLRun(name, f, _read_jsonl(f / STEPS)))
    return RunSet(base, qa, rl)


def _is_run(folder: Path) -> bool:
    return (folder / TRAJECTORIES).is_file() or (folder / STEPS).is_file()


def load_qa_run(folder: Path, name: str) -> QARun:
    """One QA run folder (see the module docstring)."""
    trajs = []
    for i, rec in enumerate(_read_jsonl(folder / TRAJECTORIES), start=1):
        try:
            trajs.append(Trajectory.from_dict(rec))
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"not a trajectory record ({e})", path=folder / TRAJECTORIES, record=f"line {i}") from e
    examples: dict[str, QAExample] = {}
    if (folder / "questions.jsonl").is_file():
        from effirag.data import load_questions

        examples = {e.id: e for e in load_questions(folder / "questions.jsonl").examples}
    settings = _read_json(folder / "run.json") or {}
    return QARun(name, folder, trajs, examples, settings, _read_json(folder / "report.json"))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    out = []
    for i, rec in iter_jsonl(path):
        if not isinstance(rec, dict):
            raise DataError("not a JSON object", path=path, record=f"line {i}")
        out.append(rec)
    return out


def _read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise DataError(f"invalid JSON: {e.msg}", path=path) from e


def rows(run: QARun) -> list[Row]:
    """One :class:`Row` per trajectory of ``run``, in file order."""
    out = []
    for i, t in enumerate(run.trajectories):
        ex = run.examples.get(t.question_id)
        if not t.format_ok:
            status = "format"
        elif ex is None:
            status = "unscored"
        else:
            status = "correct" if exact_match(t.prediction or "", ex.answers) else "wrong"
        verdicts = [s.extras.get("oracle") for s in t.steps]
        out.append(Row(run.name, i, t, ex, status, verdicts.count("over-search"), verdicts.count("under-search")))
    return out


def ledger(step: Any) -> dict[str, int]:
    """A step's token ledger: generated reasoning / answer / summary and inserted (observation) tokens. A step
    written without a split (before ``eval qa`` recorded it) counts its generated tokens as reasoning."""
    split = step.extras.get("token_split") or {"reasoning": step.generated_tokens}
    return {k: int(split.get(k, 0)) for k in KINDS} | {"inserted": int(step.inserted_tokens)}


def run_means(run: QARun) -> dict[str, float]:
    """Per-question means of a QA run (EM over scored questions): what the summary table and the plots show."""
    rs = rows(run)
    n = max(1, len(rs))
    totals = {k: 0 for k in (*KINDS, "inserted")}
    for r in rs:
        for s in r.trajectory.steps:
            for k, v in ledger(s).items():
                totals[k] += v
    means = {k: v / n for k, v in totals.items()}
    means["tokens"] = sum(means.values())
    hits = [exact_match(r.trajectory.prediction or "", r.example.answers) for r in rs if r.example is not None]
    means["em"] = sum(hits) / len(hits) if hits else float("nan")  # NaN: no gold known, no EM
    means["format"] = sum(r.trajectory.format_ok for r in rs) / n
    means["steps"] = sum(len(r.trajectory.steps) for r in rs) / n
    means["retrievals"] = sum(r.trajectory.n_searches for r in rs) / n
    means["n"] = len(rs)
    return means
