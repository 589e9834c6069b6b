"""Typed configuration of ``effirag data mcts``: the search budgets (:class:`MCTSConfig`) and the run around them
(:class:`MCTSRunConfig`: ``env`` — policy, questions, index —, output), loaded from YAML with ``key=value`` overrides.

With ``env.inference: auto`` (the shipped configs), a policy folder's inference settings (``inference.yaml``:
retrieval k, reranker, turn and token budgets, penalties) are the base the run's ``env:`` is merged over, so the tree
is searched with the settings the policy was measured with unless the file or an override says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from effirag.config import check, option
from effirag.env import EnvConfig
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
    distinct_content: bool = option(
        False,
        help="Keep only pairs whose two steps differ in content as the protocol reads it (AgentProtocol.turn_content: "
        "ReasonRAG's grounding turns by the facts they quote and the value they conclude), not only their text: "
        "a value gap between two phrasings of the same content is rollout luck.",
    )
    same_action: bool = option(
        False,
        help="Keep only pairs whose two steps take the same action (query with query, answer with answer, evidence "
        "with evidence): the preference data then says what to search and what to answer, not when to stop.",
    )
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
    """One data-generation run: which policy searches which questions over which index (``env``), the search, and
    where results go."""

    env: EnvConfig = option(
        factory=EnvConfig,
        help="Policy backend (hf:DIR, openai:URL#MODEL, openai-chat:URL#MODEL, scripted:FILE), its inference "
        "settings, questions, index, reranker, protocol (ReasonRAG's: reasonrag) and episode budgets (n, seed and "
        "temperature are set by the search).",
    )
    output_dir: str = option("runs/mcts", help="Folder of pairs.jsonl, trees.jsonl and trees/<question id>.json.")
    dump_trees: bool = option(True, help="Write each finished tree as trees/<question id>.json (the viewer's input).")
    search: MCTSConfig = option(factory=MCTSConfig, help="Search budgets and constants.")

    def __post_init__(self) -> None:
        check(bool(self.env.model), self, "env", "env.model must name the policy (e.g. hf:checkpoints/demo-policy)")
        check(bool(self.env.questions), self, "env", "env.questions must name a question file")
        check(bool(self.output_dir), self, "output_dir", "must name a folder")
        check(
            self.search.max_depth <= self.env.engine.max_steps,
            self,
            "env",
            f"env.engine.max_steps={self.env.engine.max_steps} must be >= search.max_depth={self.search.max_depth}",
        )


def load_run_config(path: str | Path | None, overrides: Sequence[str] = ()) -> MCTSRunConfig:
    """The run config: the policy's inference settings (engine keys, reranker) under the ``env:`` of the YAML file,
    then the ``key=value`` overrides (:func:`effirag.env.load_run_config`)."""
    from effirag.env import load_run_config as load

    return load(MCTSRunConfig, path, overrides)
