"""TeaRAG's step format: entities → subquery → ``<Reference>`` (KAG + PPR) → summary, then another step or the answer.

Turn grammar (TeaRAG, 2025; tags chosen here so every field is parsable): a step names its important entities and one
sub-question, ``<entities> A; B </entities> <subquery> … </subquery>``; the engine retrieves in mode ``kag`` seeded with
those entities and inserts ``<Reference> … </Reference>``; the model's next turn starts with ``<summary> … </summary>``
of that reference and then either opens another step or ends with a line ``Final answer: …``. At most 5 steps.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import ClassVar

from effirag.agent.parsing import TagStatus, cut_after_first, extract_tag, split_list
from effirag.agent.protocols.base import AgentProtocol, EpisodeState, FollowUp, ParseResult, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
from effirag.types import Action, Step

_FINAL_RE = re.compile(r"Final answer:[ \t]*([^\n]*)")
_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z ]*>")
MAX_STEPS = 5
KNOWN_LEAD = "I already know that"  # a summary's note of a hop the policy knows (TrajectoryScript.known_in_summary)


class TeaRAGProtocol(AgentProtocol):
    """TeaRAG: entity-anchored sub-queries over chunks + triplets, summaries, ``Final answer:``; ≤ 5 steps."""

    name: ClassVar[str] = "tearag"
    writes_entities: ClassVar[bool] = True
    stop: ClassVar[tuple[str, ...]] = ("</subquery>",)
    default_mode: ClassVar[str] = "kag"
    followup: ClassVar[bool] = True
    max_retrievals: ClassVar[int | None] = MAX_STEPS

    def build_prompt(self, question: str, context: str | None = None) -> str:
        return (
            f"You answer questions with the TeaRAG protocol, in at most {MAX_STEPS} steps. In each step, first name "
            "the important entities as <entities> entity; entity </entities>, then ask one focused sub-question as "
            "<subquery> sub-question </subquery>. The system returns facts between <Reference> and </Reference>. "
            "Summarise what they tell you in <summary> summary </summary>. Then start another step if you still "
            "need facts, or finish with a line: Final answer: answer\n"
            f"Question: {question}\n"
        )

    def wrap_observation(self, body: str) -> str:
        return f"\n<Reference>\n{body}\n</Reference>\n"

    def limit_feedback(self) -> str:
        return f"\nThat was more than {MAX_STEPS} steps. Give the final answer now.\n"

    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        kept, closer = cut_after_first(text, self.stop)
        final = _FINAL_RE.search(kept)
        if final is not None and (closer is None or final.start() < kept.find("<subquery>")):
            kept = kept[: final.end()]
            closer = None
        head_end = final.start() if final is not None and closer is None else len(kept)
        followup: FollowUp | None = None
        if state.pending is not None:
            summary = extract_tag(kept[:head_end], "summary")
            if not summary.ok:
                return invalid(kept, summary.describe() + " (the previous <Reference> needs a summary)")
            assert summary.value is not None
            followup = FollowUp(summary=summary.value)
        if closer is None:
            if final is None:
                return invalid(kept, "neither <subquery> … </subquery> nor 'Final answer:' found")
            answer = final.group(1).strip()
            if not answer:
                return invalid(kept, "Final answer: empty")
            # A tag inside the answer line is a broken turn (e.g. "Final answer: X </entities>"), not an answer.
            if (tag := _TAG_RE.search(answer)) is not None:
                return invalid(kept, f"Final answer: contains the tag {tag.group(0)!r}")
            return ParseResult(Action.ANSWER, kept, answer=answer, followup=followup)
        step_text = kept.split("</summary>", 1)[1] if followup is not None else kept
        ents = extract_tag(step_text, "entities")
        sub = extract_tag(step_text, "subquery")
        if ents.status not in (TagStatus.OK, TagStatus.EMPTY):
            return invalid(kept, ents.describe())
        if not sub.ok:
            return invalid(kept, sub.describe())
        if step_text.find("<entities>") > step_text.find("<subquery>"):
            return invalid(kept, "<entities> must come before <subquery>")
        entities = tuple(split_list(ents.value or ""))
        return ParseResult(Action.SEARCH, kept, query=sub.value, mode="kag", entities=entities, followup=followup)

    def generated_parts(self, step: Step) -> dict[str, str]:
        """The turn's ``<summary>`` of the previous reference, and the ``Final answer:`` line's answer."""
        parts = super().generated_parts(step)
        summary = extract_tag(step.text, "summary")
        if summary.ok and summary.value:
            parts["summary"] = summary.value
        return parts

    turn_format: ClassVar[bool] = True  # a turn-level format reward replays the turns (effirag.rewards.format)

    # --- what a perfect model writes (SFT data) ---------------------------------------------------------------
    def render_turn(
        self,
        *,
        summary: str | None = None,
        entities: Sequence[str] = (),
        subquery: str | None = None,
        answer: str | None = None,
    ) -> str:
        """One turn: the pending reference's ``summary`` (if any), then a step (``entities`` + ``subquery``) or
        ``Final answer: answer``."""
        if (subquery is None) == (answer is None):
            raise ValueError("render_turn: give exactly one of subquery= or answer=")
        head = f"<summary> {summary} </summary>\n" if summary is not None else ""
        if subquery is not None:
            return head + f"<entities> {'; '.join(entities)} </entities>\n<subquery> {subquery} </subquery>"
        return head + f"Final answer: {answer}"

    # TeaRAG's SFT trajectories search every hop they do not know; their waste is a repeated search, never a search
    # for a known hop.
    known_search_waste: ClassVar[bool] = False

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """A step per search (entities + sub-question, then the reference), each reference summarised at the start of
        the next turn: the hop's evidence, then (``known_in_summary``) the known hops before the next search, then the
        script's ``summary_tail``; the last turn is the last summary and ``Final answer:``. Draws nothing from ``rng``.
        Known hops are otherwise left unwritten (recalled inside the next step or the answer)."""
        hops, moves = script.hops, script.moves
        turns: list[Turn] = []
        summary: str | None = None
        at = [j for j, m in enumerate(moves) if m.kind == "search"]  # positions of the searches among the moves
        for i, j in enumerate(at):
            h = moves[j].hop
            obs = script.observe(h, self.default_mode)
            turns.append((self.render_turn(summary=summary, entities=hops[h].entities, subquery=hops[h].question), obs))
            parts = [script.evidence(h, obs)]
            until = at[i + 1] if i + 1 < len(at) else len(moves)
            if script.known_in_summary:
                parts += [f"{KNOWN_LEAD} {hops[k.hop].known_text}" for k in moves[j + 1 : until] if k.kind == "known"]
            parts += script.summary_tail(moves[until].hop if until < len(moves) else None)
            summary = " ".join(parts)
        turns.append((self.render_turn(summary=summary, answer=script.answer), None))
        return turns
