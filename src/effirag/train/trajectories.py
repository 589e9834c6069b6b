"""Plans and turn texts of SFT trajectories: which hops a trajectory searches (with optional waste), the turns a
perfect model writes for them under each protocol, and their replay through the protocol's own parser.

Split from :mod:`effirag.train.sft_data`, which draws the paths, observations and copies; this module is the text.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from effirag.agent.protocols import EpisodeState, Protocol
from effirag.train.context_sim import answer_sentence
from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.train.masking import Segment
from effirag.types import Action, Step

BASELINES = ("zeroshot", "naive", "single-con", "single-ppr")

SUMMARY_TRIPLET = (
    "The fact {t} implies the answer: {a}.",
    "The reference gives {t}, so the answer is {a}.",
    "From {t}, the answer to this step is {a}.",
)
SUMMARY_TEXT = (
    'The passage says: "{s}" This implies the answer: {a}.',
    'According to the reference, "{s}" So the answer is {a}.',
    "The reference states that {a} answers it: {s}",
)
# The same with the evidence always before the answer: the answer is then copied from text the model has just written
# (an induction step), never named before the sentence that holds it is found (BENCHMARKS.md, item 26).
SUMMARY_TEXT_EVIDENCE_FIRST = (
    SUMMARY_TEXT[0],
    SUMMARY_TEXT[1],
    'The reference states: "{s}" Hence the answer is {a}.',
)
# Ends of a TeaRAG summary with `hop_aware_summary`: what is still needed (the next search's sub-question) or that the
# question is answered, so the stop decision is written out in the summary, not left to the token after it.
SUMMARY_NEXT = ("Next I need: {q}", "Still to find: {q}", "The question also needs: {q}")
SUMMARY_LAST = ("That answers the question.", "Nothing else is needed.", "This completes the question.")


# --- plans ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Move:
    """One planned step: ``search`` hop i, answer hop i from memory (``known``), or ``more`` results for hop i."""

    kind: str
    hop: int
    repeat: bool = False


def make_plan(
    path: GoldPath, rng: random.Random, rate: float, protocol: str, *, search_known: bool = False
) -> tuple[list[Move], str]:
    """The steps of a trajectory: a search per unknown hop, memory for known hops, plus maybe one wasted step.

    ``search_known`` searches every hop, known or not, as TeaRAG §4.3.1 does (one retrieval per gold sub-question)."""
    moves = [Move("known" if h.known and not search_known else "search", i) for i, h in enumerate(path.hops)]
    if rng.random() >= rate:
        return moves, ""
    kinds = ["repeat"]
    if any(m.kind == "known" for m in moves) and protocol not in ("tearag",):
        kinds.append("known_search")
    if protocol == "dsr1":
        kinds.append("more")
    kind = rng.choice(kinds)
    searched = [i for i, m in enumerate(moves) if m.kind == "search"]
    if kind == "known_search":
        i = rng.choice([i for i, m in enumerate(moves) if m.kind == "known"])
        moves[i] = Move("search", moves[i].hop)
    elif searched:
        i = rng.choice(searched)
        moves.insert(i + 1, Move("more" if kind == "more" else "search", moves[i].hop, repeat=True))
    else:
        return moves, ""
    return moves, kind


# --- texts ----------------------------------------------------------------------------------------------------
def evidence(hop: GoldHop, rng: random.Random, observation: str | None = None, *, evidence_first: bool = False) -> str:
    """What the evidence of a hop says, from a varied template over what the observation really shows: a gold
    triplet, or the passage sentence naming the answer (``observation`` None: anything of the hop's gold).
    ``evidence_first`` draws the sentence templates from SUMMARY_TEXT_EVIDENCE_FIRST (same count, so the same draws)."""

    def shown(text: str) -> bool:
        return observation is None or text in observation

    triplets = [t for t in hop.triplets if shown(t.text)]
    sentence = answer_sentence(hop.passage, hop.answer)
    if sentence is not None and not shown(sentence):
        sentence = None
    if triplets and (sentence is None or rng.random() < 0.6):
        return rng.choice(SUMMARY_TRIPLET).format(t=triplets[0].text, a=hop.answer)
    if sentence is not None:
        templates = SUMMARY_TEXT_EVIDENCE_FIRST if evidence_first else SUMMARY_TEXT
        return rng.choice(templates).format(s=sentence, a=hop.answer)
    return f"The reference answers it: {hop.answer}."


def final_reason(path: GoldPath) -> str:
    if path.qtype == "comparison" and len(path.hops) == 2:
        a, b = path.hops[0].answer, path.hops[1].answer
        return f"The two answers are {a} and {b}, so the answer is {path.answer}."
    return f"So the final answer is {path.answer}."


EARLIER_CUE = "The earlier is the"  # before a "which first" comparison's decision: " first" / " second"
SAME_CUE = "The two are"  # before a yes / no comparison's decision: " the same" / " different"


def pair_decision(path: GoldPath) -> tuple[str, str]:
    """The decision of a two-hop comparison as (cue, word): which side is compared out, by its position ("The earlier
    is the", "first" / "second"), or whether the two values match ("The two are", "the same" / "different").

    Why a word before the name: with two attention layers, the demo policy cannot both compare the two values and
    copy the winning name in one token, since the copy's query would need the compare's result, which exists only
    after the last attention layer (BENCHMARKS.md item 40). A decision word drawn from two fixed words is the compare
    alone; the name after it is a copy conditioned on a token in the context."""
    if path.answer in ("yes", "no"):
        return SAME_CUE, "the same" if path.answer == "yes" else "different"
    names = [h.entities[0] if h.entities else "" for h in path.hops]
    for word, name in zip(("first", "second"), names, strict=False):
        if name and name in path.answers:
            return EARLIER_CUE, word
    raise ValueError(f"pair_decision: {path.id!r}: no answer of {path.answers!r} names a side of {names!r}")


def pair_reason(path: GoldPath, *, decide: bool = False) -> str | None:
    """A comparison's two answers, each beside the entity it belongs to, then the one compared out ("Ada Vell: 3 May
    1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn."): the final answer is then a copy of a name on the line
    above, next to its value. ``decide`` writes the decision as a word first (:func:`pair_decision`: "… 9 June 1880.
    The earlier is the second. So the answer is Bo Rinn."). None for other paths, or when a hop names no entity."""
    if path.qtype != "comparison" or len(path.hops) != 2 or not all(h.entities for h in path.hops):
        return None
    pairs = "; ".join(f"{h.entities[0]}: {h.answer}" for h in path.hops)
    if decide:
        cue, word = pair_decision(path)
        return f"{pairs}. {cue} {word}. So the answer is {path.answer}."
    return f"{pairs}. So the answer is {path.answer}."


@dataclass(frozen=True)
class PairsLine:
    """A pairs line found in a text: its two (entity, value) sides and where it sits (``text[start:end]``)."""

    first: tuple[str, str]
    second: tuple[str, str]
    start: int
    end: int


# Names hold no ':', ';', '.', '"' or newline and values no ':', ';', '.' or newline, so a match cannot reach back
# into the evidence before the line (which ends "… the answer: 1956.").
_PAIRS = re.compile(
    r"([^:;.\"\n]+): ([^:;.\n]+); ([^:;.\"\n]+): ([^:;.\n]+)\. "
    rf"(?:So the answer is|{EARLIER_CUE}|{SAME_CUE})"
)


def find_pairs_line(text: str) -> PairsLine | None:
    """The last pairs line (:func:`pair_reason`'s "A: v; B: w. So the answer is …", or with ``decide`` "A: v; B: w.
    The earlier is the …" / "… The two are …") in ``text``; None if there is none. Used by the compare probes to find
    and rewrite the line a policy wrote; ``end`` is after the cue, and what follows it is not read."""
    matches = list(_PAIRS.finditer(text))
    if not matches:
        return None
    found = matches[-1]
    a, va, b, vb = (g.strip() for g in found.groups())
    start = found.start() + len(found.group(1)) - len(found.group(1).lstrip())
    return PairsLine((a, va.strip()), (b, vb.strip()), start, found.end())


# --- trajectories: (turn text, observation or None) per protocol --------------------------------------------------
Turn = tuple[str, "str | None"]
Observe = Callable[[GoldHop, str], str]  # (hop, mode) → observation text


def render_turns(
    protocol: Protocol,
    path: GoldPath,
    moves: Sequence[Move],
    observe: Observe,
    rng: random.Random,
    *,
    hop_aware: bool = False,
    known_notes: bool = False,
    evidence_first: bool = False,
    comparison_reason: bool = False,
    comparison_pairs: bool = False,
    comparison_decision: bool = False,
) -> list[Turn]:
    """The turns a perfect model writes for ``moves`` under ``protocol`` (with the observations that follow).

    ``hop_aware`` (TeaRAG only) ends each summary with the next search's sub-question or, after the last search, a
    note that the question is answered. ``known_notes`` (TeaRAG only) writes each hop the policy knows that follows a
    search into that search's summary ("I already know that …"), as Search-R1's ``<think>`` does, instead of leaving
    the recall unwritten inside the next ``<entities>`` or the final answer. ``evidence_first`` (every protocol) states
    each hop's evidence before its answer (:func:`evidence`). ``comparison_reason`` (TeaRAG only) ends the last
    summary of a comparison question with both hops' answers and the one compared out (:func:`final_reason`, what
    Search-R1's last ``<think>`` writes) instead of a stop note. ``comparison_pairs`` (TeaRAG only) writes each
    entity of a comparison beside its answer and the one compared out (:func:`pair_reason`) before the stop note;
    ``comparison_decision`` writes the decision as a word before that name (``pair_reason(decide=True)``)."""
    statement = functools.partial(evidence, evidence_first=evidence_first)
    name = protocol.name
    hops = path.hops
    turns: list[Turn] = []
    if name == "tearag":
        summary: str | None = None
        at = [j for j, m in enumerate(moves) if m.kind == "search"]  # positions of the searches among the moves
        for i, j in enumerate(at):
            hop = hops[moves[j].hop]
            obs = observe(hop, "kag")
            turns.append((protocol.render_turn(summary=summary, entities=hop.entities, subquery=hop.question), obs))  # type: ignore[attr-defined]
            parts = [statement(hop, rng, obs)]
            if known_notes:
                until = at[i + 1] if i + 1 < len(at) else len(moves)
                parts += [
                    f"I already know that {hops[k.hop].known_text}" for k in moves[j + 1 : until] if k.kind == "known"
                ]
            last = i + 1 == len(at)
            pairs = pair_reason(path, decide=comparison_decision) if comparison_pairs and last else None
            if pairs is not None:
                parts.append(pairs)
            if comparison_reason and last and path.qtype == "comparison":
                parts.append(final_reason(path))  # both answers side by side, then the one compared out
            elif hop_aware:
                parts.append(
                    rng.choice(SUMMARY_LAST)
                    if last
                    else rng.choice(SUMMARY_NEXT).format(q=hops[moves[at[i + 1]].hop].question)
                )
            summary = " ".join(parts)
        turns.append((protocol.render_turn(summary=summary, answer=path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name in ("searchr1", "routerag", "dsr1"):
        notes: list[str] = []
        for m in moves:
            hop = hops[m.hop]
            if m.kind == "known":
                notes.append(f"I already know that {hop.known_text}")
                continue
            if m.kind == "more":
                think = " ".join([*notes, "These results are not enough; I want more of them."])
                obs = observe(hop, "passage")
                turns.append((protocol.render_more_info(think, protocol.max_more_info_k // 3 or 1), obs))  # type: ignore[attr-defined]
                notes = [statement(hop, rng, obs)]
                continue
            mode = rng.choice(("passage", "graph", "hybrid")) if name == "routerag" else "passage"
            lead = "Let me check it again:" if m.repeat else "I need to find out:"
            think = " ".join([*notes, f"{lead} {hop.question}"])
            obs = observe(hop, mode)
            turns.append((protocol.render_search(think, hop.question, mode), obs))  # type: ignore[attr-defined]
            notes = [statement(hop, rng, obs)]
        turns.append((protocol.render_answer(" ".join([*notes, final_reason(path)]), path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name == "hiprag":
        conclusion: str | None = None
        steps: list[tuple[str, str]] = []
        first = True
        for m in moves:
            hop = hops[m.hop]
            if m.kind == "known":
                steps.append((f"I know the answer to: {hop.question}", hop.known_text))
                continue
            lead = "I should verify:" if m.repeat else "I need to search for:"
            text = protocol.render_turn(  # type: ignore[attr-defined]
                first=first, conclusion=conclusion, steps=steps, search=(f"{lead} {hop.question}", hop.question)
            )
            obs = observe(hop, "passage")
            turns.append((text, obs))
            first, steps, conclusion = False, [], statement(hop, rng, obs)
        if first and not steps:
            steps = [(f"I know the answer to: {path.question}", final_reason(path))]
        turns.append((protocol.render_turn(first=first, conclusion=conclusion, steps=steps, answer=path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name == "reasonrag":
        notes = []
        for m in moves:
            hop = hops[m.hop]
            if m.kind == "known":
                notes.append(f"I know that {hop.known_text}")
                continue
            lead = "Let me double-check" if m.repeat else "The evidence is not enough yet. I need"
            reasoning = " ".join([*notes, f"{lead}: {hop.question}"])
            obs = observe(hop, "passage")
            turns.append((protocol.render_reasoning(reasoning, query=hop.question), obs))  # type: ignore[attr-defined]
            turns.append((protocol.render_grounding(statement(hop, rng, obs)), None))  # type: ignore[attr-defined]
            notes = [f"The evidence shows {hop.answer}."]
        reasoning = " ".join([*notes, "The evidence is enough.", final_reason(path)])
        turns.append((protocol.render_reasoning(reasoning, answer=path.answer), None))  # type: ignore[attr-defined]
        return turns
    if name in BASELINES:
        return [(protocol.render_answer(path.answer), None)]  # type: ignore[attr-defined]
    raise ValueError(f"no SFT renderer for protocol {name!r}")


def replay(protocol: Protocol, question: str, turns: Sequence[Turn], context: str | None = None) -> list[list[Segment]]:
    """Run ``turns`` through the protocol exactly as the engine does and cut them into (prompt, completion) pairs.

    Every turn must parse to a valid action with its text kept whole; otherwise ValueError names the turn and why.
    Append-only protocols give one pair; ReasonRAG, whose prompt is rebuilt per stage, gives one pair per turn.
    """
    state = EpisodeState(question, protocol.build_prompt(question, context))
    pairs: list[list[Segment]] = []
    pending_obs: str | None = None
    for i, (text, obs) in enumerate(turns):
        prompt = protocol.prompt(state)
        cur = pairs[-1] if pairs else None
        if cur is not None and pending_obs is not None and prompt == "".join(s.text for s in cur) + pending_obs:
            cur.append(Segment(pending_obs, False))
        elif cur is None or prompt != "".join(s.text for s in cur):
            pairs.append([Segment(prompt, False)])
        result = protocol.parse_turn(text, state)
        if result.action is Action.INVALID or result.text != text:
            raise ValueError(f"{protocol.name}: turn {i} does not parse ({result.error or 'text cut'}): {text!r}")
        if result.carry and state.pending is not None:
            state.pending = None
        state.steps += [Step(Action.REASON, text=s.text) for s in result.substeps]
        step = Step(result.action, text=text, query=result.query)
        state.steps.append(step)
        pairs[-1].append(Segment(text, True))
        pending_obs = None
        if result.action in (Action.SEARCH, Action.MORE_INFO):
            if obs is None:
                raise ValueError(f"{protocol.name}: turn {i} searches but no observation was given")
            step.observation = obs
            state.n_retrievals += 1
            state.last_query = result.query or state.last_query
            if protocol.followup:
                state.pending = len(state.steps) - 1
            protocol.advance(state, result, obs)
            pending_obs = obs
        else:
            protocol.advance(state, result, "")
    return pairs
