"""Replay of a trajectory's turns through its protocol, cut into (prompt, completion) training segments.

The replay advances an :class:`EpisodeState` exactly as the rollout engine does (parse, follow-up, sub-steps, retrieval
bookkeeping, the protocol's ``advance``), so each segment list is the text the policy continued from plus what it
wrote, with the policy's own turns trained and the prompt and every inserted span (observations, feedback) untrained.
Append-only protocols give one (prompt, completion) list; a protocol whose prompt is rebuilt between turns (ReasonRAG's
stages) starts a new list whenever the prompt is not the previous list's text continued.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from effirag.agent.protocols.state import EpisodeState, ParseResult
from effirag.types import Action, Segment, Step, Trajectory

if TYPE_CHECKING:
    from effirag.agent.protocols.base import AgentProtocol


@dataclass(frozen=True)
class ReplayTurn:
    """One turn to replay: the model's text, what the environment inserted after it (None: nothing), and whether the
    engine refused it (an invalid turn, a search past the limit, ``<more info>`` before any search), in which case
    the inserted text is the engine's feedback."""

    text: str
    inserted: str | None = None
    refused: bool = False


def replay_turns(
    protocol: AgentProtocol,
    question: str,
    turns: Sequence[ReplayTurn],
    context: str | None = None,
    *,
    strict: bool = True,
) -> list[list[Segment]]:
    """Run ``turns`` through ``protocol`` as the engine does; return the (prompt, completion) segment lists.

    Every turn's text must be kept whole by the parser; with ``strict`` (gold trajectories) every turn must also parse
    to a valid action. Otherwise ValueError names the turn and why."""
    state = EpisodeState(question, protocol.build_prompt(question, context))
    pairs: list[list[Segment]] = []
    inserted: str | None = None
    for i, turn in enumerate(turns):
        prompt = protocol.prompt(state)
        cur = pairs[-1] if pairs else None
        so_far = "".join(s.text for s in cur) if cur is not None else None
        if cur is not None and inserted is not None and prompt == f"{so_far}{inserted}":
            cur.append(Segment(inserted, False))
        elif cur is None or prompt != so_far:
            pairs.append([Segment(prompt, False)])
        result = protocol.parse_turn(turn.text, state)
        if result.text != turn.text or (strict and result.action is Action.INVALID):
            why = result.error if result.action is Action.INVALID else None
            raise ValueError(f"{protocol.name}: turn {i} does not parse ({why or 'text cut'}): {turn.text!r}")
        _apply(protocol, state, result, turn, i)
        pairs[-1].append(Segment(turn.text, True))
        inserted = turn.inserted if turn.inserted else None
    return pairs


def _apply(protocol: AgentProtocol, state: EpisodeState, result: ParseResult, turn: ReplayTurn, i: int) -> None:
    """Advance ``state`` past one turn, as the engine's turn, retrieval and feedback steps do."""
    if result.action is not Action.INVALID and result.followup is not None and state.pending is not None:
        result.followup.complete(state.steps[state.pending])
        state.pending = None
    state.steps += [Step(Action.REASON, text=s.text, within_turn=True) for s in result.substeps]
    step = Step(result.action, text=turn.text, query=result.query)
    state.steps.append(step)
    if turn.refused:
        step.action = Action.INVALID
        step.observation = turn.inserted or ""
        protocol.advance(state, result, step.observation)
    elif result.action in (Action.SEARCH, Action.MORE_INFO):
        if turn.inserted is None:
            raise ValueError(f"{protocol.name}: turn {i} searches but no observation was given")
        step.observation = turn.inserted
        state.n_retrievals += 1
        state.last_query = result.query or state.last_query
        if protocol.followup:
            state.pending = len(state.steps) - 1
        protocol.advance(state, result, turn.inserted)
    else:
        protocol.advance(state, result, "")


def replay_state(protocol: AgentProtocol, trajectory: Trajectory) -> EpisodeState:
    """The episode state an unfinished engine ``trajectory`` stopped in (after a ``max_steps`` cut): what continuing
    it starts from (``run_episodes`` given the trajectory as a question).

    Its turns are replayed through the parser and ``advance`` as the engine ran them (stage, pending follow-up,
    memory, transcript), then the replayed step records are replaced by copies of the trajectory's own (items,
    timings and token counts kept; a continuation's follow-up completes the copy, never the prefix). Paging state
    (``next_offset``) is not recorded in a trajectory and restarts at 0. ValueError when the trajectory already
    ended with an answer, or when its turns no longer replay to its steps."""
    if trajectory.protocol != protocol.name:
        raise ValueError(
            f"{protocol.name}: trajectory {trajectory.question_id!r} is of protocol {trajectory.protocol!r}"
        )
    if trajectory.steps and trajectory.steps[-1].action is Action.ANSWER:
        raise ValueError(f"{protocol.name}: trajectory {trajectory.question_id!r} already ended with an answer")
    turns, context = sampled_turns(protocol, trajectory)
    state = EpisodeState(trajectory.question, protocol.build_prompt(trajectory.question, context))
    if context is not None:  # the retrieval before the first turn is the engine's first step record
        state.steps.append(trajectory.steps[0])
    for i, turn in enumerate(turns):
        _apply(protocol, state, protocol.parse_turn(turn.text, state), turn, i)
    if len(state.steps) != len(trajectory.steps):
        raise ValueError(
            f"{protocol.name}: trajectory {trajectory.question_id!r} replays to {len(state.steps)} steps, "
            f"not its {len(trajectory.steps)}"
        )
    state.steps = copy.deepcopy(trajectory.steps)
    searches = [s for s in state.steps if s.action is Action.SEARCH]
    if searches:
        state.last_mode, state.last_entities = searches[-1].mode, tuple(searches[-1].entities)
    return state


def sampled_turns(protocol: AgentProtocol, trajectory: Trajectory) -> tuple[list[ReplayTurn], str | None]:
    """The turns of an engine trajectory and the context its prompt was built with (single-round baselines: the
    observation of the retrieval made before the first turn; else None).

    A step finished inside the next turn (``within_turn``) is part of that turn's text and is not a turn of its own."""
    steps = trajectory.steps
    context: str | None = None
    if protocol.pre_retrieval_mode is not None:
        if not steps or steps[0].action is not Action.SEARCH or steps[0].text:
            raise ValueError(
                f"{protocol.name}: trajectory {trajectory.question_id!r} does not start with the retrieval its "
                "protocol makes before the first turn"
            )
        context, steps = steps[0].observation, steps[1:]
    turns = [ReplayTurn(s.text, s.observation or None, s.action is Action.INVALID) for s in steps if not s.within_turn]
    return turns, context
