""":func:`build_env`: the loaded environment of an :class:`~effirag.env.config.EnvConfig` — questions, protocol,
retriever (an index loaded here, or a client of `effirag serve retrieval`), judge, and, where the command samples
through a backend, the policy's generator. Every trainer, ``ask``, ``eval qa`` and ``data mcts`` build theirs here.

Item token counts are in the policy's own tokens (:class:`~effirag.retrieval.tokens.PolicyTokens`): a trainer passes
its tokenizer, a sampling command gets the generator built from ``model``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.agent import EngineConfig, get_protocol
from effirag.agent.protocols.base import AgentProtocol
from effirag.agent.run_mode import check_run_mode
from effirag.env.config import EnvConfig
from effirag.errors import ConfigError
from effirag.llm.base import Generator
from effirag.retrieval.base import Retriever
from effirag.rewards.judges import Judge
from effirag.types import QAExample


@dataclass
class Env:
    """A built environment: what an episode needs besides the policy's weights."""

    config: EnvConfig
    questions: list[QAExample]
    protocol: AgentProtocol
    retriever: Retriever | None
    judge: Judge | None
    generator: Generator | None = None
    """The policy's generator, when :func:`build_env` was given no tokenizer (a sampling command); else None."""

    @property
    def engine(self) -> EngineConfig:
        return self.config.engine

    @property
    def policy(self) -> Generator:
        """The policy's generator (an environment built for a trainer, from its tokenizer, has none)."""
        if self.generator is None:
            raise ValueError("this environment was built with the trainer's tokenizer: it holds no generator")
        return self.generator


def retrieves(cfg: EnvConfig) -> bool:
    """Whether the config's protocol searches at all (zero-shot never does)."""
    return get_protocol(cfg.protocol).mode_choice != "none"


def make_retriever(cfg: EnvConfig, tokens: Any, token: str | None = None) -> Retriever | None:
    """The retriever ``cfg`` names: a client of ``cfg.retriever`` (`effirag serve retrieval`, which holds the index;
    item token counts are then the server's; ``token``: its bearer token, default ``EFFIRAG_TOKEN``), else
    ``cfg.index`` loaded here with item counts in ``tokens`` (a tokenizer or generator), else None. Module-level,
    so that a Ray actor builds its own from the same config."""
    if cfg.retriever:
        from effirag.retrieval.remote import RemoteRetriever

        return RemoteRetriever(cfg.retriever, token=token if token is not None else os.environ.get("EFFIRAG_TOKEN"))
    if not cfg.index or not retrieves(cfg):
        return None
    from effirag.retrieval.facade import load_retriever
    from effirag.retrieval.tokens import PolicyTokens

    retriever = load_retriever(cfg.index, tokenizer=PolicyTokens(tokens), reranker=cfg.reranker or None).load()
    mode = cfg.engine.mode
    if mode is not None:  # an index without what the run's mode needs fails here, not at every search
        retriever.require(cfg.engine.passage_mode if mode == "passage" else mode)
    return retriever


def policy_and_retriever(cfg: EnvConfig, token: str | None = None) -> tuple[Generator, Retriever | None]:
    """(the generator ``cfg.model`` names, its retriever): what a Ray evaluation actor builds for itself."""
    from effirag.llm.factory import make_generator

    gen = make_generator(cfg.backend)
    return gen, make_retriever(cfg, gen, token)


