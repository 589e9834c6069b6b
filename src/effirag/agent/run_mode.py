"""Which retrieval mode a run may impose on a protocol: the check behind ``EngineConfig.mode`` / ``--mode``."""

from __future__ import annotations

import logging

from effirag.agent.protocols.base import AgentProtocol
from effirag.errors import ConfigError

log = logging.getLogger(__name__)


def check_run_mode(protocol: AgentProtocol, mode: str | None) -> None:
    """Refuse at run start, in one line naming both, a run mode (``EngineConfig.mode``) the protocol cannot run over.

    A run's mode replaces the protocol's own for every retrieval. It cannot apply to a protocol whose model picks the
    mode of each search (RouteRAG's routes), that never retrieves (zero-shot), or that is defined by its one retrieval
    (Single-Con, Single-PPR: over another mode it would be another baseline). Key entities make no pairing impossible:
    kag without them seeds its triplet search and PPR with the subquery alone, and the other modes leave the entities
    TeaRAG names unused; such a run goes ahead with a warning.
    """
    if mode is None:
        return
    own = protocol.pre_retrieval_mode or protocol.default_mode
    why = {
        "model": "its model picks the retrieval mode of each search; leave mode unset",
        "none": "it never retrieves; leave mode unset",
        "fixed": f"it is defined by its own retrieval mode {own!r}; use that or leave mode unset",
    }.get(protocol.mode_choice)
    if why is not None and not (protocol.mode_choice == "fixed" and mode == own):
        raise ConfigError("EngineConfig", "mode", mode, f"protocol {protocol.name!r} cannot run over it: {why}")
    from effirag.retrieval.modes import mode_class

    uses = mode_class(mode).uses_entities
    if protocol.writes_entities and not uses:
        log.warning("protocol %r names key entities that mode %r does not use", protocol.name, mode)
    elif uses and not protocol.writes_entities:
        log.warning(
            "mode %r seeds with key entities that protocol %r does not name: the query alone", mode, protocol.name
        )
