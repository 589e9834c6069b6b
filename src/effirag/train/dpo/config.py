"""Typed configs of the preference-learning runs: the DPO optimisation knobs shared by both runs
(:class:`DPOTrainConfig`), step-level DPO on a pairs file (:class:`StepDPORunConfig`) and TeaRAG's iterative
process-aware DPO (:class:`IPDPORunConfig`, TeaRAG §4.3.2)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from effirag.agent import EngineConfig
from effirag.config import check, option
from effirag.env import EnvConfig
from effirag.rewards.outcome import OutcomeMetric
from effirag.rewards.tearag import TIE_BREAKS, PairRule
from effirag.train.sft import LoraConfig

SIMILARITIES = ("lexical", "retriever")


@dataclass(frozen=True)
class DPOTrainConfig:
    """One DPO training pass (TRL's DPOTrainer): L = L_DPO + η·L_SFT (TeaRAG eq. 15–17), policy tokens only."""

    beta: float = option(0.5, help="DPO β: the scale of the log-ratio margin (TeaRAG uses 0.5).")
    sft_weight: float = option(0.0, help="η: weight of the NLL on the chosen side's policy tokens (0: plain DPO).")
    learning_rate: float = option(1e-5, help="AdamW learning rate.")
    weight_decay: float = option(0.001, help="AdamW weight decay.")
    epochs: float = option(1.0, help="Passes over the pairs (ignored when max_steps > 0).")
    max_steps: int = option(0, help="Optimiser steps (0: run `epochs` passes).")
    batch_size: int = option(2, help="Pairs per device batch.")
    grad_accum: int = option(1, help="Gradient accumulation steps (effective batch = batch_size × grad_accum).")
    max_length: int = option(4096, help="Longest prompt + completion in tokens; longer ones are cut at the end.")
    lora: LoraConfig = option(
        factory=LoraConfig,
        help="LoRA adapters via peft instead of training every weight (TeaRAG §5.1.3: r 8, α 32, dropout 0.1 on the "
        "attention projections); the adapter is merged into the saved policy.",
    )
    seed: int = option(0, help="Seed of the trainer (initialisation, data order).")
    bf16: bool = option(False, help="bfloat16 mixed precision (on a CPU, autocast: faster where it has AMX).")

    def __post_init__(self) -> None:
        check(self.beta > 0, self, "beta", "must be > 0")
        check(self.sft_weight >= 0, self, "sft_weight", "must be >= 0")
        check(self.learning_rate > 0, self, "learning_rate", "must be > 0")
        check(self.epochs > 0 or self.max_steps > 0, self, "epochs", "must be > 0 unless max_steps is set")
        check(self.max_steps >= 0, self, "max_steps", "must be >= 0")
        check(self.batch_size >= 1, self, "batch_size", "must be >= 1")
        check(self.grad_accum >= 1, self, "grad_accum", "must be >= 1")
        check(self.max_length >= 8, self, "max_length", "must be >= 8")


@dataclass(frozen=True)
class StepDPORunConfig:
    """Step-level DPO (ReasonRAG) on a JSONL of RAG-ProGuide-shaped pairs: ``prompt`` (the trajectory prefix as the
    policy saw it), ``chosen`` / ``rejected`` (next steps)."""

    model: str = option("", help="Policy: a local Hugging Face causal-LM directory.")
    data: str = option("", help="Pairs JSONL (also given as `--data`).")
    protocol: str = option(
        "reasonrag", help="Agent protocol whose inserted spans (observations, feedback) are masked in the steps."
    )
    output_dir: str = option("runs/dpo", help="Checkpoints, the per-step log (steps.jsonl) and the final policy.")
    save_steps: int = option(50, help="Checkpoint every N optimiser steps (and at the end).")
    train: DPOTrainConfig = option(factory=DPOTrainConfig, help="DPO optimisation.")

    def __post_init__(self) -> None:
        check(self.save_steps >= 1, self, "save_steps", "must be >= 1")


@dataclass(frozen=True)
class IPDPORunConfig:
    """TeaRAG's IP-DPO (§4.3.2): R rounds of sampling n paths per question with the current policy, scoring them
    (format, outcome, process reward), pairing (eq. 14) and DPO + η_r·SFT against the previous round's policy."""

    env: EnvConfig = option(
        factory=EnvConfig,
        help="Start policy Θ_0 (the SFT model, a local Hugging Face folder), questions, index, reranker, protocol "
        "(append-only: one training sequence per path; TeaRAG's is tearag) and sampling budgets (temperature, n and "
        "seed are set below).",
    )
    output_dir: str = option("runs/ipdpo", help="rounds.jsonl, round-N/ (pairs, policy), curves.png, policy/.")
    rounds: int = option(3, help="R: sample → score → pair → train rounds.")
    samples_per_question: int = option(8, help="n: paths sampled per question per round (TeaRAG: 8).")
    temperature: float = option(1.0, help="Sampling temperature of the paths (> 0).")
    seed: int = option(0, help="Seed of the sampling; round r samples with seed + 1000·r.")
    outcome: str = option("f1", help="Outcome metric: f1 (TeaRAG eq. 5), em or cover_em.")
    similarity: str = option(
        "lexical",
        help="Knowledge-matching similarity in [0, 1] (eq. 9-11): lexical (token F1) or retriever "
        "(σ of the retriever's KAG similarity, e.g. the reranker).",
    )
    eta: tuple[float, ...] = option(
        (1.0, 0.5, 0.25), help="η per round (the last value repeats for later rounds); TeaRAG lowers it as rounds go."
    )
    epochs: tuple[float, ...] = option(
        (2.0, 2.0, 1.0), help="Epochs per round (the last value repeats for later rounds); TeaRAG: 2, 2, 1."
    )
    train: DPOTrainConfig = option(factory=DPOTrainConfig, help="DPO optimisation (sft_weight/epochs come per round).")
    tie_break: str = option(
        "first",
        help="Order of paths of equal (cost-adjusted) total when pairing: first (TeaRAG: lower sample index) or "
        "shortest (the chosen side fewest generated tokens, then steps; the rejected side the most).",
    )
    tie_tolerance: float = option(
        0.0, help="Totals within this distance of the best (or worst) remaining one tie under tie_break=shortest."
    )
    token_cost: float = option(
        0.0,
        help="Efficiency extension (not TeaRAG's eq. 14): subtracted from a path's total per 100 generated policy "
        "tokens before ranking; chosen/rejected eligibility is unchanged (0: TeaRAG's ranking).",
    )
    rejected_not_shorter: bool = option(
        False,
        help="Efficiency extension (changes eq. 14's pairing): pair a chosen path only with a rejection that "
        "generated at least as many tokens, so that no pair prefers the longer path (fewer pairs).",
    )

    reuse_paths: str = option(
        "",
        help="Another IP-DPO run's output_dir whose saved paths stand in for sampling: round 1, and each later round "
        "while every earlier one was reused, takes that run's round when their sampling records (policy weights, "
        "questions, env, round engine settings) are equal; round 1 must match. For variants that change only pairing "
        "or the DPO step ('': sample every round).",
    )

    def __post_init__(self) -> None:
        check(self.tie_break in TIE_BREAKS, self, "tie_break", f"must be one of {TIE_BREAKS}")
        check(self.tie_tolerance >= 0, self, "tie_tolerance", "must be >= 0")
        check(self.token_cost >= 0, self, "token_cost", "must be >= 0 (a cost, not a bonus for length)")
        object.__setattr__(self, "eta", tuple(float(x) for x in self.eta))
        object.__setattr__(self, "epochs", tuple(float(x) for x in self.epochs))
        check(self.rounds >= 1, self, "rounds", "must be >= 1")
        check(self.samples_per_question >= 2, self, "samples_per_question", "must be >= 2 (pairs need two paths)")
        check(self.temperature > 0, self, "temperature", "must be > 0 (IP-DPO samples)")
        metrics = tuple(m.value for m in OutcomeMetric)
        check(self.outcome in metrics, self, "outcome", f"must be one of {metrics}")
        check(self.similarity in SIMILARITIES, self, "similarity", f"must be one of {SIMILARITIES}")
        check(len(self.eta) >= 1, self, "eta", "needs at least one value (the last repeats for later rounds)")
        check(len(self.epochs) >= 1, self, "epochs", "needs at least one value (the last repeats for later rounds)")
        check(all(x >= 0 for x in self.eta), self, "eta", "values must be >= 0")
        check(all(x > 0 for x in self.epochs), self, "epochs", "values must be > 0")

    def pair_rule(self) -> PairRule:
        """How paths of equal merit are ordered when pairing (the defaults: TeaRAG's rule)."""
        return PairRule(self.tie_break, self.tie_tolerance, self.token_cost, self.rejected_not_shorter)

    def round_train(self, r: int) -> DPOTrainConfig:
        """Round r's (1-based) DPO config: η_r and its epochs (the last value repeats past the list's end)."""
        eta = self.eta[min(r, len(self.eta)) - 1]
        epochs = self.epochs[min(r, len(self.epochs)) - 1]
        return replace(self.train, sft_weight=eta, epochs=epochs)

    def round_engine(self, r: int) -> EngineConfig:
        """Round r's sampling: n paths per question at this run's temperature, seed + 1000·r, token path on."""
        return replace(
            self.env.engine, n=self.samples_per_question, temperature=self.temperature, seed=self.seed + 1000 * r,
            token_ids=True,
        )  # fmt: skip
