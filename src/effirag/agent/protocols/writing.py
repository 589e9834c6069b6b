"""What a protocol's trajectory writer is given: a neutral script of a trajectory, independent of any format.

A training pipeline decides the *content* of a trajectory (which hops are searched, in what order, what the
observations hold, how a hop's evidence is stated, the last line of reasoning); a protocol decides its *format* (tags,
layout, its own lead phrases). :class:`TrajectoryScript` carries the content, as values and small callbacks, to
:meth:`~effirag.agent.protocols.base.AgentProtocol.write_turns`, which returns the turns a perfect model writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# One model turn and the observation the environment inserts after it (None when it inserts nothing).
Turn = tuple[str, "str | None"]

MOVE_KINDS = ("search", "known", "more")


@dataclass(frozen=True)
class Move:
    """One planned step: ``search`` hop i, answer hop i from memory (``known``), or ``more`` results for hop i.

    ``repeat`` marks a search that repeats an earlier one (the writer words it as a re-check)."""

    kind: str
    hop: int
    repeat: bool = False


@dataclass(frozen=True)
class ScriptHop:
    """One hop of a trajectory: its sub-question, answer, the entities it is about, and (for a hop the policy knows)
    the fact as a sentence."""

    question: str
    answer: str
    entities: tuple[str, ...] = ()
    known_text: str = ""


def _no_tail(next_hop: int | None) -> Sequence[str]:
    return ()


# Where a writer may insert extra reasoning (:attr:`TrajectoryScript.elaborate`): ``opening`` before the first
# action's own reasoning, ``after_evidence`` after a hop's evidence is stated (its hop index given), ``before_answer``
# before the final reasoning line.
ELABORATION_SLOTS = ("opening", "after_evidence", "before_answer")


def _no_elaboration(slot: str, hop: int | None) -> str:
    return ""


@dataclass(frozen=True)
class TrajectoryScript:
    """The content of one trajectory, for a protocol's writer.

    ``observe(hop, mode)`` is the observation inserted after a search of hop index ``hop`` in retrieval ``mode``;
    ``evidence(hop, observation)`` states what that observation says about the hop; ``reason`` is the last line of
    reasoning before the answer. Protocols whose retrieval turns are followed by a summary (TeaRAG) also write:
    ``summary_tail(next_hop)``, the sentences that end a summary (``next_hop`` is the hop index of the next search, or
    None after the last one), and, with ``known_in_summary``, each known hop that follows a search as a note in that
    search's summary. ``memory_steps`` asks formats whose grammar has a step answered without retrieval (TeaRAG's
    memory step) to write each known hop as such a step instead of leaving it unwritten. ``question_first`` asks
    formats whose step reasoning names the sub-question (HiPRAG) to write it before the choice to search or answer
    from memory. ``elaborate(slot, hop)`` is
    extra reasoning a writer inserts at each of :data:`ELABORATION_SLOTS` ('' inserts nothing): how a long-winded
    model restates, plans and hedges. Callbacks are called in the order the turns are written, so a caller's random
    draws keep their order."""

    question: str
    answer: str
    hops: tuple[ScriptHop, ...]
    moves: tuple[Move, ...]
    reason: str
    observe: Callable[[int, str], str]
    evidence: Callable[[int, str], str]
    summary_tail: Callable[[int | None], Sequence[str]] = _no_tail
    known_in_summary: bool = False
    memory_steps: bool = False
    question_first: bool = False
    elaborate: Callable[[str, int | None], str] = _no_elaboration

    def extra(self, slot: str, hop: int | None = None) -> list[str]:
        """The elaboration at ``slot`` as a list of zero or one sentence (for joining into a reasoning text)."""
        if slot not in ELABORATION_SLOTS:
            raise ValueError(f"TrajectoryScript.extra: unknown slot {slot!r}; known: {ELABORATION_SLOTS}")
        text = self.elaborate(slot, hop)
        return [text] if text else []

    def __post_init__(self) -> None:
        for i, m in enumerate(self.moves):
            if m.kind not in MOVE_KINDS:
                raise ValueError(f"TrajectoryScript: move {i} has kind {m.kind!r}; known: {MOVE_KINDS}")
            if not 0 <= m.hop < len(self.hops):
                raise ValueError(f"TrajectoryScript: move {i} names hop {m.hop} of {len(self.hops)}")
