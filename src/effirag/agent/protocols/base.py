"""The protocol interface: prompt builder, turn parser, observation renderer, stop strings.

A protocol is everything the rollout engine needs to know about one agent format; the engine itself knows no tag.
Builders are pure (no I/O, no randomness) so that SFT data construction can call them and produce exactly the text the
parser accepts: each protocol also offers ``render_*`` helpers that write what a perfect model would write for a turn.

Episode anatomy (append-only protocols): ``prompt = build_prompt(question) + turn_1 + observation_1 + turn_2 + …``.
ReasonRAG, whose prompt changes with its stage, overrides :meth:`Protocol.prompt` and :meth:`Protocol.advance`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from effirag.agent.escaping import neutralise
from effirag.types import Action, ItemKind, RetrievedItem, Step

RETHINK = "My action is not correct. Let me rethink."


@dataclass(frozen=True)
class SubStep:
    """A step completed inside a turn without any action of the environment (a HiPRAG non-search step)."""

    text: str
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParseResult:
    """The typed reading of one model turn.

    ``text`` is the kept turn text (everything after the first closing action tag discarded). ``error`` says why an
    INVALID turn is invalid (tag and status, e.g. ``"<search>: empty"``). ``extras`` go to this turn's step record;
    ``carry`` completes the earlier retrieval step still awaiting the model's follow-up (HiPRAG ``conclusion``,
    TeaRAG ``summary``, ReasonRAG ``evidence``); ``substeps`` are steps finished inside this turn before its action.
    """

    action: Action
    text: str
    query: str | None = None
    mode: str | None = None
    entities: tuple[str, ...] = ()
    k: int | None = None
    answer: str | None = None
    error: str | None = None
    extras: Mapping[str, Any] = field(default_factory=dict)
    carry: Mapping[str, Any] = field(default_factory=dict)
    substeps: tuple[SubStep, ...] = ()


def invalid(text: str, error: str, **extras: Any) -> ParseResult:
    return ParseResult(Action.INVALID, text, error=error, extras=extras)


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


class Protocol(abc.ABC):
    """One agent format. Subclasses set ``name``, ``stop`` and implement :meth:`build_prompt` and :meth:`parse_turn`."""

    name: ClassVar[str]
    stop: ClassVar[tuple[str, ...]]
    default_mode: ClassVar[str] = "passage"
    mode_choice: ClassVar[str] = "run"  # who picks the retrieval mode: run (EngineConfig.mode), model, fixed, none
    writes_entities: ClassVar[bool] = False  # its searches name key entities (what kag and chunks_triplets seed with)
    followup: ClassVar[bool] = False  # a retrieval step is finished by the model's next turn (see ParseResult.carry)
    max_retrievals: ClassVar[int | None] = None
    pre_retrieval_mode: ClassVar[str | None] = None  # single-round baselines: retrieve before the first turn
    single_turn: ClassVar[bool] = False  # the episode ends after the first model turn, whatever it holds

    # --- prompts ---------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def build_prompt(self, question: str, context: str | None = None) -> str:
        """The initial prompt. ``context`` is the rendered retrieval of single-round baselines (else None)."""

    def prompt(self, state: EpisodeState) -> str:
        """The full text the model continues from at this point of the episode."""
        return state.prompt + state.transcript

    # --- parsing ---------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        """Read one model turn. Pure: ``state`` is only read (is a follow-up pending? has the episode started?)."""

    # --- observations ----------------------------------------------------------------------------------------
    def render_items(self, items: Sequence[RetrievedItem], start: int = 1) -> str:
        """Retrieved items as numbered documents, every title and text neutralised (see escaping)."""
        return "\n".join(render_item(it, start + i) for i, it in enumerate(items))

    def wrap_observation(self, body: str) -> str:
        """The observation text inserted after a retrieval turn, around the rendered items."""
        return f"\n\n<information>{body}</information>\n\n"

    def feedback(self, result: ParseResult) -> str:
        """Text inserted after an invalid turn (counts against the step budget)."""
        return f"\n{RETHINK}\n"

    def limit_feedback(self) -> str:
        """Text inserted when the model searches beyond ``max_retrievals``."""
        return "\nNo searches are left. Give the final answer now.\n"

    def advance(self, state: EpisodeState, result: ParseResult, observation: str) -> None:
        """Append the kept turn and what the environment inserted after it."""
        state.transcript += result.text + observation

    # --- episode-level checks --------------------------------------------------------------------------------
    def format_ok(self, state: EpisodeState, prediction: str | None) -> bool:
        """Default rule: an answer was given and no turn was invalid."""
        return prediction is not None and all(s.action is not Action.INVALID for s in state.steps)


def render_item(item: RetrievedItem, number: int) -> str:
    """``Doc 3 (Title: Lyon) text`` for a chunk, ``Doc 4 (Triplet) (h, r, t)`` for a triplet; neutralised."""
    text = neutralise(item.text)
    if item.kind is ItemKind.TRIPLET:
        return f"Doc {number} (Triplet) {text}"
    if item.title:
        return f"Doc {number} (Title: {neutralise(item.title)}) {text}"
    return f"Doc {number} {text}"
