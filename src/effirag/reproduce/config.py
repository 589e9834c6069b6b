"""The configuration of ``effirag reproduce``: start policy, world, questions, budget and the shared eval settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from effirag.config import check, option
from effirag.errors import BackendError
from effirag.llm.factory import policy_backend

METHODS = ("tearag", "hiprag", "routerag", "reasonrag", "dsr1")


@dataclass(frozen=True)
class ReproduceConfig:
    """What every method's recipe starts from and is evaluated on (the same for all, so their results compare)."""

    methods: tuple[str, ...] = option(METHODS, help=f"Methods to reproduce, among {METHODS}.")
    start: str = option(
        "checkpoints/start-policy",
        help="Start policy (HF folder) every method trains from; the default carries over-search in its own sampling "
        "(docs/demo_policy.md, 'The start policy').",
    )
    world: str = option("runs/demo/world", help="EffiRAG-World folder (generated with the demo preset if absent).")
    index: str = option("runs/demo/index", help="Retrieval index folder (built from the world if absent).")
    train_questions: str = option("", help="Training questions ('': WORLD/questions_train.jsonl).")
    eval_questions: str = option("", help="Evaluation questions ('': WORLD/questions_test.jsonl).")
    train_limit: int = option(64, help="Training questions every recipe may use (max_questions).")
    eval_limit: int = option(100, help="Evaluation questions (the first N of the file; the same for every policy).")
    budget_minutes: float = option(60.0, help="Total budget, split evenly across the methods.")
    steps_per_minute: float = option(
        1.5, help="Optimiser steps per minute of a method's budget share, split across its training runs (≥ 1 each)."
    )
    learning_rate: float = option(
        3e-5,
        help="Learning rate of every training run (0: each recipe's own). The recipes' own suit billion-parameter "
        "policies; the 5M-parameter demo policy learns at 3e-5.",
    )
    start_settings: bool = option(
        True,
        help="Trainings sample with the start policy's inference.yaml budgets (k, turns, tokens) and KAG reranker, "
        "as the evaluations do.",
    )
    seed: int = option(0, help="Seed of every training run, every evaluation and the bootstrap.")
    threads: int = option(
        1,
        help="Torch/OpenMP threads of every stage (0: the libraries' default). One suits the small demo policy, and "
        "a second thread stalls at every step when the cores are shared.",
    )
    resamples: int = option(10_000, help="Paired bootstrap resamples per comparison.")
    musique: str = option(
        "../shared/data/musique_mini",
        help="MuSiQue slice (questions.json with gold decompositions, corpus.json and the KG file) of the "
        "retrieval-only comparisons ('': skip them).",
    )
    musique_kg: str = option(
        "openie_gpt-3.5-turbo-1106.json",
        help="The slice's knowledge-graph file inside `musique`: HippoRAG OpenIE json (.json) or triplets (.jsonl).",
    )
    retrieval_k: int = option(5, help="Items per retrieval of the retrieval-only comparisons (both sides).")
    retrieval_tokenizer: str = option(
        "encoder",
        help="Token counts of the retrieval-only comparisons (`eval retrieval --tokenizer`): encoder (MiniLM's "
        "WordPiece), whitespace or a tokenizer folder.",
    )
    recipes: str = option("configs", help="Folder of the recipes (rl/, dpo/, mcts/ YAMLs).")
    train_overrides: tuple[str, ...] = option((), help="key=value overrides given to every training run.")
    eval_backend: str = option(
        "hf",
        help="Backend of every evaluation (`eval qa --backend`; trainings stay on HF): hf, vllm (vLLM's engine, eager, "
        "float32: needs .venv-vllm, `make vllm-venv`, see eval_python), or hf?OPTIONS / vllm?OPTIONS (the backend's "
        "options instead, e.g. vllm?dtype=bfloat16).",
    )
    eval_python: str = option(
        "",
        help="Python interpreter of every evaluation stage ('': the one running reproduce), e.g. "
        ".venv-vllm/bin/python for eval_backend=vllm while the trainings run in .venv.",
    )
    eval_settings: tuple[str, ...] = option(
        (),
        help="Engine settings of every evaluation (`eval qa --set`), over the start policy's inference.yaml.",
    )

    def __post_init__(self) -> None:
        check(bool(self.methods), self, "methods", "name at least one method")
        unknown = [m for m in self.methods if m not in METHODS]
        check(not unknown, self, "methods", f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
        check(len(set(self.methods)) == len(self.methods), self, "methods", "a method is named twice")
        check(self.budget_minutes > 0, self, "budget_minutes", "must be > 0")
        check(self.steps_per_minute > 0, self, "steps_per_minute", "must be > 0")
        check(self.train_limit >= 1, self, "train_limit", "must be >= 1")
        check(self.eval_limit >= 1, self, "eval_limit", "must be >= 1")
        check(self.resamples >= 1, self, "resamples", "must be >= 1")
        check(self.retrieval_k >= 1, self, "retrieval_k", "must be >= 1")
        kg_ok = self.musique_kg.endswith((".json", ".jsonl"))
        check(kg_ok, self, "musique_kg", "must be an OpenIE .json or a triplets .jsonl file name")
        check(self.threads >= 0, self, "threads", "must be >= 0")
        check(self.learning_rate >= 0, self, "learning_rate", "must be >= 0 (0: each recipe's own)")
        check(bool(self.start), self, "start", "a start policy folder is required")
        check(not self.eval_python or Path(self.eval_python).is_file(), self, "eval_python", "no such interpreter")
        try:
            self.eval_spec("POLICY")
        except BackendError as e:
            check(False, self, "eval_backend", str(e))

    @property
    def train_file(self) -> str:
        return self.train_questions or str(Path(self.world) / "questions_train.jsonl")

    @property
    def eval_file(self) -> str:
        return self.eval_questions or str(Path(self.world) / "questions_test.jsonl")

    def eval_spec(self, policy: str) -> str:
        """The ``eval qa --backend`` spec of an evaluation of the policy folder ``policy``."""
        return policy_backend(self.eval_backend, policy)

    def method_minutes(self) -> float:
        """Each method's share of the budget."""
        return self.budget_minutes / len(self.methods)

    def steps_for(self, n_trainings: int) -> int:
        """Optimiser steps of each of a method's ``n_trainings`` training runs (deterministic in the budget: never
        measured time, so a re-run trains the same steps)."""
        return max(1, int(self.steps_per_minute * self.method_minutes() / max(n_trainings, 1)))
