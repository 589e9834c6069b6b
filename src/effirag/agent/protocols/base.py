"""The protocol interface: prompt builder, turn parser, observation renderer, stop strings.

A protocol is everything the rollout engine needs to know about one agent format; the engine itself knows no tag.
Builders are pure (no I/O, no randomness) so that SFT data construction can call them and produce exactly the text the
parser accepts: each protocol also offers ``render_*`` helpers that write what a perfect model would write for a turn,
and :meth:`AgentProtocol.write_turns`, which writes a whole trajectory from a format-free
:class:`~effirag.agent.protocols.writing.TrajectoryScript`. :meth:`AgentProtocol.training_segments` (gold turns) and
:meth:`AgentProtocol.trajectory_segments` (an engine trajectory) cut a trajectory into masked training segments.

Episode anatomy (append-only protocols): ``prompt = build_prompt(question) + turn_1 + observation_1 + turn_2 + …``.
ReasonRAG, whose prompt changes with its stage, overrides :meth:`AgentProtocol.prompt` and
:meth:`AgentProtocol.advance`.
"""

from __future__ import annotations

import abc
import random
from collections.abc import Sequence
from typing import ClassVar

from effirag.agent.escaping import neutralise
from effirag.agent.protocols.fewshot import Demo, demo_turns
from effirag.agent.protocols.format_rule import FormatVerdict, check_turns
from effirag.agent.protocols.replay import ReplayTurn, replay_turns, sampled_turns
from effirag.agent.protocols.state import EpisodeState, FollowUp, ParseResult, SubStep, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
from effirag.errors import ConfigError
from effirag.types import Action, ItemKind, RetrievedItem, Segment, Step, Trajectory

RETHINK = "My action is not correct. Let me rethink."

__all__ = [
    "RETHINK",
    "AgentProtocol",
    "EpisodeState",
    "FollowUp",
    "FormatVerdict",
    "ParseResult",
    "SubStep",
    "invalid",
    "render_item",
]


