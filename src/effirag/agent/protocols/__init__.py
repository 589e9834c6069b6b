"""Agent protocols and their registry: ``get_protocol(name)`` for every name in ``PROTOCOLS``."""

from __future__ import annotations

from typing import Any

from effirag.agent.protocols.base import RETHINK, AgentProtocol, EpisodeState, FollowUp, ParseResult, SubStep
from effirag.agent.protocols.baselines import NaiveRAGProtocol, SingleConProtocol, SinglePPRProtocol, ZeroShotProtocol
from effirag.agent.protocols.format_rule import FormatVerdict
from effirag.agent.protocols.hiprag import FormatCheck, HiPRAGProtocol, hiprag_format_ok
from effirag.agent.protocols.reasonrag import ReasonRAGProtocol
from effirag.agent.protocols.searchr1 import DynamicSearchR1Protocol, RouteRAGProtocol, SearchR1Protocol
from effirag.agent.protocols.tearag import TeaRAGProtocol
from effirag.agent.protocols.writing import Move, ScriptHop, TrajectoryScript, Turn
from effirag.errors import ConfigError

_CLASSES: dict[str, type[AgentProtocol]] = {
    c.name: c
    for c in (
        SearchR1Protocol,
        RouteRAGProtocol,
        DynamicSearchR1Protocol,
        HiPRAGProtocol,
        TeaRAGProtocol,
        ReasonRAGProtocol,
        ZeroShotProtocol,
        NaiveRAGProtocol,
        SingleConProtocol,
        SinglePPRProtocol,
    )
}
PROTOCOLS: tuple[str, ...] = tuple(_CLASSES)


def protocol_class(name: str) -> type[AgentProtocol]:
    """The class registered as ``name`` (one of :data:`PROTOCOLS`), e.g. to read its capabilities."""
    cls = _CLASSES.get(name)
    if cls is None:
        raise ConfigError("protocol", "name", name, f"unknown protocol; known: {', '.join(PROTOCOLS)}")
    return cls


def get_protocol(name: str, **options: Any) -> AgentProtocol:
    """The protocol registered as ``name`` (one of :data:`PROTOCOLS`); ``options`` go to its constructor."""
    return protocol_class(name)(**options)


__all__ = [
    "PROTOCOLS",
    "RETHINK",
    "AgentProtocol",
    "DynamicSearchR1Protocol",
    "EpisodeState",
    "FollowUp",
    "FormatCheck",
    "FormatVerdict",
    "HiPRAGProtocol",
    "Move",
    "NaiveRAGProtocol",
    "ParseResult",
    "ReasonRAGProtocol",
    "RouteRAGProtocol",
    "ScriptHop",
    "SearchR1Protocol",
    "SingleConProtocol",
    "SinglePPRProtocol",
    "SubStep",
    "TeaRAGProtocol",
    "TrajectoryScript",
    "Turn",
    "ZeroShotProtocol",
    "get_protocol",
    "hiprag_format_ok",
    "protocol_class",
]
