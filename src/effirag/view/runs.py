"""Reading run folders for the viewer, each kind recognised by the file it holds.

- a *QA run* (``eval qa --out``): ``trajectories.jsonl`` (and ``run.json`` with the engine's limits,
  ``questions.jsonl`` with the gold answers, ``report.json``);
- an *RL log* (``train grpo|ppo``): ``steps.jsonl``, one record per optimiser step (:mod:`effirag.train.rl.log`);
- a *DPO log* (``train dpo``): ``steps.jsonl`` with DPO statistics (:mod:`effirag.view.dpo`);
- an *IP-DPO log* (``train ipdpo``): ``rounds.jsonl`` and ``round-N/`` folders (:mod:`effirag.view.dpo`);
- an *MCTS folder* (``data mcts``): ``trees.jsonl``, ``pairs.jsonl``, ``trees/`` (:mod:`effirag.view.mcts`).

``RUN_DIR`` may be one run or a folder of runs (its direct subfolders, e.g. ``effirag demo --out``'s ``tearag/`` and
``searchr1/``); a folder that is none of these is refused with a message naming it and the files looked for.

Per question of a QA run the viewer derives a :class:`Row`: correct / wrong / format failure, hop count, type,
over-search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from effirag.errors import DataError
from effirag.metrics import exact_match
from effirag.types import QAExample, Trajectory
from effirag.view.dpo import DPORun, IPDPORun, is_dpo_log, load_dpo_run, load_ipdpo_run
from effirag.view.files import read_config, read_json, read_jsonl
from effirag.view.mcts import MCTSRun, load_mcts_run

TRAJECTORIES = "trajectories.jsonl"
STEPS = "steps.jsonl"
MARKERS = {  # the file that makes a folder a run of each kind, and what writes it
    TRAJECTORIES: "an `eval qa --out` run",
    STEPS: "an RL or DPO log: `train grpo|ppo|dpo`",
    "rounds.jsonl": "an IP-DPO log: `train ipdpo`",
    "trees.jsonl": "an MCTS folder: `data mcts`",
}
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
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSet:
    """Everything under one ``RUN_DIR``."""

    root: Path
    qa: list[QARun]
    rl: list[RLRun]
    dpo: list[DPORun] = field(default_factory=list)
    ipdpo: list[IPDPORun] = field(default_factory=list)
    mcts: list[MCTSRun] = field(default_factory=list)

    def describe(self) -> str:
        """What was found, e.g. ``4 questions from 1 QA run(s); 1 RL log(s)``."""
        parts = []
        if self.qa:
            parts.append(f"{sum(len(r.trajectories) for r in self.qa)} questions from {len(self.qa)} QA run(s)")
        for runs, what in ((self.rl, "RL log(s)"), (self.dpo, "DPO log(s)"), (self.ipdpo, "IP-DPO log(s)")):
            if runs:
                parts.append(f"{len(runs)} {what}")
        if self.mcts:
            trees = sum(len(r.records) for r in self.mcts)
            pairs = sum(r.n_pairs for r in self.mcts)
            parts.append(f"{trees} MCTS trees with {pairs} pairs from {len(self.mcts)} MCTS folder(s)")
        return "; ".join(parts)


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


def folder_kinds(folder: Path) -> list[str]:
    """The kinds of run ``folder`` is (``qa``, ``rl``, ``dpo``, ``ipdpo``, ``mcts``; a folder may be several), by the
    files in it (see the module docstring)."""
    kinds = []
    if (folder / TRAJECTORIES).is_file():
        kinds.append("qa")
    if (folder / "rounds.jsonl").is_file():
        kinds.append("ipdpo")
    elif (folder / STEPS).is_file():
        kinds.append("dpo" if is_dpo_log(folder) else "rl")
    if (folder / "trees.jsonl").is_file():
        kinds.append("mcts")
    return kinds


def load_runs(root: str | Path) -> RunSet:
    """The runs in ``root`` (itself a run, or a folder whose direct subfolders are runs)."""
    base = Path(root)
    if not base.is_dir():
        raise DataError("run folder not found", path=base)
    found = [(base, folder_kinds(base))]
    if not found[0][1]:
        found = [(p, folder_kinds(p)) for p in sorted(base.iterdir()) if p.is_dir()]
    found = [(f, kinds) for f, kinds in found if kinds]
    if not found:
        expected = "; ".join(f"{name} ({what})" for name, what in MARKERS.items())
        raise DataError(f"not a run the viewer knows, nor a folder of runs: expected, in it or in a direct subfolder, "
                        f"one of {expected}", path=base)  # fmt: skip
    runs = RunSet(base, [], [])
    for f, kinds in found:
        name = f.name if f != base else base.resolve().name
        if "qa" in kinds:
            runs.qa.append(load_qa_run(f, name))
        if "rl" in kinds:
            runs.rl.append(RLRun(name, f, read_jsonl(f / STEPS), read_config(f)))
        if "dpo" in kinds:
            runs.dpo.append(load_dpo_run(f, name))
        if "ipdpo" in kinds:
            runs.ipdpo.append(load_ipdpo_run(f, name))
        if "mcts" in kinds:
            runs.mcts.append(load_mcts_run(f, name))
    return runs


def load_qa_run(folder: Path, name: str) -> QARun:
    """One QA run folder (see the module docstring)."""
    trajs = []
    for i, rec in enumerate(read_jsonl(folder / TRAJECTORIES), start=1):
        try:
            trajs.append(Trajectory.from_dict(rec))
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"not a trajectory record ({e})", path=folder / TRAJECTORIES, record=f"line {i}") from e
    examples: dict[str, QAExample] = {}
    if (folder / "questions.jsonl").is_file():
        from effirag.data import load_questions

        examples = {e.id: e for e in load_questions(folder / "questions.jsonl").examples}
    settings = read_json(folder / "run.json") or {}
    return QARun(name, folder, trajs, examples, settings, read_json(folder / "report.json"))


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