class AgentProtocol(abc.ABC):
    """One agent format. Subclasses set ``name``, ``stop`` and implement :meth:`build_prompt` and :meth:`parse_turn`."""

    name: ClassVar[str]
    stop: ClassVar[tuple[str, ...]]
    default_mode: ClassVar[str] = "passage"
    mode_choice: ClassVar[str] = "run"  # who picks the retrieval mode: run (EngineConfig.mode), model, fixed, none
    writes_entities: ClassVar[bool] = False  # its searches name key entities (what kag and chunks_triplets seed with)
    followup: ClassVar[bool] = False  # a retrieval step is finished by the model's next turn (see ParseResult.followup)
    max_retrievals: ClassVar[int | None] = None
    pre_retrieval_mode: ClassVar[str | None] = None  # single-round baselines: retrieve before the first turn
    single_turn: ClassVar[bool] = False  # the episode ends after the first model turn, whatever it holds
    fewshot: ClassVar[bool] = False  # has a few-shot variant (preamble, demos, question block) for base models
    demos: tuple[Demo, ...] = ()  # worked examples shown before the question (set by use_demos)

    # --- prompts ---------------------------------------------------------------------------------------------
    def use_demos(self, demos: Sequence[Demo]) -> AgentProtocol:
        """Switch to the few-shot prompt: ``demos`` (from a training split) are written in this protocol's format
        between the preamble and the question. Returns ``self``."""
        if demos and not self.fewshot:
            raise ConfigError("protocol", "prompt_style", "fewshot", f"{self.name} has no few-shot prompt variant")
        self.demos = tuple(demos)
        return self

    def shots(self) -> str:
        """The demos as solved examples: each one's question block, the turns a perfect model writes, a blank line.
        Single-round baselines see each demo's gold passages as their retrieved context."""
        out = []
        for d in self.demos:
            context = self.wrap_observation(self.render_items(d.documents())) if self.pre_retrieval_mode else None
            out.append(self.question_block(d.question, context) + demo_turns(self, d) + "\n\n")
        return "".join(out)

    def question_block(self, question: str, context: str | None = None) -> str:
        """The part of the prompt about one question (few-shot protocols override it)."""
        raise ValueError(f"{self.name}: this protocol has no few-shot prompt variant")

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

    # --- the format rule (the paper's; see effirag.agent.protocols.format_rule) ----------------------------------
    def format_check(self, trajectory: Trajectory) -> FormatVerdict:
        """This format's rule over an episode: its turns (:func:`sampled_turns`, the texts the engine kept) through
        :meth:`format_check_turns`. No prediction (the episode ran out of turns or tokens) is a violation. The engine
        sets ``Trajectory.format_ok`` from it; the ``format`` reward term and the reports read that."""
        if trajectory.protocol != self.name:
            raise ValueError(
                f"{self.name}: trajectory {trajectory.question_id!r} is of protocol {trajectory.protocol!r}"
            )
        if trajectory.prediction is None:
            return FormatVerdict(False, "no answer", -1)
        turns, _ = sampled_turns(self, trajectory)
        return self.format_check_turns([t.text for t in turns])

    def format_check_turns(self, turns: Sequence[str]) -> FormatVerdict:
        """This format's rule over the model's ``turns`` as generated, in order (:func:`check_turns`)."""
        return check_turns(self, turns)

    def turn_format_error(self, result: ParseResult) -> str | None:
        """Why a turn the parser accepted still breaks the format's per-turn rule (None: it does not)."""
        return None

    def episode_format_error(self, state: EpisodeState) -> str | None:
        """Why an episode whose every turn was accepted, ending in its answer, still breaks the format's
        episode rule (None: it does not). ``state`` is the replayed episode with empty observations."""
        return None

    # --- token accounting -------------------------------------------------------------------------------------
    def generated_parts(self, step: Step) -> dict[str, str]:
        """The pieces of a step's generated text by purpose, for the token ledger: ``answer`` (the final answer) and
        ``summary`` (a summary of retrieved text), each absent when the step has none; everything else the step
        generated counts as reasoning. Default: the answer of an answering step."""
        return {"answer": step.answer} if step.action is Action.ANSWER and step.answer else {}

    # --- preference data --------------------------------------------------------------------------------------
    def turn_content(self, text: str, stage: str | None) -> str:
        """What a turn says apart from its wording, as a comparable key: two sibling turns (same prompt) with equal
        keys differ only in how they phrase the same content, so a value gap between them measures luck, not the
        text. ``stage`` is the turn's parsed stage (None in single-stage formats). Default: the text itself (every
        different text is different content)."""
        return text

    # --- training text ---------------------------------------------------------------------------------------
    # What an SFT plan may waste a step on: a search for a hop the policy already knows, and (formats with a deep
    # paging action) a needless request for more results.
    known_search_waste: ClassVar[bool] = True
    more_info_waste: ClassVar[bool] = False

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """The turns a perfect model writes for ``script`` in this format, each with the observation inserted after
        it. ``rng`` draws only the format's own choices (none by default)."""
        raise ValueError(f"{self.name}: this protocol has no trajectory writer")

    def training_segments(
        self, question: str, turns: Sequence[Turn], context: str | None = None
    ) -> list[list[Segment]]:
        """Gold ``turns`` (each with its observation) replayed as the engine would see them, cut into (prompt,
        completion) segment lists: the policy's turns trained, the prompt and inserted text not. ``context`` is the
        single-round baselines' retrieval. Every turn must parse to a valid action with its text kept whole;
        otherwise ValueError names the turn and why."""
        return replay_turns(self, question, [ReplayTurn(text, obs) for text, obs in turns], context)

    def trajectory_segments(self, trajectory: Trajectory) -> list[list[Segment]]:
        """A sampled engine trajectory cut like :meth:`training_segments`, from its steps' texts and observations;
        invalid turns stay (trained, as the policy wrote them) with the engine's feedback after them untrained."""
        if trajectory.protocol != self.name:
            raise ValueError(
                f"{self.name}: trajectory {trajectory.question_id!r} is of protocol {trajectory.protocol!r}"
            )
        turns, context = sampled_turns(self, trajectory)
        return replay_turns(self, trajectory.question, turns, context, strict=False)


def render_item(item: RetrievedItem, number: int) -> str:
    """``Doc 3 (Title: Lyon) text`` for a chunk, ``Doc 4 (Triplet) (h, r, t)`` for a triplet; neutralised."""
    text = neutralise(item.text)
    if item.kind is ItemKind.TRIPLET:
        return f"Doc {number} (Triplet) {text}"
    if item.title:
        return f"Doc {number} (Title: {neutralise(item.title)}) {text}"
    return f"Doc {number} {text}"
