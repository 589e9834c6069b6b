"""verl's tool-call transcripts read as EffiRAG trajectories, for :func:`effirag.integrations.verl.compute_score`.

verl's ``ToolAgentLoop`` (hermes tool format) writes a response as assistant turns that each end in one or more
``<tool_call>{"name": "search", "arguments": {"query_list": [...]}}</tool_call>`` blocks, the tool's answers as
``<tool_response>…</tool_response>`` blocks in the next (user or tool) chat turn, and a last assistant turn that
answers in the protocol's own tags (``<answer> … </answer>``, ``Final answer: …``). The reward manager decodes it
with the chat template's markers usually dropped (``skip_special_tokens``), leaving the role names (``user``,
``assistant``, ``model``) on lines of their own; :func:`clean_turn` removes both the markers and those lines.

:func:`tool_trajectory` turns such a response into a :class:`~effirag.types.Trajectory`: every query of a
well-formed call is one search step (``searches`` counts queries, as the retrieval server answers one request per
query), the call's response is its observation, and the last turn is read by the protocol's own parser. The format
holds (``format_ok``) when every turn before the last holds only reasoning followed by well-formed calls of
:data:`SEARCH_TOOL`, each answered by one response, and the last turn is one valid answer of the protocol with
nothing after it (and passes the protocol's turn-level rule where it has one, e.g. Search-R1's ``<think>``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from effirag.agent.protocols import AgentProtocol
from effirag.agent.protocols.state import EpisodeState
from effirag.types import Action, Step, Trajectory

SEARCH_TOOL = "search"  # the tool name of verl's search tool config (configs/verl/search_tool_config.yaml)
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_RESPONSE = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
# Chat-template markers that survive a decode without skip_special_tokens (Qwen / ChatML, Gemma, Llama 3).
_MARKERS = re.compile(
    r"<\|im_start\|>(?:system|user|assistant|tool)?|<\|im_end\|>|<start_of_turn>(?:user|model)?|<end_of_turn>"
    r"|<\|start_header_id\|>\w+<\|end_header_id\|>|<\|eot_id\|>|<\|endoftext\|>|<eos>|</s>"
)
_ROLE_LINE = re.compile(r"^\s*(?:system|user|assistant|model|tool)\s*$", re.MULTILINE)


def is_tool_transcript(solution_str: str) -> bool:
    """Whether the response holds verl tool calls or tool responses (hermes format)."""
    return "<tool_call>" in solution_str or "<tool_response>" in solution_str


def clean_turn(text: str) -> str:
    """``text`` without chat-template markers and without lines that hold only a role name."""
    return _ROLE_LINE.sub("", _MARKERS.sub("", text)).strip()


@dataclass(frozen=True)
class ToolCall:
    """One ``<tool_call>`` block: its queries, or why it is not a well-formed search call."""

    queries: tuple[str, ...] = ()
    error: str | None = None


def parse_call(body: str) -> ToolCall:
    """Read a call's JSON body: ``{"name": "search", "arguments": {"query_list": [str, ...]}}`` (a single
    ``"query": str`` argument is read as a one-query list; ``arguments`` may be a JSON string, as OpenAI writes it)."""
    call, why = _json(body, "tool call is")
    if why is not None:
        return ToolCall(error=why)
    if not isinstance(call, dict):
        return ToolCall(error=f"tool call is not an object: {body.strip()[:80]!r}")
    if call.get("name") != SEARCH_TOOL:
        return ToolCall(error=f"unknown tool {call.get('name')!r} (known: {SEARCH_TOOL!r})")
    args = call.get("arguments", {})
    if isinstance(args, str):
        args, why = _json(args, "arguments are")
        if why is not None:
            return ToolCall(error=why)
    if not isinstance(args, dict):
        return ToolCall(error=f"arguments are not an object: {args!r}")
    queries = args.get("query_list", [args["query"]] if "query" in args else None)
    if not isinstance(queries, list) or not queries:
        return ToolCall(error=f"query_list must be a non-empty list, got {queries!r}")
    if not all(isinstance(q, str) and q.strip() for q in queries):
        return ToolCall(error=f"every query must be a non-empty string, got {queries!r}")
    return ToolCall(tuple(q.strip() for q in queries))


def _json(text: str, what: str) -> tuple[Any, str | None]:
    """``(value, None)`` when ``text`` is JSON, else ``(None, why)``: ``why`` starts with ``what`` (the message's
    subject and verb, e.g. ``"arguments are"``) and ends with the JSON parser's error."""
    try:
        return json.loads(text), None
    except ValueError as e:
        return None, f"{what} not JSON ({e})"


