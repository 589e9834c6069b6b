"""EffiRAG as a verl agent loop: verl samples, EffiRAG's engine runs the episode.

verl (``verl.experimental.agent_loop``) builds one agent loop per sample (``hydra.utils.instantiate`` of an entry
of ``actor_rollout_ref.rollout.agent.agent_loop_config_path``, e.g. ``configs/verl/agent_loop.yaml``, with
``trainer_config``, ``server_manager``, ``tokenizer`` and ``processor``) and awaits ``run(sampling_params,
**row)``. :class:`EffiRAGAgentLoop` runs the row's question through :func:`effirag.agent.engine.run_episodes` on the
token path, with:

- generation by verl's rollout servers: :class:`ServerTokenGenerator` sends each turn's context ids to
  ``server_manager.generate(request_id, prompt_ids=…, sampling_params=…)`` (one request id per episode, so verl's
  sticky sessions reuse the prefix cache) with the protocol's stop strings and the turn's token budget, and finishes
  the returned ids by the rule every EffiRAG token backend applies (:func:`effirag.llm.tokens.finish_ids`);
- search by ``effirag serve retrieval`` (:class:`~effirag.retrieval.remote.RemoteRetriever`), every protocol's own
  search syntax and observation format (the model never sees verl's tool schema);
- the output from the engine's token segments (:func:`loop_output`): the first prompt segment is ``prompt_ids``;
  generated ids are the response with mask 1 and their log-probs, inserted observations and engine feedback have
  mask 0 (log-prob 0.0).

Any protocol whose prompt is append-only runs (all but ReasonRAG, whose prompt is rebuilt between stages and so has
no single prompt / response split). The reward is left to verl's reward manager: the decoded response is in the
protocol's own tags, which :func:`effirag.integrations.verl.compute_score` reads.

verl does not share EffiRAG's environment. When ``verl`` is importable, :class:`EffiRAGAgentLoop` subclasses its
``AgentLoopBase`` and returns its ``AgentLoopOutput``; otherwise it returns :class:`LoopOutput`, which has the same
fields. The engine is synchronous: each episode runs in a worker thread, and the coroutines of the server manager
run on the agent loop's own event loop (``asyncio.run_coroutine_threadsafe``), so episodes run concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from effirag.agent.config import EngineConfig
from effirag.agent.engine import run_episodes
from effirag.agent.protocols import AgentProtocol, get_protocol
from effirag.config import check, from_dict, option
from effirag.errors import BackendError, ConfigError, DataError
from effirag.integrations.verl import REBUILT, exportable
from effirag.llm.base import Completion, GenerationConfig, special_strings
from effirag.llm.tokens import finish_ids
from effirag.retrieval.base import Retriever
from effirag.types import TokenKind, TokenSegment, Trajectory

try:  # verl's own classes where verl is installed; EffiRAG's stand-ins (same fields) elsewhere
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase as _Base  # type: ignore[import-not-found]
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics as _Metrics
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput as _Output

    HAVE_VERL = True
except ImportError:  # pragma: no cover - depends on the environment
    _Base, _Metrics, _Output = object, None, None
    HAVE_VERL = False

# What verl itself passes along with the entry's keys (the entry's name; newer verl, its dataset class and config).
_VERL_KWARGS = ("name", "dataset_cls", "data_config", "dataset_config")


@dataclass(frozen=True)
class LoopConfig:
    """The agent loop entry's own keys (everything but verl's ``name`` / ``_target_``)."""

    protocol: str = option("searchr1", help="EffiRAG protocol the policy writes (any append-only protocol).")
    retriever: str = option("http://127.0.0.1:8000", help="URL of `effirag serve retrieval` (its /search route).")
    token_env: str = option(
        "EFFIRAG_TOKEN", help="Environment variable holding the retrieval server's bearer token (unset: none)."
    )
    chat_template: bool = option(
        True, help="Wrap the protocol's prompt as one user message in the tokenizer's chat template (else raw text)."
    )
    response_length: int | None = option(
        None, help="Most response tokens (None: verl's actor_rollout_ref.rollout.response_length); the rest is cut."
    )
    threads: int = option(64, help="Episodes run at once per agent loop worker (one thread each).")
    engine: EngineConfig = option(
        factory=EngineConfig,
        help="Budgets of an episode (max_steps, max_new_tokens per turn, max_total_tokens, k, mode, ...); n, seed, "
        "temperature and top_p are verl's.",
    )

    def __post_init__(self) -> None:
        check(self.retriever.startswith(("http://", "https://")), self, "retriever", "must be an http(s) URL")
        check(self.response_length is None or self.response_length >= 1, self, "response_length", "must be >= 1")
        check(self.threads >= 1, self, "threads", "must be >= 1")
        try:
            protocol = get_protocol(self.protocol)
        except (KeyError, ValueError) as e:
            raise ConfigError(type(self).__name__, "protocol", self.protocol, str(e)) from e
        check(exportable(protocol) != REBUILT, self, "protocol", f"cannot run as a verl agent loop: {REBUILT}")


@dataclass
class LoopOutput:
    """verl's ``AgentLoopOutput`` fields, for where verl is not installed."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None = None
    reward_score: float | None = None
    num_turns: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    extra_fields: dict[str, Any] = field(default_factory=dict)


