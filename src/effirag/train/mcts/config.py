"""Typed configuration of ``effirag data mcts``: the search budgets (:class:`MCTSConfig`) and the run around them
(:class:`MCTSRunConfig`: policy, questions, index, output), loaded from YAML with ``key=value`` overrides.

A policy folder's inference settings (``inference.yaml``: retrieval k, reranker, turn and token budgets, penalties)
are the base the run's file is merged over, so the tree is searched with the settings the policy was measured with
unless the file or an override says otherwise; the protocol always comes from this config (ReasonRAG by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.agent import EngineConfig
from effirag.agent.protocols import PROTOCOLS
from effirag.config import check, from_dict, merge, option, parse_overrides, read_yaml
from effirag.errors import ConfigError
from effirag.retrieval.rerank import parse_reranker
from effirag.rewards.outcome import OutcomeMetric


@dataclass(frozen=True)
class MCTSConfig:
    """Budgets and constants of one question's tree search (ReasonRAG §2.2, appendix A)."""

    iterations: int = option(8, help="Most selection → expansion → rollout → backup iterations per question.")
    k: int = option(3, help="Next steps sampled per expansion (identical samples merge: at most k children).")
    rollouts: int = option(1, help="Rollouts per new non-terminal child: the Monte-Carlo k of SPRE (eq. 1).")
    max_depth: int = option(
        6, help="Nodes this many turns from the question are not expanded (their value still comes from rollouts)."
    )
    max_tree_tokens: int = option(
        20000, help="Generated-token budget of one tree (expansions and rollouts); no new iteration starts past it."
    )
    c_uct: float = option(1.0, help="UCT exploration constant c (appendix A eq. 5).")
    alpha: float = option(0.9, help="SPRE per-step discount α in (0, 1] (eq. 1): shorter right paths score higher.")
    outcome: str = option("f1", help="Outcome value v of an answer: f1 (the paper's), em or cover_em.")
    min_gap: float = option(0.01, help="Smallest value gap of a preference pair (RAG-ProGuide drops smaller gaps).")
    temperature: float = option(1.0, help="Sampling temperature of expansions and rollouts (> 0: siblings differ).")
    seed: int = option(0, help="Base seed; each question, iteration and phase derives its own from it.")

    def __post_init__(self) -> None:
        check(self.iterations >= 1, self, "iterations", "must be >= 1")
        check(self.k >= 1, self, "k", "must be >= 1")
        check(self.rollouts >= 1, self, "rollouts", "must be >= 1")
        check(self.max_depth >= 1, self, "max_depth", "must be >= 1")
        check(self.max_tree_tokens >= 1, self, "max_tree_tokens", "must be >= 1")
        check(self.c_uct >= 0, self, "c_uct", "must be >= 0")
        check(0.0 < self.alpha <= 1.0, self, "alpha", "must be in (0, 1]")
        metrics = tuple(m.value for m in OutcomeMetric)
        check(self.outcome in metrics, self, "outcome", f"must be one of {metrics}")
        check(self.min_gap >= 0, self, "min_gap", "must be >= 0")
        check(self.temperature > 0, self, "temperature", "must be > 0 (k identical greedy samples make no pairs)")


@dataclass(frozen=True)
class MCTSRunConfig:
    """One data-generation run: which policy searches which questions over which index, and where results go."""

    backend: str = option("", help="Policy backend: hf:DIR, openai:URL#MODEL, openai-chat:URL#MODEL, scripted:FILE.")
    inference: str = option(
        "",
        help="Inference settings file or checkpoint folder merged under this config ('': the hf:DIR backend's "
        "folder when it has inference.yaml; none: no settings).",
    )
    questions: str = option("", help="Question file (any layout effirag reads).")
    max_questions: int = option(0, help="Search only the first N questions (0: all).")
    index: str = option("", help="Retrieval index folder (from `effirag index build`).")
    reranker: str = option(
        "", help="Reranker spec: cross-encoder:DIR, bilinear:DIR or DIR, none ('': the inference settings' or none)."
    )
    protocol: str = option("reasonrag", help="Agent protocol whose turns are the tree's steps.")
    output_dir: str = option("runs/mcts", help="Folder of pairs.jsonl, trees.jsonl and trees/<question id>.json.")
    dump_trees: bool = option(True, help="Write each finished tree as trees/<question id>.json (the viewer's input).")
    engine: EngineConfig = option(
        factory=EngineConfig, help="Episode budgets and retrieval k (n, seed and temperature are set by the search)."
    )
    search: MCTSConfig = option(factory=MCTSConfig, help="Search budgets and constants.")

    def __post_init__(self) -> None:
        check(bool(self.backend), self, "backend", "must name the policy (e.g. hf:checkpoints/demo-policy)")
        check(bool(self.questions), self, "questions", "must name a question file")
        check(self.max_questions >= 0, self, "max_questions", "must be >= 0")
        check(self.protocol in PROTOCOLS, self, "protocol", f"must be one of {PROTOCOLS}")
        parse_reranker(self.reranker, type(self).__name__)
        check(bool(self.output_dir), self, "output_dir", "must name a folder")
        check(
            self.search.max_depth <= self.engine.max_steps,
            self,
            "engine",
            f"max_steps={self.engine.max_steps} must be >= search.max_depth={self.search.max_depth}",
        )


def settings_path(backend: str, inference: str) -> Path | None:
    """Where the run's inference settings come from: ``inference`` ('none': nowhere), else an hf:DIR backend's
    folder when it holds ``inference.yaml``."""
    from effirag.agent.settings import SETTINGS_FILE

    if inference.lower() == "none":
        return None
    if inference:
        return Path(inference)
    prefix, _, rest = backend.partition(":")
    folder = Path(rest.partition("?")[0])
    return folder if prefix == "hf" and (folder / SETTINGS_FILE).is_file() else None


def load_run_config(path: str | Path | None, overrides: Sequence[str] = ()) -> MCTSRunConfig:
    """The run config: the policy's inference settings (engine keys, reranker), then the YAML file, then the
    ``key=value`` overrides, each merged over the one before."""
    from effirag.agent.settings import load_settings, settings_folder

    data: dict[str, Any] = read_yaml(MCTSRunConfig.__name__, Path(path)) if path is not None else {}
    data = merge(data, parse_overrides(overrides))
    source = settings_path(str(data.get("backend", "")), str(data.get("inference", "")))
    base: dict[str, Any] = {}
    found = load_settings(source) if source is not None else None
    if source is not None and found is None:
        raise ConfigError(MCTSRunConfig.__name__, "inference", str(source), "holds no inference.yaml")
    if found is not None and source is not None:
        base["engine"] = found.engine_values()
        rerank = found.reranker_spec(settings_folder(source))
        if rerank is not None:
            base["reranker"] = str(rerank)
    return from_dict(MCTSRunConfig, merge(base, data), source=str(path or "overrides"))