@dataclass(frozen=True)
class ToolTurn:
    """One assistant turn (markers removed) and the tool responses that follow it."""

    text: str
    responses: tuple[str, ...] = ()


def split_tool_turns(solution_str: str) -> list[ToolTurn]:
    """The response cut at its ``<tool_response>`` blocks: consecutive responses (parallel calls) belong to the turn
    before them; the text after the last response is the last turn (empty when the response ends with one)."""
    turns: list[ToolTurn] = []
    start = 0
    for m in _RESPONSE.finditer(solution_str):
        text = clean_turn(solution_str[start : m.start()])
        body = m.group(1).strip()
        if not text and turns:
            turns[-1] = ToolTurn(turns[-1].text, (*turns[-1].responses, body))
        else:
            turns.append(ToolTurn(text, (body,)))
        start = m.end()
    turns.append(ToolTurn(clean_turn(solution_str[start:])))
    return turns


def tool_trajectory(protocol: AgentProtocol, solution_str: str, question: str = "") -> Trajectory:
    """The trajectory a tool-call response stands for (see the module docstring). Token counts are whitespace
    words, as for responses in protocol tags."""
    state = EpisodeState(question, protocol.build_prompt(question))
    errors: list[str] = []
    turns = split_tool_turns(solution_str)
    for turn in turns[:-1]:
        errors.extend(_search_turn(turn, state.steps))
    last = turns[-1]
    prediction = None
    if "<tool_call>" in last.text:
        errors.extend(_search_turn(last, state.steps))
        errors.append("ends with a tool call, not an answer")
    elif last.text:
        r = protocol.parse_turn(last.text, state)
        step = Step(r.action, r.text, answer=r.answer, error=r.error, think=r.think, reasoning=r.reasoning)
        step.generated_tokens = len(last.text.split())
        state.steps.append(step)
        if r.action is Action.ANSWER:
            prediction = r.answer
            if last.text[len(r.text) :].strip():
                errors.append("text after the answer")
            if (why := protocol.turn_format_error(r)) is not None:
                errors.append(why)
        else:
            errors.append(f"last turn is not an answer ({r.error or r.action.value})")
    else:
        errors.append("no answer turn")
    ok = not errors and prediction is not None
    traj = Trajectory("verl", question, protocol.name, state.steps, prediction, ok)
    traj.extras["format_errors"] = errors
    return traj


def _search_turn(turn: ToolTurn, steps: list[Step]) -> list[str]:
    """Append a tool-calling turn's steps to ``steps``; return what breaks the format in it."""
    errors = []
    calls = [parse_call(m.group(1)) for m in _CALL.finditer(turn.text)]
    words = len(turn.text.split())
    if not calls:
        steps.append(Step(Action.INVALID, turn.text, error="no well-formed <tool_call> block"))
        steps[-1].generated_tokens = words
        return ["a turn without a well-formed <tool_call> block"]
    if turn.text[turn.text.rfind("</tool_call>") + len("</tool_call>") :].strip():
        errors.append("text after the tool call")
    if turn.responses and len(turn.responses) != len(calls):
        errors.append(f"{len(calls)} tool calls, {len(turn.responses)} tool responses")
    first = len(steps)
    for i, call in enumerate(calls):
        if call.error is not None:
            steps.append(Step(Action.INVALID, turn.text, error=call.error))
            errors.append(call.error)
        else:
            steps.extend(Step(Action.SEARCH, turn.text, query=q) for q in call.queries)
        if i < len(turn.responses) and len(turn.responses) == len(calls):
            steps[-1].observation = turn.responses[i]
            steps[-1].inserted_tokens = len(turn.responses[i].split())
    if len(turn.responses) != len(calls) and turn.responses:
        body = "\n".join(turn.responses)
        steps[-1].observation, steps[-1].inserted_tokens = body, len(body.split())
    steps[first].generated_tokens = words  # the turn's words once, on its first step
    return errors