def loop_output(segments: Sequence[TokenSegment], response_length: int) -> LoopOutput:
    """verl's prompt / response split of an episode's token ledger (``Trajectory.tokens``): the first segment must be
    the prompt and the only one. ``response_logprobs`` is None when a generated segment has none; the response (mask,
    log-probs) is cut to ``response_length``."""
    if not segments or segments[0].kind is not TokenKind.PROMPT:
        raise DataError("token segments must start with the prompt", field="tokens", value=list(segments[:1]))
    ids: list[int] = []
    mask: list[int] = []
    lps: list[float] | None = []
    for i, seg in enumerate(segments[1:], 1):
        if seg.kind is TokenKind.PROMPT:
            raise DataError(f"segment {i} is a second prompt (a rebuilt prompt)", field="tokens", value=seg.kind.value)
        trained = seg.kind is TokenKind.GENERATED
        ids.extend(seg.ids)
        mask.extend([int(trained)] * len(seg.ids))
        if lps is not None:
            if trained and seg.logprobs is None:
                lps = None
            else:
                lps += list(seg.logprobs) if trained and seg.logprobs is not None else [0.0] * len(seg.ids)
    n = response_length
    return LoopOutput(list(segments[0].ids), ids[:n], mask[:n], None if lps is None else lps[:n])


@dataclass
class _Call:
    """The server manager and what every request of one episode shares."""

    server: Any
    loop: asyncio.AbstractEventLoop
    request_id: str
    params: dict[str, Any]  # verl's sampling params other than those a turn sets


class ServerTokenGenerator:
    """A :class:`~effirag.llm.base.TokenGenerator` over verl's server manager (see the module docstring).

    Called from a worker thread; each prompt of a call is one ``server_manager.generate`` coroutine submitted to
    ``call.loop``. The server's answer is verl's ``TokenOutput`` (``token_ids``, ``log_probs``) or, from older verl,
    a plain id list."""

    def __init__(self, tokenizer: Any, call: _Call, *, chat_template: bool, eos_ids: frozenset[int]) -> None:
        self.tokenizer = tokenizer
        self.call = call
        self.chat_template = chat_template
        self.eos_ids = eos_ids

    @property
    def name(self) -> str:
        return f"verl-server:{self.call.request_id}"

    @property
    def control_strings(self) -> tuple[str, ...]:
        return special_strings(self.tokenizer)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        if prompt and self.chat_template:
            msgs = [{"role": "user", "content": text}]
            got = self.tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
            return list(got["input_ids"] if isinstance(got, Mapping) else got)
        return list(self.tokenizer.encode(text, add_special_tokens=prompt))

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        return self.generate_ids([self.encode(p, prompt=True) for p in prompts], config)

    def generate_ids(self, prompts: Sequence[Sequence[int]], config: GenerationConfig) -> list[list[Completion]]:
        params = {
            **self.call.params,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "max_tokens": config.max_new_tokens,
            "stop": list(config.stop),
            "include_stop_str_in_output": True,
        }
        futures = [
            asyncio.run_coroutine_threadsafe(
                self.call.server.generate(self.call.request_id, prompt_ids=list(p), sampling_params=dict(params)),
                self.call.loop,
            )
            for p in prompts
            for _ in range(config.n)
        ]
        outs = [self._finish(f.result(), config) for f in futures]
        return [outs[i * config.n : (i + 1) * config.n] for i in range(len(prompts))]

    def _finish(self, out: Any, config: GenerationConfig) -> Completion:
        ids = [int(t) for t in (out if isinstance(out, list) else out.token_ids)]
        lps = None if isinstance(out, list) else getattr(out, "log_probs", None)
        if lps is not None and len(lps) != len(ids):
            raise BackendError(f"{self.name}: {len(lps)} log-probs for {len(ids)} token ids")
        return finish_ids(
            ids, None if lps is None else [float(x) for x in lps], config.stop, self.eos_ids, self._decode
        )

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False))


