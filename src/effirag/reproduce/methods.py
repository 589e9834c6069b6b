"""The method registry of ``effirag reproduce``: per paper, the policies to train and evaluate and the claims to test.

A :class:`Training` is a list of ``effirag`` commands (argument templates) run in order from the start policy; a
:class:`Variant` is a policy (the start, or a training's result) evaluated with one protocol; a :class:`Claim` is one
headline comparison of the paper between two variants with the direction it expects per metric. Commands are CLI
argument lists, so a trainer that is not in this build (a command the CLI lacks, or a recipe file that is missing)
makes its variants, and the claims that need them, "not available in this build" instead of failing the whole run.

Template fields: ``{model}`` (the start policy), ``{out}`` (the training's folder), ``{questions}``, ``{index}``,
``{world}``, ``{limit}`` (training questions), ``{steps}`` (optimiser steps), ``{seed}``, ``{recipes}``. Whole-argument
fields stand for zero or more arguments: ``{sampling}`` (the start policy's rollout budgets and reranker),
``{rl_lr}`` and ``{dpo_lr}`` (the run's learning rate, in the GRPO and DPO configs' key).
"""

from __future__ import annotations

from dataclasses import dataclass

_RL = (
    "env.model={model}", "env.questions={questions}", "env.index={index}", "env.judge=world:{world}",
    "env.max_questions={limit}",
)  # fmt: skip
_RL_RUN = (
    *_RL, "output_dir={out}", "max_steps={steps}", "save_steps={steps}", "seed={seed}", "{sampling}", "{rl_lr}",
    "--quiet", "--json",
)  # fmt: skip


@dataclass(frozen=True)
class Training:
    """A training from the start policy: ``commands`` (``effirag`` argument templates) run in order, each one stage.

    ``staged`` names the stages of a staged GRPO recipe (RouteRAG's outcome → efficiency): each gets ``{steps}``
    optimiser steps and its own policy, ``{out}/<stage>/policy``."""

    key: str
    commands: tuple[tuple[str, ...], ...]
    recipes: tuple[str, ...]  # recipe files (relative to the recipes folder) the commands read
    policy: str = "{out}/policy"
    staged: tuple[str, ...] = ()

    @property
    def runs(self) -> int:
        """Optimiser runs that share the method's step budget."""
        return max(len(self.staged), 1)


@dataclass(frozen=True)
class Variant:
    """A policy evaluated with ``protocol`` (and retrieval ``mode``, '' for the protocol's own)."""

    label: str
    protocol: str
    training: Training | None = None  # None: the start policy
    policy: str = ""  # template of the policy when the training saves several ('' → training.policy)
    mode: str = ""


@dataclass(frozen=True)
class Claim:
    """The paper's claim that ``b`` beats ``a``: ``expect`` maps a metric to lower, higher, not_lower (B ≥ A) or
    report (shown, no direction claimed). With ``starts`` (the labels of A's and B's start variants) it compares
    gains: per question, B − B's start against A − A's start, for two policies whose protocols start apart."""

    a: str
    b: str
    text: str
    expect: tuple[tuple[str, str], ...]
    starts: tuple[str, str] | None = None


@dataclass(frozen=True)
class Retrieval:
    """A retriever of ``effirag eval retrieval`` (``-r``) run alone on the MuSiQue slice's gold sub-questions."""

    label: str
    retriever: str


@dataclass(frozen=True)
class RetrievalClaim:
    """The paper's claim that retriever ``b`` beats ``a`` per gold sub-question (``expect`` as in :class:`Claim`;
    metrics: ``tokens_per_retrieval`` and ``answer_recall``, the sub-question's answer among the retrieved texts)."""

    a: Retrieval
    b: Retrieval
    text: str
    expect: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Method:
    name: str
    paper: str
    variants: tuple[Variant, ...]
    claims: tuple[Claim, ...]
    note: str = ""
    retrieval_claims: tuple[RetrievalClaim, ...] = ()
    # recipe (relative to the recipes folder) whose objective.c_g / c_e price every variant's modeled latency
    # (Dynamic Search-R1 eq. 3); '' → no modeled latency
    cost_model: str = ""

    def variant(self, label: str) -> Variant:
        return next(v for v in self.variants if v.label == label)