def make_judge(cfg: EnvConfig, policy: Generator | None) -> Judge | None:
    """The step judge ``cfg.judge`` names (see :attr:`EnvConfig.judge`), or None. ``llm:BACKEND`` re-answers with
    ``policy`` (the judge itself when None); ``closed-book`` needs ``policy`` (in RL a
    :class:`~effirag.llm.live.LivePolicy` the trainer binds to its current weights)."""
    spec = cfg.judge.strip()
    kind, _, rest = spec.partition(":")
    if spec.lower() == "auto":
        world = Path(cfg.questions).parent / "world.json"
        kind, rest = ("world", str(world.parent)) if cfg.questions and world.is_file() else ("none", "")
    if kind.lower() in ("", "none"):
        return None
    if kind == "world":
        from effirag.rewards.judges import WorldJudge
        from effirag.world.world import World

        if not (Path(rest) / "world.json").is_file() and not Path(rest).is_file():
            raise ConfigError("EnvConfig", "judge", spec, "no EffiRAG-World there (a folder holding world.json)")
        return WorldJudge(World.load(rest))
    if spec.lower() == "closed-book":
        from effirag.rewards.judges import CLOSED_BOOK_F1, LexicalJudge

        if policy is None:
            raise ConfigError("EnvConfig", "judge", spec, "the closed-book judge needs the policy to re-answer")
        return LexicalJudge(policy, threshold=CLOSED_BOOK_F1)
    from effirag.llm.factory import make_generator
    from effirag.rewards.judges import LLMJudge

    return LLMJudge(make_generator(rest), policy=policy)


def _questions(cfg: EnvConfig, protocol: AgentProtocol) -> tuple[list[QAExample], AgentProtocol]:
    """The file's questions after the first ``holdout``, the first ``max_questions`` of them; with ``shots``, the
    demos drawn from the whole file are in the protocol's prompt and left out of the questions
    (:func:`effirag.agent.protocols.fewshot.split_demos`)."""
    from effirag.data.questions import load_questions

    loaded = load_questions(cfg.questions)
    questions = list(loaded.examples)[cfg.holdout :]
    if cfg.max_questions:
        questions = questions[: cfg.max_questions]
    if cfg.shots:
        from effirag.agent.protocols.fewshot import split_demos

        demos, rest = split_demos(loaded.examples, {p.id: p for p in loaded.passages}, cfg.shots)
        kept = {q.id for q in rest}
        questions, protocol = [q for q in questions if q.id in kept], protocol.use_demos(demos)
    return questions, protocol


def build_env(
    cfg: EnvConfig,
    tokens: Any = None,
    *,
    need_questions: bool = False,
    with_retriever: bool = True,
    load_policy: bool = True,
    owner: str = "EnvConfig",
    judge_policy: Generator | None = None,
) -> Env:
    """Check ``cfg`` against its protocol, then load the questions (when named), the retriever and the judge.

    ``tokens``: the policy's tokenizer (a trainer's); None: the generator of ``cfg.model`` is built (and loaded) and
    counts the tokens. ``need_questions``: a missing questions file is an error (a trainer's). ``with_retriever``:
    False when the retrieval runs elsewhere (Ray actors build their own). ``load_policy``: False leaves the built
    generator unloaded (it only names the backend: Ray actors load their own). ``owner`` names the run config in
    errors. ``judge_policy``: who re-answers the judge's sub-questions (a trainer's live policy); default the built
    generator.
    """
    protocol = get_protocol(cfg.protocol)
    check_run_mode(protocol, cfg.engine.mode)
    env = "" if owner == "EnvConfig" else "env."  # the fields' path in the run config errors name
    if need_questions and not cfg.questions:
        raise ConfigError(owner, f"{env}questions", cfg.questions, "a questions file is required")
    if protocol.mode_choice != "none" and not (cfg.index or cfg.retriever):
        why = f"protocol {cfg.protocol!r} retrieves: name an index folder (or a retriever URL)"
        raise ConfigError(owner, f"{env}index", cfg.index, why)
    if cfg.index and not Path(cfg.index).is_dir():
        raise ConfigError(owner, f"{env}index", cfg.index, f"index folder not found: {cfg.index}")
    questions, protocol = _questions(cfg, protocol) if cfg.questions else ([], protocol)
    generator = None
    if tokens is None:
        from effirag.llm.factory import make_generator

        generator = tokens = make_generator(cfg.backend, load=load_policy)
    retriever = make_retriever(cfg, tokens) if with_retriever else None
    judge = make_judge(cfg, judge_policy if judge_policy is not None else generator)
    return Env(cfg, questions, protocol, retriever, judge, generator)