class EffiRAGAgentLoop(_Base):  # type: ignore[misc,valid-type]
    """One verl sample as one EffiRAG episode (see the module docstring).

    ``trainer_config``: verl's wrapper of the trainer config (its ``.config``; ``response_length`` is read from
    ``actor_rollout_ref.rollout``); ``server_manager``: verl's ``AsyncLLMServerManager`` or any object with its
    ``async generate(request_id, *, prompt_ids, sampling_params)``; ``tokenizer``: the policy's HF tokenizer.
    ``kwargs``: the agent loop entry's keys, :class:`LoopConfig` fields (verl's own ``name`` is ignored)."""

    _executors: ClassVar[dict[int, ThreadPoolExecutor]] = {}
    _retrievers: ClassVar[dict[tuple[str, str | None], Retriever]] = {}

    def __init__(
        self, trainer_config: Any, server_manager: Any, tokenizer: Any, processor: Any = None, **kwargs: Any
    ) -> None:
        self.cfg = from_dict(
            LoopConfig, {k: v for k, v in kwargs.items() if k not in _VERL_KWARGS}, source="agent loop"
        )
        self.config = getattr(trainer_config, "config", trainer_config)
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.protocol: AgentProtocol = get_protocol(self.cfg.protocol)
        length = self.cfg.response_length or _rollout_value(self.config, "response_length")
        if not isinstance(length, int) or length < 1:
            raise ConfigError("LoopConfig", "response_length", length, "unset here and in verl's rollout config")
        self.response_length = length

    def retriever(self) -> Retriever:
        """The retrieval server's client, one per URL and token per process (thread-safe, keeps connections)."""
        import os

        from effirag.retrieval.remote import RemoteRetriever

        token = os.environ.get(self.cfg.token_env) or None
        key = (self.cfg.retriever, token)
        if key not in self._retrievers:
            self._retrievers[key] = RemoteRetriever(self.cfg.retriever, token=token)
        return self._retrievers[key]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        """Run the row's question (``extra_info.question``, as ``effirag export verl`` writes it) as one episode."""
        extra = kwargs.get("extra_info") or {}
        question = extra.get("question") if isinstance(extra, Mapping) else None
        if not isinstance(question, str) or not question.strip():
            raise DataError("the row has no question", field="extra_info.question", value=question)
        params = {k: v for k, v in sampling_params.items() if k not in ("temperature", "top_p")}
        engine = dataclasses.replace(
            self.cfg.engine,
            n=1,
            seed=None,
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            token_ids=True,
        )
        loop = asyncio.get_running_loop()
        call = _Call(self.server_manager, loop, uuid.uuid4().hex, params)
        eos = frozenset({int(self.tokenizer.eos_token_id)} if self.tokenizer.eos_token_id is not None else ())
        gen = ServerTokenGenerator(self.tokenizer, call, chat_template=self.cfg.chat_template, eos_ids=eos)
        pool = self._executors.setdefault(self.cfg.threads, ThreadPoolExecutor(self.cfg.threads, "effirag-verl"))
        t0 = time.perf_counter()
        trajs = await loop.run_in_executor(
            pool, lambda: run_episodes(gen, self.retriever(), self.protocol, [question], engine)
        )
        traj = trajs[0]
        traj.question_id = str(extra.get("question_id", traj.question_id))
        return self._output(traj, time.perf_counter() - t0)

    def _output(self, traj: Trajectory, wall_s: float) -> Any:
        out = loop_output(traj.tokens, self.response_length)
        tool_turns = sum(1 for s in traj.tokens[1:] if s.kind is not TokenKind.GENERATED)
        out.num_turns = 1 + int(traj.turns) + tool_turns  # the user turn, the model's, the inserted ones
        retrieval_s = sum(s.retrieval_s for s in traj.steps)
        out.metrics = {"generate_sequences": wall_s - retrieval_s, "tool_calls": retrieval_s}
        out.extra_fields = {
            "effirag_searches": traj.n_searches,
            "effirag_format_ok": traj.format_ok,
            "effirag_end": traj.end,
            "effirag_tool_errors": traj.extras["tool_errors"],
        }
        if not HAVE_VERL:
            return out
        fields = dataclasses.asdict(out)
        fields["metrics"] = _Metrics(**fields["metrics"])
        return _Output(**fields)


def _rollout_value(config: Any, name: str) -> Any:
    """``config.actor_rollout_ref.rollout.<name>`` (verl's trainer config), None where a level is missing."""
    node = config
    for part in ("actor_rollout_ref", "rollout", name):
        node = node.get(part) if isinstance(node, Mapping) else getattr(node, part, None)
        if node is None:
            return None
    return node
