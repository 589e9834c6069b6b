"""Plans and content of SFT trajectories: which hops a trajectory searches (with optional waste), what each turn
says (the evidence of a hop, the final reasoning, the summaries' optional endings), handed to the protocol's own
writer for the format, and the replay of the written turns through the protocol's parser into masked segments.

Split from :mod:`effirag.train.sft_data`, which draws the paths, observations and copies; this module is the text.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from effirag.agent.protocols import AgentProtocol, Move, ScriptHop, TrajectoryScript, Turn, protocol_class
from effirag.train.context_sim import answer_sentence
from effirag.train.gold_paths import GoldHop, GoldPath
from effirag.train.masking import Segment

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
# (an induction step), never named before the sentence that holds it is found; a small policy learns that copy far
# more easily than naming the answer first.
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
def make_plan(
    path: GoldPath, rng: random.Random, rate: float, protocol: str, *, search_known: bool = False
) -> tuple[list[Move], str]:
    """The steps of a trajectory: a search per unknown hop, memory for known hops, plus maybe one wasted step, of a
    kind the protocol's format can show (``known_search_waste``, ``more_info_waste``).

    ``search_known`` searches every hop, known or not, as TeaRAG §4.3.1 does (one retrieval per gold sub-question)."""
    cls = protocol_class(protocol)
    moves = [Move("known" if h.known and not search_known else "search", i) for i, h in enumerate(path.hops)]
    if rng.random() >= rate:
        return moves, ""
    kinds = ["repeat"]
    if any(m.kind == "known" for m in moves) and cls.known_search_waste:
        kinds.append("known_search")
    if cls.more_info_waste:
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
    after the last attention layer. A decision word drawn from two fixed words is the compare
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


# --- trajectories: (turn text, observation or None), written by the protocol ----------------------------------------
Observe = Callable[[GoldHop, str], str]  # (hop, mode) → observation text


def render_turns(
    protocol: AgentProtocol,
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
    memory_steps: bool = False,
    question_first: bool = False,
    elaborate: Callable[[str, int | None], str] | None = None,
) -> list[Turn]:
    """The turns a perfect model writes for ``moves`` under ``protocol`` (with the observations that follow): the
    protocol's writer (:meth:`~effirag.agent.protocols.AgentProtocol.write_turns`) lays out this path's content.

    ``evidence_first`` (every protocol) states each hop's evidence before its answer (:func:`evidence`). The rest
    shape the summaries of protocols that summarise each observation (TeaRAG): ``hop_aware`` ends each summary with
    the next search's sub-question or, after the last search, a note that the question is answered. ``known_notes``
    writes each hop the policy knows that follows a search into that search's summary, as Search-R1's ``<think>``
    does, instead of leaving the recall unwritten inside the next step or the final answer. ``comparison_reason`` ends
    the last summary of a comparison question with both hops' answers and the one compared out (:func:`final_reason`,
    what Search-R1's last ``<think>`` writes) instead of a stop note. ``comparison_pairs`` writes each entity of a
    comparison beside its answer and the one compared out (:func:`pair_reason`) before the stop note;
    ``comparison_decision`` writes the decision as a word before that name (``pair_reason(decide=True)``).
    ``memory_steps``, ``question_first`` and ``elaborate`` go to the script
    (:class:`~effirag.agent.protocols.TrajectoryScript`): known hops as memory steps where the format has them, each
    step's sub-question before its choice where the format's reasoning names it, and long-winded reasoning
    (:func:`effirag.train.behaviour.elaborator`)."""
    hops = path.hops
    statement = functools.partial(evidence, evidence_first=evidence_first)

    def summary_tail(next_hop: int | None) -> list[str]:
        last = next_hop is None
        parts: list[str] = []
        pairs = pair_reason(path, decide=comparison_decision) if comparison_pairs and last else None
        if pairs is not None:
            parts.append(pairs)
        if comparison_reason and last and path.qtype == "comparison":
            parts.append(final_reason(path))  # both answers side by side, then the one compared out
        elif hop_aware:
            parts.append(
                rng.choice(SUMMARY_LAST)
                if next_hop is None
                else rng.choice(SUMMARY_NEXT).format(q=hops[next_hop].question)
            )
        return parts

    script = TrajectoryScript(
        question=path.question,
        answer=path.answer,
        hops=tuple(ScriptHop(h.question, h.answer, h.entities, h.known_text) for h in hops),
        moves=tuple(moves),
        reason=final_reason(path),
        observe=lambda i, mode: observe(hops[i], mode),
        evidence=lambda i, obs: statement(hops[i], rng, obs),
        summary_tail=summary_tail,
        known_in_summary=known_notes,
        memory_steps=memory_steps,
        question_first=question_first,
        **({"elaborate": elaborate} if elaborate is not None else {}),
    )
    return protocol.write_turns(script, rng)


def replay(
    protocol: AgentProtocol, question: str, turns: Sequence[Turn], context: str | None = None
) -> list[list[Segment]]:
    """``turns`` replayed through the protocol exactly as the engine does, cut into (prompt, completion) segment lists
    (:meth:`~effirag.agent.protocols.AgentProtocol.training_segments`). Every turn must parse to a valid action with
    its text kept whole; otherwise ValueError names the turn and why. Append-only protocols give one list; ReasonRAG,
    whose prompt is rebuilt per stage, gives one per turn."""
    return [[Segment(s.text, s.trained) for s in pair] for pair in protocol.training_segments(question, turns, context)]
