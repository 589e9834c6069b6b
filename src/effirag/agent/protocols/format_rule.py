"""A protocol's format rule over an episode's turns: the one definition of "well-formed" (DEVELOPERS.md §6).

The rollout engine's ``Trajectory.format_ok`` (hence the ``format`` reward term, DPO scoring and every report's
format rate) and verl's ``compute_score`` all call :meth:`AgentProtocol.format_check` /
:meth:`AgentProtocol.format_check_turns`, which run :func:`check_turns`. The papers' rules:

- **Search-R1 family** (``searchr1``, ``routerag``, ``dsr1``): Search-R1's tag state machine at the turn level —
  every turn is ``<think>`` followed by one action; all turns but the last are retrievals (``<search>``, or
  ``<more info>`` after a search for Dynamic Search-R1), each answered by an observation; the last turn is the one
  ``<answer>``; nothing follows an action tag.
- **TeaRAG** (eq. 6): r_f = 1 iff every step is entities → subquery, every ``<Reference>`` is followed by a summary,
  at most 5 steps, and the episode ends with a non-empty ``Final answer:``.
- **HiPRAG** F(T): :func:`effirag.agent.protocols.hiprag.hiprag_format_ok` over the whole transcript.
- Every other protocol (ReasonRAG, the single-round baselines): every turn parses to a valid action, retrievals
  within the protocol's limit, and the episode ends with its answer.

The turns are replayed through the protocol's ``parse_turn`` exactly as the rollout engine feeds them (observations
inserted with empty bodies: a format never depends on what retrieval returned); each accepted turn must also pass
the protocol's per-turn rule (``turn_format_error``) and the finished episode its episode rule
(``episode_format_error``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from effirag.agent.protocols.state import EpisodeState, ParseResult
from effirag.types import Action, Step

if TYPE_CHECKING:
    from effirag.agent.protocols.base import AgentProtocol


@dataclass(frozen=True)
class FormatVerdict:
    """Whether an episode follows a protocol's format; when not, the first violation and its turn index (-1: the
    episode as a whole)."""

    ok: bool
    reason: str = ""
    turn: int = -1
    results: tuple[ParseResult, ...] = field(default=(), repr=False)

    @property
    def reward(self) -> float:
        return 1.0 if self.ok else 0.0


def check_turns(p: AgentProtocol, turns: Sequence[str]) -> FormatVerdict:
    """Replay ``turns`` (the model's generations, in order) through ``p``'s parser and format rules."""
    state = EpisodeState(question="", prompt="")
    results: list[ParseResult] = []

    def fail(i: int, why: str) -> FormatVerdict:
        return FormatVerdict(False, why, i, tuple(results))

    if not turns:
        return fail(-1, "no turns")
    for i, turn in enumerate(turns):
        r = p.parse_turn(turn, state)
        results.append(r)
        if r.action is Action.INVALID:
            return fail(i, r.error or "invalid turn")
        if turn[len(r.text) :].strip():
            return fail(i, "text after the action tag")
        if (why := p.turn_format_error(r)) is not None:
            return fail(i, why)
        if r.followup is not None and state.pending is not None:
            state.pending = None
        state.steps.extend(Step(Action.REASON, text=s.text) for s in r.substeps)
        state.steps.append(Step(r.action, text=r.text, query=r.query))
        if r.action in (Action.SEARCH, Action.MORE_INFO):
            if r.action is Action.MORE_INFO and state.last_query is None:
                return fail(i, "<more info> before any search")
            if p.max_retrievals is not None and state.n_retrievals >= p.max_retrievals:
                return fail(i, f"retrieval limit {p.max_retrievals} exceeded")
            if i == len(turns) - 1:
                return fail(i, "ends with a retrieval, not an answer")
            state.n_retrievals += 1
            state.last_query = r.query or state.last_query
            if p.followup:
                state.pending = len(state.steps) - 1
            p.advance(state, r, p.wrap_observation(""))
        elif r.action is Action.ANSWER:
            if i != len(turns) - 1:
                return fail(i + 1, "turns after the answer")
            p.advance(state, r, "")
        else:
            p.advance(state, r, "")
    if results[-1].action is not Action.ANSWER:
        return fail(len(turns) - 1, "no answer")
    if (why := p.episode_format_error(state)) is not None:
        return fail(-1, why)
    return FormatVerdict(True, "", -1, tuple(results))