def _grpo(key: str, recipe: str, *overrides: str, staged: tuple[str, ...] = ()) -> Training:
    cmd = ("train", "grpo", "--config", "{recipes}/" + recipe, *_RL_RUN, *overrides)
    return Training(key, (cmd,), (recipe,), staged=staged)


_DPO = (
    "model={model}", "output_dir={out}/dpo", "train.max_steps={steps}", "train.seed={seed}", "{dpo_lr}", "--quiet",
    "--json",
)  # fmt: skip
START = "start"
START_SEARCHR1 = "start, Search-R1"
IPDPO = Training(
    "tearag-ipdpo",
    (
        (
            "train", "ipdpo", "--config", "{recipes}/dpo/tearag_ipdpo.yaml", "env.model={model}",
            "env.questions={questions}", "env.index={index}", "env.max_questions={limit}", "output_dir={out}",
            "rounds=1", "train.max_steps={steps}", "seed={seed}", "{sampling}", "{dpo_lr}", "--json",
        ),
    ),
    ("dpo/tearag_ipdpo.yaml",),
)  # fmt: skip
MCTS_DPO = Training(
    "reasonrag-prl",
    (
        (
            "data", "mcts", "--config", "{recipes}/mcts/reasonrag.yaml", "env.model=hf:{model}",
            "env.questions={questions}", "env.index={index}", "env.max_questions={limit}", "output_dir={out}/mcts",
            "search.seed={seed}", "--json",
        ),
        (
            "train", "dpo", "--data", "{out}/mcts/pairs.jsonl", "--config", "{recipes}/dpo/reasonrag_step_dpo.yaml",
            *_DPO,
        ),
    ),
    ("mcts/reasonrag.yaml", "dpo/reasonrag_step_dpo.yaml"),
    policy="{out}/dpo/policy",
)  # fmt: skip
ROUTERAG = _grpo("routerag", "rl/routerag_grpo.yaml", staged=("outcome", "efficiency"))

