"""verl without importing verl: EffiRAG questions as verl's parquet rows, and EffiRAG's rewards as verl's
``custom_reward_function``.

Rows (:func:`verl_rows`) follow verl's RL dataset layout: ``data_source`` (``effirag/<protocol>/<dataset>``: verl
groups its validation metrics by it, and :func:`compute_score` reads the protocol from it), ``prompt`` (chat messages:
the protocol's own instruction and question as one user message), ``ability``, ``reward_model`` (``style: rule`` and
``ground_truth: {"target": [answers]}``, the Search-R1 convention of verl's search examples) and ``extra_info``
(``index``, ``split``, ``question``, ``question_id``, ``protocol``, and ``tools_kwargs`` for verl's search tool,
whose ``create_kwargs`` carry the question, its answers and the data source).

:func:`compute_score` reads a response written in the protocol's own format (the model's turns with the
observation blocks the protocol inserts, e.g. Search-R1's ``<information>…</information>``): it cuts the response at
those blocks, replays the turns through the protocol's parser as the rollout engine does, and scores the resulting
trajectory with the trainers' own objective (:func:`effirag.train.objective.build_objective`). A response of verl's
tool agent loop (hermes ``<tool_call>`` / ``<tool_response>`` turns, then the protocol's answer) is read by
:func:`effirag.integrations.tool_calls.tool_trajectory` instead and scored the same way.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from effirag.agent.protocols import AgentProtocol, get_protocol
from effirag.agent.protocols.state import EpisodeState, ParseResult
from effirag.errors import ConfigError, DataError
from effirag.integrations.tool_calls import SEARCH_TOOL, is_tool_transcript, tool_trajectory
from effirag.rewards.compose import RewardConfig
from effirag.rewards.judges import Judge
from effirag.train.objective import build_objective
from effirag.types import Action, QAExample, Step, Trajectory

ABILITY = "fact-reasoning"
SOURCE_PREFIX = "effirag"
REBUILT = "its prompt is rebuilt between turns"
_REWARD_KEYS = {f.name for f in dataclasses.fields(RewardConfig)}


def data_source(protocol: str, dataset: str) -> str:
    """``effirag/<protocol>/<dataset>``."""
    return f"{SOURCE_PREFIX}/{protocol}/{dataset}"


def exportable(protocol: AgentProtocol) -> str | None:
    """Why ``protocol`` cannot be one fixed chat prompt (None: it can): a prompt rebuilt between turns, or documents
    retrieved before the first turn, depend on the rollout."""
    if type(protocol).prompt is not AgentProtocol.prompt:
        return REBUILT
    if protocol.pre_retrieval_mode is not None:
        return "it retrieves before the first turn, so its prompt holds documents"
    return None


def verl_rows(examples: Sequence[QAExample], protocol: AgentProtocol, split: str, dataset: str) -> list[dict[str, Any]]:
    """One verl RL row per question (see the module docstring)."""
    why = exportable(protocol)
    if why is not None:
        raise ConfigError("export verl", "protocol", protocol.name, f"cannot be exported to verl: {why}")
    source = data_source(protocol.name, dataset)
    rows = []
    for i, e in enumerate(examples):
        truth = {"target": list(e.answers)}
        create = {"ground_truth": truth, "question": e.question, "data_source": source}
        rows.append(
            {
                "data_source": source,
                "prompt": [{"role": "user", "content": protocol.build_prompt(e.question)}],
                "ability": ABILITY,
                "reward_model": {"style": "rule", "ground_truth": truth},
                "extra_info": {
                    "index": i,
                    "split": split,
                    "question": e.question,
                    "question_id": e.id,
                    "protocol": protocol.name,
                    "need_tools_kwargs": True,
                    "tools_kwargs": {SEARCH_TOOL: {"create_kwargs": create}},
                },
            }
        )
    return rows


def write_parquet(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write ``rows`` as one parquet file (pyarrow infers the nested struct and list columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), out)
    return out


def protocol_name(source: str, extra_info: Mapping[str, Any] | None) -> str:
    """The protocol of a row: ``extra_info["protocol"]``, else the middle of ``effirag/<protocol>/<dataset>``."""
    if extra_info and extra_info.get("protocol"):
        return str(extra_info["protocol"])
    parts = source.split("/")
    if len(parts) >= 2 and parts[0] == SOURCE_PREFIX:
        return parts[1]
    raise DataError(
        "no protocol: need extra_info['protocol'] or a data_source effirag/<protocol>/<dataset>",
        field="data_source",
        value=source,
    )


def answers(ground_truth: Any) -> list[str]:
    """Gold answers from ``{"target": [...]}`` (verl's search convention), a list (or array) or one string."""
    if isinstance(ground_truth, Mapping):
        if "target" not in ground_truth:
            raise DataError("ground_truth has no 'target'", field="ground_truth", value=dict(ground_truth))
        ground_truth = ground_truth["target"]
    if isinstance(ground_truth, str):
        return [ground_truth]
    golds = [str(a) for a in ground_truth]
    if not golds:
        raise DataError("no gold answer", field="ground_truth", value=golds)
    return golds


def split_response(protocol: AgentProtocol, solution_str: str) -> tuple[list[str], list[str]]:
    """(the model's turns, the observation bodies) of a response: it is cut at the protocol's observation blocks
    (whitespace around them belongs to neither). A protocol whose prompt is rebuilt between turns (ReasonRAG's
    stages) has turns that no observation separates: those are also cut after each of its stop strings, where its
    generations end."""
    head, tail = (s.strip() for s in protocol.wrap_observation("\0").split("\0"))
    block = re.compile(rf"\s*{re.escape(head)}(.*?){re.escape(tail)}\s*", re.DOTALL)
    bodies = [m.group(1).strip() for m in block.finditer(solution_str)]
    pieces = block.split(solution_str)[::2]  # split() interleaves the captured bodies
    if exportable(protocol) == REBUILT:
        stops = re.compile("(" + "|".join(re.escape(s) for s in protocol.stop) + r")\s*")
        pieces = [t for piece in pieces for t in _cut_after(stops, piece)]
    return [t for t in pieces if t.strip()], bodies


def _cut_after(stops: re.Pattern[str], text: str) -> list[str]:
    out, start = [], 0
    for m in stops.finditer(text):
        out.append(text[start : m.start(1) + len(m.group(1))])
        start = m.end()
    return [*out, text[start:]]


def parse_response(protocol: AgentProtocol, solution_str: str, question: str = "") -> Trajectory:
    """The trajectory a response stands for: the turns replayed through the protocol's parser as the engine runs
    them (follow-ups complete their retrieval step; the episode ends at the first answer, or after the one turn of
    a single-turn protocol). ``format_ok`` is the protocol's format rule over the response's turns as written
    (:meth:`~effirag.agent.protocols.base.AgentProtocol.format_check_turns`, the engine's rule). Token counts
    are whitespace words (verl hands over text, not the policy's ids)."""
    turns, bodies = split_response(protocol, solution_str)
    state = EpisodeState(question, protocol.build_prompt(question))
    prediction: str | None = None
    for text in turns:
        r = protocol.parse_turn(text, state)
        _record(protocol, state, r, bodies)
        if r.action is Action.ANSWER:
            prediction = r.answer
        if r.action is Action.ANSWER or protocol.single_turn:
            break
    ok = protocol.format_check_turns(turns).ok
    return Trajectory("verl", question, protocol.name, state.steps, prediction, ok)


def _record(protocol: AgentProtocol, state: EpisodeState, r: ParseResult, bodies: list[str]) -> None:
    """Append the turn's steps to ``state`` and advance it, inserting the next observation after a retrieval."""
    if r.followup is not None and state.pending is not None:
        r.followup.complete(state.steps[state.pending])
        state.pending = None
    for sub in r.substeps:
        state.steps.append(
            Step(Action.REASON, sub.text, reasoning=sub.reasoning, conclusion=sub.conclusion, within_turn=True)
        )
    step = Step(r.action, r.text, query=r.query, mode=r.mode, answer=r.answer, error=r.error, think=r.think)
    step.reasoning, step.stage, step.evidence = r.reasoning, r.stage, r.evidence
    step.generated_tokens = len(r.text.split())
    state.steps.append(step)
    observation = ""
    if r.action in (Action.SEARCH, Action.MORE_INFO):
        body = bodies[state.n_retrievals] if state.n_retrievals < len(bodies) else ""
        observation = protocol.wrap_observation(body)
        step.observation, step.inserted_tokens = observation, len(body.split())
        state.n_retrievals += 1
        state.last_query = r.query or state.last_query
        if protocol.followup:
            state.pending = len(state.steps) - 1
    protocol.advance(state, r, observation)


@lru_cache(maxsize=4)
def _world_judge(world: str) -> Judge:
    from effirag.rewards.judges import WorldJudge
    from effirag.world.world import World

    return WorldJudge(World.load(world))


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl's ``custom_reward_function``: ``{"score": r, ...components}`` for one response.

    ``kwargs`` (verl's ``custom_reward_function.reward_kwargs``) are :class:`RewardConfig` fields (default: EM
    alone), plus ``world`` (an EffiRAG-World folder) or ``judge`` (a :class:`~effirag.rewards.judges.Judge`) for the
    HiPRAG term; an unknown key is refused. ``score`` is the weighted sum r of the enabled terms; the components are
    ``em`` and each enabled term, ``format_ok``, ``searches`` and, with ``cost`` set, ``cost`` (eq. 3 over
    whitespace words; the cost-aware advantage itself needs the whole group, so it is not folded into ``score``).
    RouteRAG's term centres retrieval time on its batch: scored alone it equals the EM outcome.
    """
    unknown = set(kwargs) - _REWARD_KEYS - {"world", "judge"}
    if unknown:
        raise ConfigError("compute_score", ",".join(sorted(unknown)), kwargs, f"unknown; known: {sorted(_REWARD_KEYS)}")
    cfg = RewardConfig(**{k: v for k, v in kwargs.items() if k in _REWARD_KEYS})
    judge: Judge | None = kwargs.get("judge")
    if judge is None and kwargs.get("world"):
        judge = _world_judge(str(kwargs["world"]))
    objective = build_objective(cfg, "grpo", judge, owner="compute_score", field="world")
    protocol = get_protocol(protocol_name(data_source, extra_info))
    question = str((extra_info or {}).get("question", ""))
    if is_tool_transcript(solution_str):
        traj = tool_trajectory(protocol, solution_str, question)
    else:
        traj = parse_response(protocol, solution_str, question)
    parts = objective.components([traj], [answers(ground_truth)], 1)
    out = {"score": parts.pop("total")[0]}
    out.update({name: values[0] for name, values in parts.items()})
    out.update({"format_ok": float(traj.format_ok), "searches": float(traj.n_searches)})
    return out


def check_search_tool_config(path: str | Path) -> dict[str, Any]:
    """Load a verl tool config YAML and check what verl's search tool reads: a ``tools`` list holding one entry of
    class ``verl.tools.search_tool.SearchTool`` whose ``retrieval_service_url`` ends in ``/retrieve`` and whose
    function, named :data:`SEARCH_TOOL` (the key of the rows' ``tools_kwargs``), takes ``query_list``."""
    import yaml

    p = Path(path)
    doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    tools = doc.get("tools") if isinstance(doc, dict) else None
    if not isinstance(tools, list):
        raise DataError("need a 'tools' list", path=p, field="tools", value=tools)
    search = [t for t in tools if isinstance(t, dict) and t.get("class_name") == "verl.tools.search_tool.SearchTool"]
    if len(search) != 1:
        raise DataError("need exactly one verl.tools.search_tool.SearchTool", path=p, field="tools", value=len(search))
    url = str(search[0].get("config", {}).get("retrieval_service_url", ""))
    if not url.startswith(("http://", "https://")) or not url.endswith("/retrieve"):
        raise DataError("must be http(s)://HOST:PORT/retrieve", path=p, field="retrieval_service_url", value=url)
    fn = search[0].get("tool_schema", {}).get("function", {})
    if fn.get("name") != SEARCH_TOOL:
        raise DataError(f"must be {SEARCH_TOOL!r}", path=p, field="tool_schema.function.name", value=fn.get("name"))
    if "query_list" not in fn.get("parameters", {}).get("required", []):
        raise DataError("must require query_list", path=p, field="tool_schema.function.parameters", value=fn)
    return dict(doc)
