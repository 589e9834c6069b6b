"""What a protocol's parser returns (:class:`ParseResult`) and the episode state it reads and advances."""

from __future__ import annotations

from dataclasses import dataclass, field

from effirag.types import Action, Step


@dataclass(frozen=True)
class SubStep:
    """A step completed inside a turn without any action of the environment (a HiPRAG non-search step)."""

    text: str
    reasoning: str | None = None
    conclusion: str | None = None


@dataclass(frozen=True)
class FollowUp:
    """What a turn writes about the earlier retrieval step still awaiting it: TeaRAG's ``summary`` of the reference,
    HiPRAG's ``conclusion`` of the search step, ReasonRAG's ``evidence`` drawn from the documents (None there: the
    model found none)."""

    summary: str | None = None
    conclusion: str | None = None
    evidence: str | None = None

    def complete(self, step: Step) -> None:
        """Write the follow-up's fields into the retrieval ``step`` it completes (fields left None are not set)."""
        if self.summary is not None:
            step.summary = self.summary
        if self.conclusion is not None:
            step.conclusion = self.conclusion
        if self.evidence is not None:
            step.evidence = self.evidence


@dataclass(frozen=True)
class ParseResult:
    """The typed reading of one model turn.

    ``text`` is the kept turn text (everything after the first closing action tag discarded). ``error`` says why an
    INVALID turn is invalid (tag and status, e.g. ``"<search>: empty"``). ``think`` (Search-R1 family: the turn's
    ``<think>`` block, None when there is not exactly one), ``reasoning`` (HiPRAG's ``<reasoning>``, ReasonRAG's
    reasoning-stage text), ``stage`` and ``evidence`` (ReasonRAG) go to this turn's step record. ``followup``
    completes the earlier retrieval step still awaiting the model's next turn (None when the turn owes none);
    ``substeps`` are steps finished inside this turn before its action.
    """

    action: Action
    text: str
    query: str | None = None
    mode: str | None = None
    entities: tuple[str, ...] = ()
    k: int | None = None
    answer: str | None = None
    error: str | None = None
    think: str | None = None
    reasoning: str | None = None
    stage: str | None = None
    evidence: str | None = None
    followup: FollowUp | None = None
    substeps: tuple[SubStep, ...] = ()


def invalid(text: str, error: str, *, think: str | None = None, stage: str | None = None) -> ParseResult:
    return ParseResult(Action.INVALID, text, error=error, think=think, stage=stage)


@dataclass
class EpisodeState:
    """The mutable state of one running episode that protocols read (parsers) and advance (transcript)."""

    question: str
    prompt: str
    transcript: str = ""
    steps: list[Step] = field(default_factory=list)
    pending: int | None = None  # index in ``steps`` of the retrieval step whose follow-up the model still owes
    last_query: str | None = None
    last_mode: str | None = None
    last_entities: tuple[str, ...] = ()
    next_offset: int = 0
    n_retrievals: int = 0
    memory: list[str] = field(default_factory=list)  # ReasonRAG: reasoning/query/evidence history lines
    stage_suffix: str = ""  # ReasonRAG: failed turns of the current stage plus their feedback