REGISTRY: dict[str, Method] = {
    "tearag": Method(
        "tearag",
        "TeaRAG",
        (
            Variant("start, KAG+PPR", "tearag"),
            Variant("start, chunks only", "tearag", mode="passage"),
            Variant("IP-DPO", "tearag", IPDPO),
        ),
        (
            Claim(
                "start, KAG+PPR",
                "IP-DPO",
                "IP-DPO cuts output tokens (−61%) and raises EM (+4) over SFT",
                (("generated", "lower"), ("em", "higher")),
            ),
            Claim(
                "start, chunks only",
                "start, KAG+PPR",
                "KAG+PPR lowers content per retrieval (779 → 650 tokens)",
                (("tokens_per_retrieval", "lower"), ("em", "report")),
            ),
        ),
        "The 779 → 650 figure is the paper's MuSiQue slice with gold sub-queries: measured here both on the policy's "
        "own searches on the world and, retrieval alone, on the real MuSiQue slice's gold sub-questions.",
        (
            RetrievalClaim(
                Retrieval("chunks only (dense), MuSiQue gold sub-queries", "dense"),
                Retrieval("KAG+PPR, MuSiQue gold sub-queries", "kag"),
                "KAG+PPR lowers content per retrieval (779 → 650 tokens on MuSiQue with gold sub-queries)",
                (("tokens_per_retrieval", "lower"), ("answer_recall", "report")),
            ),
        ),
    ),
    "hiprag": Method(
        "hiprag",
        "HiPRAG",
        (
            Variant(START, "hiprag"),
            Variant(
                "outcome-only RL",
                "hiprag",
                _grpo(
                    "hiprag-outcome",
                    "rl/hiprag_grpo.yaml",
                    "objective.outcome_weight=1.0",
                    "objective.hiprag_weight=0.0",
                ),
            ),
            Variant("hierarchical reward", "hiprag", _grpo("hiprag-hierarchical", "rl/hiprag_grpo.yaml")),
        ),
        (
            Claim(
                "outcome-only RL",
                "hierarchical reward",
                "the hierarchical reward lowers over-search (OSR from over 27% in baselines to 2.3%) and "
                "under-search, and keeps or raises accuracy",
                (("osr", "lower"), ("usr", "lower"), ("em", "not_lower")),
            ),
        ),
        "Over- and under-search are judged by the world's exact oracle.",
    ),
    "routerag": Method(
        "routerag",
        "RouteRAG",
        (
            Variant(START, "routerag"),
            Variant("stage 1 (outcome)", "routerag", ROUTERAG, policy="{out}/outcome/policy"),
            Variant("stage 2 (efficiency)", "routerag", ROUTERAG, policy="{out}/efficiency/policy"),
        ),
        (
            Claim(
                "stage 1 (outcome)",
                "stage 2 (efficiency)",
                "the efficiency stage cuts retrieval turns and keeps F1",
                (("turns", "lower"), ("f1", "not_lower"), ("graph_share", "report")),
            ),
        ),
    ),
    "reasonrag": Method(
        "reasonrag",
        "ReasonRAG",
        (
            Variant(START, "reasonrag"),
            Variant(START_SEARCHR1, "searchr1"),
            Variant("outcome-supervised (Search-R1 GRPO)", "searchr1", _grpo("reasonrag-orl", "rl/searchr1_grpo.yaml")),
            Variant("process-supervised MCTS+DPO", "reasonrag", MCTS_DPO),
        ),
        (
            Claim(
                "outcome-supervised (Search-R1 GRPO)",
                "process-supervised MCTS+DPO",
                "process supervision gains more EM over its start than outcome supervision over its own, at an equal "
                "training-question budget (the paper: 5k queries against Search-R1's 90k)",
                (("em", "higher"), ("steps", "report")),
                starts=(START_SEARCHR1, START),
            ),
        ),
        "As in the paper, the outcome-supervised side is Search-R1's GRPO (GRPO needs a prompt that only grows, which "
        "ReasonRAG's stage prompts are not); both train on the same questions from the same start. The two protocols "
        "start apart (the start answers differently in each), so the claim compares each side's gain over the start "
        "in its own protocol, per question (A and B in its rows are mean gains).",
    ),
    "dsr1": Method(
        "dsr1",
        "Dynamic Search-R1",
        (
            Variant(START, "dsr1"),
            Variant(
                "plain GRPO (EM)",
                "dsr1",
                _grpo("dsr1-plain", "rl/dsr1_grpo_cost.yaml", "objective.cost=none", "scale_rewards=group"),
            ),
            Variant("cost-aware, memory", "dsr1", _grpo("dsr1-memory", "rl/dsr1_grpo_cost.yaml")),
            Variant("cost-aware, latency", "dsr1", _grpo("dsr1-latency", "rl/dsr1_grpo_latency.yaml")),
        ),
        (
            Claim(
                "plain GRPO (EM)",
                "cost-aware, memory",
                "the memory-bound cost cuts tokens at equal EM",
                (("tokens", "lower"), ("em", "not_lower")),
            ),
            Claim(
                "plain GRPO (EM)",
                "cost-aware, latency",
                "the latency-bound cost cuts latency at equal EM",
                (("latency_model_s", "lower"), ("latency_s", "report"), ("em", "not_lower")),
            ),
        ),
        "Latency is claimed as the paper models it (eq. 3): c_g·generated + c_e·inserted seconds, with the token "
        "costs of the latency recipe (profiled for the demo policy on one CPU thread). Wall-clock latency is reported "
        "beside it: on a shared CPU it drifts between evaluations by more than the policies differ.",
        cost_model="rl/dsr1_grpo_latency.yaml",
    ),
}
