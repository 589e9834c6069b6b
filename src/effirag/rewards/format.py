"""Format rewards per protocol, built on the protocols' own parsers (DEVELOPERS.md §6: one parser per protocol).

- **Search-R1 family** (``searchr1``, ``routerag``, ``dsr1``): Search-R1's tag state machine at the turn level —
  every turn is ``<think>`` followed by one action; all turns but the last are retrievals (``<search>``, or
  ``<more info>`` after a search for Dynamic Search-R1), each answered by an observation; the last turn is the one
  ``<answer>``; nothing follows an action tag.
- **TeaRAG** (eq. 6): r_f = 1 iff every step is entities → subquery, every ``<Reference>`` is followed by a summary,
  at most 5 steps, and the episode ends with a non-empty ``Final answer:``.
- **HiPRAG** F(T): :func:`effirag.agent.protocols.hiprag.hiprag_format_ok` over the whole transcript.

Which protocols have a turn-level rule is theirs to say (``AgentProtocol.turn_format``, with any extra per-turn
check in ``turn_format_error``). The turn-level rewards replay the model's turns through the protocol's
``parse_turn`` exactly as the rollout engine feeds them (observations are inserted with empty bodies: a format never
depends on what retrieval returned), then ask the protocol's episode-level rule (``AgentProtocol.format_ok``). The
turns of an engine trajectory are the texts of its steps that are not inside a turn:
``[s.text for s in traj.steps if not s.within_turn]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from effirag.agent.protocols import (
    PROTOCOLS,
    AgentProtocol,
    SearchR1Protocol,
    get_protocol,
    hiprag_format_ok,
    protocol_class,
)
from effirag.agent.protocols.base import EpisodeState, ParseResult
from effirag.types import Action, Step

SEARCH_R1_FAMILY = tuple(n for n in PROTOCOLS if issubclass(protocol_class(n), SearchR1Protocol))
REPLAYABLE = tuple(n for n in PROTOCOLS if protocol_class(n).turn_format)


@dataclass(frozen=True)
class FormatVerdict:
    """Whether a sequence of turns follows a protocol's format; when not, the first violation and its turn index."""

    ok: bool
    reason: str = ""
    turn: int = -1
    results: tuple[ParseResult, ...] = field(default=(), repr=False)

    @property
    def reward(self) -> float:
        return 1.0 if self.ok else 0.0


def _protocol(protocol: str | AgentProtocol) -> AgentProtocol:
    p = get_protocol(protocol) if isinstance(protocol, str) else protocol
    if not p.turn_format:
        raise ValueError(f"no turn-level format rule for protocol {p.name!r}; supported: {', '.join(REPLAYABLE)}")
    return p


def check_turns(protocol: str | AgentProtocol, turns: Sequence[str]) -> FormatVerdict:
    """Replay ``turns`` (the model's generations, in order) through ``protocol``'s parser and format rule."""
    p = _protocol(protocol)
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
    last = results[-1]
    if last.action is not Action.ANSWER:
        return fail(len(turns) - 1, "no answer")
    if not p.format_ok(state, last.answer):
        return fail(len(turns) - 1, f"{p.name} episode format rule failed")
    return FormatVerdict(True, "", -1, tuple(results))


def searchr1_format_reward(turns: Sequence[str], protocol: str = "searchr1") -> float:
    """Search-R1's tag state machine (``searchr1``, ``routerag`` or ``dsr1``): 1.0 iff every turn is a well-formed
    ``<think>`` plus exactly one action, retrievals then one final ``<answer>``; else 0.0."""
    if protocol not in SEARCH_R1_FAMILY:
        raise ValueError(f"protocol={protocol!r} is not of the Search-R1 family {SEARCH_R1_FAMILY}")
    return check_turns(protocol, turns).reward


def tearag_format_reward(turns: Sequence[str]) -> float:
    """TeaRAG eq. 6: 1.0 iff the turns follow the step format (entities → subquery, summary after every reference,
    ≤ 5 steps, non-empty ``Final answer:``), else 0.0."""
    return check_turns("tearag", turns).reward


def hiprag_format_reward(transcript: str) -> float:
    """HiPRAG's F(T): 1.0 iff the whole transcript (model text with the engine's ``<context>`` blocks) passes
    :func:`~effirag.agent.protocols.hiprag.hiprag_format_ok`, else 0.0."""
    return 1.0 if hiprag_format_ok(transcript).ok else 0.0


def format_reward(protocol: str, turns: Sequence[str]) -> float:
    """The format reward of ``protocol`` for a sequence of model turns (HiPRAG: its rule on the replayed transcript)."""
    return check_turns(protocol, turns).reward
