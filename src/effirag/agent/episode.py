"""The rollout engine's running state of one episode, how questions become episodes, and the token ledger's updates.

An :class:`Episode` is what the engine (:mod:`effirag.agent.engine`) keeps per sample while it runs: the trajectory
being built, the protocol's state, the token budget used and, on the token path, the context's ids and the typed
ledger (``TokenSegment``: kind, ids, behaviour log-probs) that ends up in ``Trajectory.tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from effirag.agent.config import EngineConfig
from effirag.agent.protocols.base import AgentProtocol, EpisodeState
from effirag.agent.protocols.replay import replay_state
from effirag.errors import BackendError
from effirag.llm.base import Generator, TokenGenerator
from effirag.types import QAExample, TokenKind, TokenSegment, Trajectory


@dataclass
class Episode:
    traj: Trajectory
    state: EpisodeState
    used_tokens: int = 0
    turns: int = 0
    done: bool = False
    end: str = ""
    segments: list[list[str]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)  # token path: every id of the context so far
    tokens: list[TokenSegment] = field(default_factory=list)  # token path: the episode's token ledger


def new_episodes(
    questions: Sequence[QAExample | str | Trajectory], protocol: AgentProtocol, cfg: EngineConfig
) -> list[Episode]:
    """``cfg.n`` episodes per question, in question order then sample order. Plain strings get ids ``q0``, ``q1``, …;
    a :class:`Trajectory` is an unfinished episode to continue (text path only): its state is rebuilt by
    ``replay_state`` and its budget used so far, turns, prompt tokens and tool errors carry over. New episodes have
    no prompt yet (the engine builds it)."""
    episodes: list[Episode] = []
    for i, q in enumerate(questions):
        if isinstance(q, Trajectory):
            if cfg.token_ids:
                raise BackendError(f"trajectory {q.question_id!r}: continuing an episode needs the text path")
            carried: dict[str, Any] = {k: q.extras[k] for k in ("prompt_tokens", "tool_errors") if k in q.extras}
            for s in range(cfg.n):
                t = Trajectory(q.question_id, q.question, protocol.name, sample_index=s, extras=dict(carried))
                episodes.append(Episode(t, replay_state(protocol, q), q.extras["used_tokens"], q.turns))
            continue
        qid, text = (q.id, q.question) if isinstance(q, QAExample) else (f"q{i}", str(q))
        for s in range(cfg.n):
            traj = Trajectory(question_id=qid, question=text, protocol=protocol.name, sample_index=s)
            episodes.append(Episode(traj, EpisodeState(question=text, prompt="")))
    return episodes


def token_generator(gen: Generator) -> TokenGenerator:
    if not isinstance(gen, TokenGenerator):
        raise BackendError(f"{gen.name}: EngineConfig.token_ids=True needs a generator with encode / generate_ids")
    return gen


def keep_ids(e: Episode, kind: TokenKind, ids: Sequence[int], logprobs: Sequence[float] | None = None) -> None:
    """Token path: extend the episode's context ids and record the segment (kind, ids, behaviour logprobs)."""
    if logprobs is not None and len(logprobs) != len(ids):
        raise BackendError(f"{len(logprobs)} logprobs for {len(ids)} sampled token ids")
    e.ids.extend(ids)
    lps = None if logprobs is None else tuple(float(x) for x in logprobs)
    e.tokens.append(TokenSegment(kind, tuple(int(x) for x in ids), lps))


def restart_ids(e: Episode, prompt_ids: list[int]) -> None:
    """Token path, rebuilt prompts: the context becomes ``prompt_ids``; a prompt recorded with no turn after it (the
    episode's first) is replaced rather than kept twice."""
    if e.tokens and e.tokens[-1].kind is TokenKind.PROMPT:
        e.tokens.pop()
    e.ids = []
    keep_ids(e, TokenKind.PROMPT, prompt_ids)
