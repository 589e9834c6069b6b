"""HiPRAG's step judges: is a search step an over-search, is a non-search step an under-search?

HiPRAG (§3.2) decides both per step:

- **Over-search**: the step's search query is re-answered by the policy *without* retrieval; if that answer is
  equivalent to the step's conclusion (reached with retrieval), the search was unnecessary.
- **Under-search**: a non-search step's reasoning and conclusion are checked for factual correctness and for following
  logically; an incorrect step should have searched.

Three interchangeable :class:`Judge` implementations:

- :class:`LLMJudge` — the paper's method, through any :class:`~effirag.llm.base.Generator` (a policy for re-answering
  and a judge model for the verdicts; our own prompt wording).
- :class:`WorldJudge` — exact, on EffiRAG-World: over-search ⇔ the query asks a fact the policy knows; under-search ⇔
  the step asserts a fact the policy does not know, or asserts a known fact wrongly.
- :class:`LexicalJudge` — a cheap fallback: normalised token F1 ≥ threshold stands in for the judge model. With the
  policy re-answering and no references it is the ``closed-book`` judge of a run config: over-search only, at the
  cost of one batched generation (:data:`CLOSED_BOOK_F1`).

Verdicts a judge cannot reach (an unparsable LLM reply; a step the world cannot map to a fact; a step without
references for the lexical judge) count as "not detected"; each is logged and counted in the judge's ``undecided``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from effirag.config import check, option
from effirag.llm.base import GenerationConfig, Generator
from effirag.llm.chat import as_chat
from effirag.metrics import cover_exact_match, f1_score
from effirag.types import Step, Trajectory
from effirag.world.world import Fact, World

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StepView:
    """What a judge sees of one HiPRAG step. ``query`` is set for search steps only."""

    question: str
    reasoning: str
    conclusion: str
    query: str | None = None

    @classmethod
    def of(cls, trajectory: Trajectory, step: Step) -> StepView:
        """From an engine step: its ``reasoning`` / ``conclusion`` ("" when the episode ended before the conclusion
        was written), ``query`` for searches."""
        return cls(
            question=trajectory.question,
            reasoning=step.reasoning or "",
            conclusion=step.conclusion or "",
            query=step.query,
        )


@runtime_checkable
class Judge(Protocol):
    """Batched step verdicts; each returns one bool per step, True meaning the inefficiency was detected."""

    def over_search(self, steps: Sequence[StepView]) -> list[bool]:
        """For search steps: would the policy have reached the same conclusion without searching?"""
        ...

    def under_search(self, steps: Sequence[StepView]) -> list[bool]:
        """For non-search steps: is the step factually wrong or unsupported (it should have searched)?"""
        ...


REANSWER_PROMPT = (
    "Answer the question from what you already know. Do not search and do not explain; give only the short answer.\n"
    "Question: {query}\nAnswer:"
)
EQUIVALENCE_PROMPT = (
    "You check whether a web search was needed. The same question was answered twice: once after searching and "
    "once from memory alone.\nQuestion: {query}\nAnswer after searching: {conclusion}\n"
    "Answer from memory: {reanswer}\n"
    "Do the two answers state the same fact (wording may differ)? Reply with one word, yes or no.\nVerdict:"
)
CORRECTNESS_PROMPT = (
    "You review one reasoning step that was written without searching.\nOverall question: {question}\n"
    "Step reasoning: {reasoning}\nStep conclusion: {conclusion}\n"
    "Is every fact stated in the step true, and does the conclusion follow from the reasoning? "
    "Reply with one word, yes or no.\nVerdict:"
)
CLOSED_BOOK_F1 = 0.5
"""Token F1 at or above which the ``closed-book`` judge takes the policy's re-answer for the step's conclusion."""
_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


@dataclass(frozen=True)
class LLMJudgeConfig:
    """Prompts and budgets of :class:`LLMJudge`."""

    reanswer_prompt: str = option(REANSWER_PROMPT, help="Policy prompt to re-answer a search query; has {query}.")
    equivalence_prompt: str = option(
        EQUIVALENCE_PROMPT, help="Judge prompt for over-search; has {query}, {conclusion}, {reanswer}."
    )
    correctness_prompt: str = option(
        CORRECTNESS_PROMPT, help="Judge prompt for under-search; has {question}, {reasoning}, {conclusion}."
    )
    reanswer_max_new_tokens: int = option(48, help="Most tokens of a re-answer.")
    reanswer_stop: tuple[str, ...] = option(("\n",), help="Stop strings of a re-answer.")
    verdict_max_new_tokens: int = option(8, help="Most tokens of a yes/no verdict.")

    def __post_init__(self) -> None:
        for name, keys in (
            ("reanswer_prompt", ("{query}",)),
            ("equivalence_prompt", ("{query}", "{conclusion}", "{reanswer}")),
            ("correctness_prompt", ("{question}", "{reasoning}", "{conclusion}")),
        ):
            missing = [k for k in keys if k not in getattr(self, name)]
            check(not missing, self, name, f"lacks the placeholder(s) {', '.join(missing)}")
        check(self.reanswer_max_new_tokens > 0, self, "reanswer_max_new_tokens", "must be > 0")
        check(self.verdict_max_new_tokens > 0, self, "verdict_max_new_tokens", "must be > 0")


def reanswer(policy: Generator, queries: Sequence[str], config: LLMJudgeConfig) -> list[str]:
    """The policy's answers to ``queries`` without retrieval: greedy, one batched call with one prompt per distinct
    sub-question (the samples of a GRPO group often search the same query), answers returned per query. A chat
    policy is asked in its chat template, as its episodes are (:func:`~effirag.llm.chat.as_chat`)."""
    if not queries:
        return []
    distinct = list(dict.fromkeys(queries))
    prompts = [as_chat(policy, config.reanswer_prompt.format(query=q)) for q in distinct]
    gcfg = GenerationConfig(max_new_tokens=config.reanswer_max_new_tokens, stop=config.reanswer_stop)
    outs = policy.generate(prompts, gcfg)
    answer = {q: _strip_stop(o[0].text, o[0].stop_string) for q, o in zip(distinct, outs, strict=True)}
    return [answer[q] for q in queries]


def _strip_stop(text: str, stop: str | None) -> str:
    if stop and text.endswith(stop):
        text = text[: -len(stop)]
    return text.strip()


def _need_query(steps: Sequence[StepView]) -> list[str]:
    queries = []
    for i, s in enumerate(steps):
        if not s.query:
            raise ValueError(f"step {i} is not a search step (no query): {s!r}")
        queries.append(s.query)
    return queries


class LLMJudge:
    """HiPRAG's detectors through LLMs: ``policy`` re-answers queries without search, ``judge`` gives verdicts.

    ``policy`` defaults to ``judge``. A reply without a yes/no counts as undecided (not detected). The judge model is
    frozen and decodes greedily, so its verdict on a prompt is kept (up to ``cache_size`` prompts, oldest dropped
    first) and asked once: a sub-question re-answered alike in another sample or step costs no judge call. The
    re-answers are not kept across calls: during RL the policy changes every step.
    """

    def __init__(
        self,
        judge: Generator,
        policy: Generator | None = None,
        config: LLMJudgeConfig | None = None,
        cache_size: int = 100_000,
    ) -> None:
        if cache_size < 0:
            raise ValueError(f"cache_size={cache_size!r} must be >= 0")
        self.judge = judge
        self.policy = policy or judge
        self.config = config or LLMJudgeConfig()
        self.cache_size = cache_size
        self.undecided = 0
        self.judged = 0  # prompts the judge model was asked (cache misses)
        self._cache: dict[str, bool | None] = {}

    def _verdicts(self, prompts: list[str]) -> list[bool | None]:
        ask = [p for p in dict.fromkeys(prompts) if p not in self._cache]
        fresh: dict[str, bool | None] = {}
        if ask:
            gcfg = GenerationConfig(max_new_tokens=self.config.verdict_max_new_tokens)
            self.judged += len(ask)
            for prompt, completions in zip(ask, self.judge.generate(ask, gcfg), strict=True):
                m = _VERDICT.search(completions[0].text)
                if m is None:
                    log.warning("%s: no yes/no verdict in %r (prompt ends %r)", self.judge.name, completions[0].text,
                                prompt[-80:])  # fmt: skip
                fresh[prompt] = None if m is None else m.group(1).lower() == "yes"
        out = [fresh[p] if p in fresh else self._cache[p] for p in prompts]
        self.undecided += sum(v is None for v in out)
        for prompt, verdict in fresh.items():
            if self.cache_size:
                if len(self._cache) >= self.cache_size:
                    del self._cache[next(iter(self._cache))]
                self._cache[prompt] = verdict
        return out

    def over_search(self, steps: Sequence[StepView]) -> list[bool]:
        queries = _need_query(steps)
        answers = reanswer(self.policy, queries, self.config)
        prompts = [
            self.config.equivalence_prompt.format(query=q, conclusion=s.conclusion, reanswer=a)
            for q, s, a in zip(queries, steps, answers, strict=True)
        ]
        return [v is True for v in self._verdicts(prompts)]  # equivalent ⇒ over-search

    def under_search(self, steps: Sequence[StepView]) -> list[bool]:
        prompts = [
            self.config.correctness_prompt.format(question=s.question, reasoning=s.reasoning, conclusion=s.conclusion)
            for s in steps
        ]
        return [v is False for v in self._verdicts(prompts)]  # judged incorrect ⇒ under-search


class WorldJudge:
    """Exact detectors on EffiRAG-World (ground truth instead of a judge model).

    Over-search ⇔ ``world.knows(world.fact_for(query))``. Under-search ⇔ the step's fact (``fact_for`` of its
    reasoning, else of its conclusion, else of the trajectory's question — which maps to a fact only for 1-hop
    questions) is unknown to the policy, or known but the conclusion does not contain its object (cover-EM). A step
    that maps to no fact is undecided. ``fact_for`` reads one entity and one relation, so a text naming both subject
    and object ("X was born in Y.") maps to no fact: reasoning that names what is asked ("where X was born") does.
    """

    def __init__(self, world: World) -> None:
        self.world = world
        self.undecided = 0

    def over_search(self, steps: Sequence[StepView]) -> list[bool]:
        out = []
        for q in _need_query(steps):
            fact = self.world.fact_for(q)
            out.append(fact is not None and self.world.knows(fact))
        return out

    def step_fact(self, step: StepView) -> Fact | None:
        """The fact a non-search step asserts: from its reasoning, else its conclusion, else the question."""
        for text in (step.reasoning, step.conclusion, step.question):
            fact = self.world.fact_for(text) if text else None
            if fact is not None:
                return fact
        return None

    def under_search(self, steps: Sequence[StepView]) -> list[bool]:
        out = []
        for s in steps:
            fact = self.step_fact(s)
            if fact is None:
                self.undecided += 1
                log.debug("world judge: no fact for step %r / %r", s.reasoning, s.conclusion)
                out.append(False)
            else:
                out.append(not self.world.knows(fact) or cover_exact_match(s.conclusion, fact.object) == 0.0)
        return out


class LexicalJudge:
    """Fallback detectors: normalised token F1 ≥ ``threshold`` replaces the judge model.

    Over-search: F1(policy re-answer, conclusion) ≥ threshold. Under-search: the conclusion's best F1 against the
    step's reference answers (``references(step)``, e.g. gold sub-answers) is below threshold; a step without
    references is undecided.
    """

    def __init__(
        self,
        policy: Generator | None = None,
        threshold: float = 0.5,
        references: Callable[[StepView], Sequence[str]] | None = None,
        config: LLMJudgeConfig | None = None,
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold={threshold!r} must be in (0, 1]")
        self.policy = policy
        self.threshold = threshold
        self.references = references
        self.config = config or LLMJudgeConfig()
        self.undecided = 0

    def over_search(self, steps: Sequence[StepView]) -> list[bool]:
        queries = _need_query(steps)
        if not queries:
            return []
        if self.policy is None:
            raise ValueError("LexicalJudge.over_search needs a policy Generator to re-answer queries")
        answers = reanswer(self.policy, queries, self.config)
        return [f1_score(a, s.conclusion) >= self.threshold for a, s in zip(answers, steps, strict=True)]

    def under_search(self, steps: Sequence[StepView]) -> list[bool]:
        out = []
        for s in steps:
            refs = list(self.references(s)) if self.references is not None else []
            if not refs:
                self.undecided += 1
                out.append(False)
            else:
                out.append(f1_score(s.conclusion, refs) < self.threshold)
        return out
