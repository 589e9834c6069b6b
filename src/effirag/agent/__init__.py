"""The agent runtime: protocols (prompt builders, turn parsers, observation renderers) and the rollout engine."""

from effirag.agent.config import EngineConfig
from effirag.agent.engine import run_episodes
from effirag.agent.protocols import PROTOCOLS, AgentProtocol, get_protocol

__all__ = ["PROTOCOLS", "AgentProtocol", "EngineConfig", "get_protocol", "run_episodes"]
