"""Format rewards per protocol: the protocols' own format rule as a 0/1 reward (DEVELOPERS.md §6).

The rule itself belongs to each protocol (:meth:`~effirag.agent.protocols.base.AgentProtocol.format_check`, the
papers' rules described in :mod:`effirag.agent.protocols.format_rule`); the rollout engine sets
``Trajectory.format_ok`` from it, which the ``format`` reward term reads. These functions score turns that did not
come from the engine (the model's generations, in order), by the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from effirag.agent.protocols import (
    PROTOCOLS,
    AgentProtocol,
    SearchR1Protocol,
    get_protocol,
    hiprag_format_ok,
    protocol_class,
)
from effirag.agent.protocols.format_rule import FormatVerdict

SEARCH_R1_FAMILY = tuple(n for n in PROTOCOLS if issubclass(protocol_class(n), SearchR1Protocol))

__all__ = [
    "SEARCH_R1_FAMILY",
    "FormatVerdict",
    "check_turns",
    "format_reward",
    "hiprag_format_reward",
    "searchr1_format_reward",
    "tearag_format_reward",
]


def check_turns(protocol: str | AgentProtocol, turns: Sequence[str]) -> FormatVerdict:
    """``protocol``'s format verdict for the model's ``turns`` (its ``format_check_turns``)."""
    p = get_protocol(protocol) if isinstance(protocol, str) else protocol
    return p.format_check_turns(turns)


def format_reward(protocol: str | AgentProtocol, turns: Sequence[str]) -> float:
    """1.0 iff ``turns`` follow ``protocol``'s format rule, else 0.0."""
    return check_turns(protocol, turns).reward


def searchr1_format_reward(turns: Sequence[str], protocol: str = "searchr1") -> float:
    """Search-R1's tag state machine (``searchr1``, ``routerag`` or ``dsr1``): 1.0 iff every turn is a well-formed
    ``<think>`` plus exactly one action, retrievals then one final ``<answer>``; else 0.0."""
    if protocol not in SEARCH_R1_FAMILY:
        raise ValueError(f"protocol={protocol!r} is not of the Search-R1 family {SEARCH_R1_FAMILY}")
    return format_reward(protocol, turns)


def tearag_format_reward(turns: Sequence[str]) -> float:
    """TeaRAG eq. 6: 1.0 iff the turns follow the step format (entities → subquery, summary after every reference,
    ≤ 5 steps, non-empty ``Final answer:``), else 0.0."""
    return format_reward("tearag", turns)


def hiprag_format_reward(transcript: str) -> float:
    """HiPRAG's F(T) on a whole transcript (model text with the engine's ``<context>`` blocks): 1.0 iff
    :func:`~effirag.agent.protocols.hiprag.hiprag_format_ok` holds (the rule ``hiprag``'s episode check runs)."""
    return 1.0 if hiprag_format_ok(transcript).ok else 0.0
