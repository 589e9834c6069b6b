"""The rollout engine: many questions × n samples, one batched generate call per round, retrieval between turns.

Each round collects the prompt of every live episode, generates one turn for all of them in a single
``generator.generate`` call (the protocol's stop strings end a turn at its action's closing tag), parses each turn
with the protocol's parser (model text only), runs the requested retrievals (identical requests within a round are
served by one retriever call), renders and neutralises observations, and enforces the budgets of
:class:`~effirag.agent.config.EngineConfig`. An episode ends with an answer, or as a format failure when it runs out
of turns or tokens (``Trajectory.end`` says which). A retriever error becomes an observation, is logged and counted in
``extras["tool_errors"]``. The token path's typed ledger of ids and log-probs is ``Trajectory.tokens``.

Per-step records (:class:`~effirag.types.Step`): generated tokens are the policy tokenizer's count of the kept turn
text; inserted tokens count the observation; generation seconds are the batched call's wall time split evenly among
the episodes in it (one-by-one runs therefore see their true latency); retrieval seconds are the retriever call's
wall time, split among the episodes that shared it."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from effirag.agent.config import EngineConfig, truncate_to_budget
from effirag.agent.episode import Episode, keep_ids, new_episodes, restart_ids, token_generator
from effirag.agent.escaping import defuse_controls, neutralise
from effirag.agent.protocols.base import AgentProtocol, ParseResult
from effirag.agent.run_mode import check_run_mode
from effirag.errors import BackendError
from effirag.llm.base import GenerationConfig, Generator
from effirag.llm.chat import as_chat
from effirag.llm.tokens import TokenRequest, as_token_level
from effirag.retrieval.base import RetrievalResult, Retriever
from effirag.types import Action, QAExample, Step, TokenKind, Trajectory

log = logging.getLogger(__name__)


@dataclass
class _Request:
    """One retrieval an episode asked for this round."""

    episode: Episode
    step: Step
    query: str
    mode: str
    k: int
    entities: tuple[str, ...]
    offset: int
    result: ParseResult | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.query, self.mode, self.k, self.entities, self.offset)


def run_episodes(
    generator: Generator,
    retriever: Retriever | None,
    protocol: AgentProtocol,
    questions: Sequence[QAExample | str | Trajectory],
    config: EngineConfig | None = None,
) -> list[Trajectory]:
    """Run ``config.n`` episodes per question, batched; trajectories come back in question order, then sample order.

    ``retriever`` may be None only for protocols that never retrieve (zero-shot); a search then fails the step like
    a tool error. Plain-string questions get ids ``q0``, ``q1``, …. A :class:`Trajectory` given as a question is an
    unfinished episode to continue (its state rebuilt by ``replay_state``): its steps, turns and tokens count
    towards the budgets, and segments record the new turns only (text path only).
    """
    cfg = config or EngineConfig()
    check_run_mode(protocol, cfg.mode)
    tokens = token_generator(generator) if cfg.token_ids else None
    token_level = as_token_level(tokens) if tokens is not None else None  # ids in; ids + log-probs out
    episodes = new_episodes(questions, protocol, cfg)
    _start([e for e in episodes if not e.state.prompt], generator, retriever, protocol, cfg)
    rebuilt = type(protocol).prompt is not AgentProtocol.prompt  # prompt is not append-only (ReasonRAG)
    if rebuilt and getattr(generator, "chat", False):
        raise BackendError(f"{generator.name}: chat=1 wraps an append-only prompt; {protocol.name} rebuilds its own")
    rnd = 0
    while live := [e for e in episodes if not e.done]:
        prompts = [protocol.prompt(e.state) for e in live]
        gcfg = GenerationConfig(
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            frequency_penalty=cfg.frequency_penalty,
            presence_penalty=cfg.presence_penalty,
            stop=protocol.stop,
            n=1,
            seed=None if cfg.seed is None else cfg.seed + rnd,
            logprobs=cfg.token_ids,
        )
        t0 = time.perf_counter()
        if tokens is None or token_level is None:
            outs = generator.generate(prompts, gcfg)
        else:
            if rebuilt:  # the policy sees the rebuilt prompt encoded afresh: a new training sample starts
                for e, prompt in zip(live, prompts, strict=True):
                    restart_ids(e, tokens.encode(prompt, prompt=True))
            outs = token_level.generate_tokens([TokenRequest(tuple(e.ids), gcfg) for e in live])
        share = (time.perf_counter() - t0) / len(live)
        if len(outs) != len(live) or any(len(o) < 1 for o in outs):
            raise BackendError(f"{generator.name}: {len(outs)} completion lists for {len(live)} prompts")
        requests: list[_Request] = []
        for e, prompt, out in zip(live, prompts, outs, strict=True):
            c = out[0]
            text = c.text
            if c.stop_string and not text.endswith(c.stop_string):
                text += c.stop_string  # OpenAI convention: the stop string is not returned
            result = protocol.parse_turn(text, e.state)
            n_gen = len(c.token_ids) if result.text == c.text else generator.count_tokens(result.text)
            if cfg.record_segments:
                if rebuilt:
                    e.segments.append(["prompt", prompt])
                e.segments.append(["generated", result.text])
            if cfg.token_ids:  # every sampled id stays in the context, also where the parser kept less text
                keep_ids(e, TokenKind.GENERATED, c.token_ids, c.logprobs)
            req = _apply_turn(e, result, n_gen, share, protocol, cfg, generator)
            if req is not None:
                requests.append(req)
        _retrieve(requests, retriever, protocol, cfg, generator)
        for e in live:
            _check_end(e, protocol, cfg)
        rnd += 1
    return [_finish(e, protocol, cfg) for e in episodes]


def _start(
    episodes: list[Episode], gen: Generator, retriever: Retriever | None, protocol: AgentProtocol, cfg: EngineConfig
) -> None:
    """Build initial prompts (in a chat backend's template: as_chat); single-round RAG baselines retrieve first."""
    if protocol.pre_retrieval_mode is None:
        for e in episodes:
            e.state.prompt = as_chat(gen, protocol.build_prompt(e.state.question))
    else:
        reqs = []
        mode = cfg.mode or protocol.pre_retrieval_mode
        for e in episodes:
            step = Step(Action.SEARCH, query=e.state.question, mode=mode)
            e.state.steps.append(step)
            reqs.append(_Request(e, step, e.state.question, mode, cfg.k, (), 0))
        _retrieve(reqs, retriever, protocol, cfg, gen, initial=True)
        for e in episodes:
            e.state.prompt = as_chat(gen, protocol.build_prompt(e.state.question, e.state.steps[0].observation))
    for e in episodes:
        e.used_tokens = gen.count_tokens(e.state.prompt)
        e.traj.extras["prompt_tokens"] = e.used_tokens
        if cfg.record_segments:
            e.segments.append(["prompt", e.state.prompt])
        if cfg.token_ids:
            keep_ids(e, TokenKind.PROMPT, token_generator(gen).encode(e.state.prompt, prompt=True))


def _apply_turn(
    e: Episode,
    result: ParseResult,
    n_gen: int,
    gen_s: float,
    protocol: AgentProtocol,
    cfg: EngineConfig,
    gen: Generator,
) -> _Request | None:
    """Record the turn's steps; return the retrieval it asks for (None when no retrieval is due)."""
    st = e.state
    e.turns += 1
    e.used_tokens += n_gen
    if result.action is not Action.INVALID and result.followup is not None and st.pending is not None:
        result.followup.complete(st.steps[st.pending])
        st.pending = None
    for sub in result.substeps:
        n_sub = gen.count_tokens(sub.text)
        st.steps.append(
            Step(
                Action.REASON,
                text=sub.text,
                generated_tokens=n_sub,
                reasoning=sub.reasoning,
                conclusion=sub.conclusion,
                within_turn=True,
            )
        )
        n_gen -= n_sub
    step = Step(
        result.action,
        text=result.text,
        generated_tokens=max(0, n_gen),
        generation_s=gen_s,
        answer=result.answer,
        error=result.error,
        think=result.think,
        reasoning=result.reasoning,
        stage=result.stage,
        evidence=result.evidence,
    )
    st.steps.append(step)

    request: _Request | None = None
    if result.action is Action.SEARCH:
        if protocol.max_retrievals is not None and st.n_retrievals >= protocol.max_retrievals:
            step.action = Action.INVALID
            step.error = f"retrieval limit {protocol.max_retrievals} reached"
            step.query, step.mode = result.query, result.mode
            _feedback(e, step, result, protocol.limit_feedback(), protocol, cfg, gen)
            return None
        assert result.query is not None
        mode = cfg.mode or result.mode or protocol.default_mode  # the run's mode, else the protocol's (check_run_mode)
        request = _Request(e, step, result.query, mode, cfg.k, result.entities, 0)
    elif result.action is Action.MORE_INFO:
        if st.last_query is None:
            step.action = Action.INVALID
            step.error = "<more info> before any search"
            _feedback(e, step, result, protocol.feedback(result), protocol, cfg, gen)
            return None
        k = result.k or cfg.k
        request = _Request(e, step, st.last_query, st.last_mode or "passage", k, st.last_entities, st.next_offset)
    elif result.action is Action.INVALID:
        _feedback(e, step, result, protocol.feedback(result), protocol, cfg, gen)
    else:  # ANSWER or REASON: nothing is inserted
        protocol.advance(st, result, "")
    if request is not None:
        step.query, step.mode, step.entities = request.query, request.mode, list(request.entities)
        request.result = result
    return request


def _feedback(
    e: Episode, step: Step, result: ParseResult, text: str, protocol: AgentProtocol, cfg: EngineConfig, gen: Generator
) -> None:
    """Insert engine feedback (not retrieved text: counted in the budget, not in inserted_tokens)."""
    step.observation = text
    n = gen.count_tokens(text)
    step.extras["feedback_tokens"] = n
    e.used_tokens += n
    if cfg.record_segments:
        e.segments.append(["feedback", text])
    if cfg.token_ids:
        keep_ids(e, TokenKind.FEEDBACK, token_generator(gen).encode(text))
    protocol.advance(e.state, result, text)


def _retrieve(
    requests: list[_Request],
    retriever: Retriever | None,
    protocol: AgentProtocol,
    cfg: EngineConfig,
    gen: Generator,
    *,
    initial: bool = False,
) -> None:
    """Serve every request (identical ones by one call), render observations, update episode state."""
    groups: dict[tuple[Any, ...], list[_Request]] = {}
    for r in requests:
        if r.mode == "passage":
            r.mode = r.step.mode = cfg.passage_mode
        groups.setdefault(r.key, []).append(r)
    for group in groups.values():
        r0 = group[0]
        t0 = time.perf_counter()
        res: RetrievalResult | None = None
        error: str | None = None
        try:
            if retriever is None:
                raise RuntimeError("no retriever was given")
            res = retriever.retrieve(r0.query, r0.mode, r0.k, entities=list(r0.entities) or None, offset=r0.offset)
        except Exception as exc:  # a tool error becomes an observation (DEVELOPERS.md §7): logged and counted
            error = f"{type(exc).__name__}: {exc}"
            log.warning("retrieval failed for %r (mode %s): %s", r0.query, r0.mode, error)
        dt = (time.perf_counter() - t0) / len(group)
        for r in group:
            _observe(r, res, error, dt, protocol, cfg, gen, initial)


def _observe(
    r: _Request,
    res: RetrievalResult | None,
    error: str | None,
    dt: float,
    protocol: AgentProtocol,
    cfg: EngineConfig,
    gen: Generator,
    initial: bool,
) -> None:
    e, st, step = r.episode, r.episode.state, r.step
    step.retrieval_s = dt
    if res is None:
        body = neutralise(f"Search failed ({error}).")
        step.extras["tool_error"] = error
        e.traj.extras["tool_errors"] = e.traj.extras.get("tool_errors", 0) + 1
    else:
        step.items = list(res.items)
        step.timings = dict(res.timings)
        if "kag" in res.extras:  # the KAG and its PPR scores (mode kag), for the trajectory viewer
            step.extras["kag"] = res.extras["kag"]
        body = protocol.render_items(res.items, start=r.offset + 1)
    body = defuse_controls(body, getattr(gen, "control_strings", ()))  # the policy's own special tokens

    def fits(b: str) -> bool:
        return gen.count_tokens(protocol.wrap_observation(b)) <= cfg.max_inserted_tokens

    body, cut = truncate_to_budget(body, fits, cfg.truncation_side)
    if cut:
        step.extras["truncated"] = True
    obs = protocol.wrap_observation(body)
    step.observation = obs
    step.inserted_tokens = gen.count_tokens(obs)
    if initial:
        return  # the baselines' context is part of the prompt (counted with it)
    e.used_tokens += step.inserted_tokens
    st.last_query, st.last_mode, st.last_entities = r.query, r.mode, r.entities
    st.next_offset = r.offset + r.k
    st.n_retrievals += 1
    assert r.result is not None and st.steps[-1] is step  # a retrieval step is always its episode's latest step
    if protocol.followup:
        st.pending = len(st.steps) - 1
    if cfg.record_segments:
        e.segments.append(["inserted", obs])
    if cfg.token_ids:
        keep_ids(e, TokenKind.INSERTED, token_generator(gen).encode(obs))
    protocol.advance(st, r.result, obs)


def _check_end(e: Episode, protocol: AgentProtocol, cfg: EngineConfig) -> None:
    last = e.state.steps[-1] if e.state.steps else None
    if e.used_tokens > cfg.max_total_tokens:
        e.done, e.end = True, "max_total_tokens"
    elif last is not None and last.action is Action.ANSWER:
        e.done, e.end = True, "answer"
    elif getattr(protocol, "single_turn", False):
        e.done, e.end = True, "single_turn"
    elif e.turns >= cfg.max_steps:
        e.done, e.end = True, "max_steps"


def _finish(e: Episode, protocol: AgentProtocol, cfg: EngineConfig) -> Trajectory:
    t, st = e.traj, e.state
    t.steps = st.steps
    answer = st.steps[-1] if e.end == "answer" else None
    t.prediction = answer.answer if answer is not None else None
    t.format_ok = protocol.format_check(t).ok  # the protocol's (paper's) rule; no prediction is a failure
    t.prompt = protocol.prompt(st)
    t.extras.setdefault("tool_errors", 0)
    t.end, t.turns = e.end, e.turns
    t.extras["used_tokens"] = e.used_tokens
    t.extras["prompt_chars"] = len(st.prompt)  # t.prompt[prompt_chars:] is the episode's transcript (append-only)
    if cfg.record_segments:
        t.extras["segments"] = e.segments
    t.tokens = e.tokens
    return t
