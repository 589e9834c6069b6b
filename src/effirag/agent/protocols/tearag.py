"""TeaRAG's step format: entities → subquery → ``<Reference>`` (KAG + PPR) → summary, then another step or the answer.

Turn grammar (TeaRAG, 2025; tags chosen here so every field is parsable): a step names its important entities and one
sub-question, ``<entities> A; B </entities> <subquery> … </subquery>``; the engine retrieves in mode ``kag`` seeded with
those entities and inserts ``<Reference> … </Reference>``; the model's next turn starts with ``<summary> … </summary>``
of that reference and then either opens another step or ends with a line ``Final answer: …``. At most 5 steps.

A *memory step* answers a sub-question without retrieval: ``<entities> A </entities> <memory> sub-question </memory>
<summary> the answer, from what the model knows </summary>``. It is a whole step inside one turn (no stop string ends
it), recorded as a REASON sub-step (``reasoning`` = the sub-question, ``conclusion`` = the summary), so HiPRAG's
under-search judges and the world oracle read it like HiPRAG's non-search step. Any number of memory steps may stand
between a turn's summary of the previous reference and its next search step or ``Final answer:``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import ClassVar

from effirag.agent.parsing import TagStatus, body_without, cut_after_first, extract_tag, split_list
from effirag.agent.protocols.base import AgentProtocol, EpisodeState, FollowUp, ParseResult, SubStep, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
from effirag.types import Action, Step

_FINAL_RE = re.compile(r"Final answer:[ \t]*([^\n]*)")
_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z ]*>")
MAX_STEPS = 5
KNOWN_LEAD = "I already know that"  # a summary's note of a hop the policy knows (TrajectoryScript.known_in_summary)
_B = body_without(("entities", "subquery", "memory", "summary", "Reference"))
_LEAD_SUMMARY = re.compile(rf"\s*<summary>{_B}</summary>", re.DOTALL)
_MEMORY_STEP = re.compile(rf"\s*<entities>{_B}</entities>\s*<memory>{_B}</memory>\s*<summary>{_B}</summary>", re.DOTALL)
_LEAD_FINAL = re.compile(r"\s*Final answer:")


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
        if "<memory>" in kept:
            return self._parse_with_memory(kept, closer is not None, state)
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
        return self._search_step(kept, step_text, followup, ())

    def _search_step(
        self, kept: str, step_text: str, followup: FollowUp | None, substeps: tuple[SubStep, ...]
    ) -> ParseResult:
        """The turn's search step (``<entities>`` then ``<subquery>``), read from ``step_text``."""
        ents = extract_tag(step_text, "entities")
        sub = extract_tag(step_text, "subquery")
        if ents.status not in (TagStatus.OK, TagStatus.EMPTY):
            return invalid(kept, ents.describe())
        if not sub.ok:
            return invalid(kept, sub.describe())
        if step_text.find("<entities>") > step_text.find("<subquery>"):
            return invalid(kept, "<entities> must come before <subquery>")
        entities = tuple(split_list(ents.value or ""))
        return ParseResult(
            Action.SEARCH, kept, query=sub.value, mode="kag", entities=entities, followup=followup, substeps=substeps
        )

    def _parse_with_memory(self, kept: str, searches: bool, state: EpisodeState) -> ParseResult:
        """A turn holding memory steps, read in order: the previous reference's summary (when one is owed), one or
        more memory steps, then the search step (``searches``: the turn ended at ``</subquery>``) or ``Final
        answer:``."""
        pos, followup = 0, None
        if state.pending is not None:
            lead = _LEAD_SUMMARY.match(kept)
            if lead is None or not lead.group(1).strip():
                return invalid(kept, "<summary>: missing or empty before the memory step (the previous <Reference> "
                               "needs a summary)")  # fmt: skip
            followup, pos = FollowUp(summary=lead.group(1).strip()), lead.end()
        subs: list[SubStep] = []
        while (m := _MEMORY_STEP.match(kept, pos)) is not None:
            question, summary = m.group(2).strip(), m.group(3).strip()
            if not question or not summary:
                return invalid(kept, f"memory step {len(subs) + 1}: blank <memory> or <summary>")
            subs.append(SubStep(kept[pos : m.end()], reasoning=question, conclusion=summary))
            pos = m.end()
        if not subs:
            return invalid(kept, "<memory>: not a memory step (<entities> … </entities> <memory> sub-question "
                           "</memory> <summary> answer </summary>)")  # fmt: skip
        rest = kept[pos:]
        if searches:
            if "<memory>" in rest or "<summary>" in rest:
                return invalid(kept, "after the memory steps: expected <entities> … <subquery> … </subquery>")
            return self._search_step(kept, rest, followup, tuple(subs))
        final = _FINAL_RE.search(rest)
        if _LEAD_FINAL.match(rest) is None or final is None:
            return invalid(kept, "after the memory steps: expected a search step or 'Final answer:'")
        answer = final.group(1).strip()
        if not answer:
            return invalid(kept, "Final answer: empty")
        if (tag := _TAG_RE.search(answer)) is not None:
            return invalid(kept, f"Final answer: contains the tag {tag.group(0)!r}")
        return ParseResult(Action.ANSWER, kept, answer=answer, followup=followup, substeps=tuple(subs))

    def generated_parts(self, step: Step) -> dict[str, str]:
        """The turn's ``<summary>`` of the previous reference, and the ``Final answer:`` line's answer."""
        parts = super().generated_parts(step)
        summary = extract_tag(step.text, "summary")
        if summary.ok and summary.value:
            parts["summary"] = summary.value
        return parts

    # --- what a perfect model writes (SFT data) ---------------------------------------------------------------
    @staticmethod
    def render_memory_step(entities: Sequence[str], question: str, summary: str) -> str:
        """A memory step: the sub-question answered from what the model knows, without a search."""
        head = f"<entities> {'; '.join(entities)} </entities>\n<memory> {question} </memory>\n"
        return head + f"<summary> {summary} </summary>\n"

    def render_turn(
        self,
        *,
        summary: str | None = None,
        memory: Sequence[str] = (),
        entities: Sequence[str] = (),
        subquery: str | None = None,
        answer: str | None = None,
    ) -> str:
        """One turn: the pending reference's ``summary`` (if any), rendered ``memory`` steps
        (:meth:`render_memory_step`), then a step (``entities`` + ``subquery``) or ``Final answer: answer``."""
        if (subquery is None) == (answer is None):
            raise ValueError("render_turn: give exactly one of subquery= or answer=")
        head = f"<summary> {summary} </summary>\n" if summary is not None else ""
        head += "".join(memory)
        if subquery is not None:
            return head + f"<entities> {'; '.join(entities)} </entities>\n<subquery> {subquery} </subquery>"
        return head + f"Final answer: {answer}"

    # TeaRAG's SFT trajectories search every hop they do not know; their waste is a repeated search, never a search
    # for a known hop.
    known_search_waste: ClassVar[bool] = False

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """A step per search (entities + sub-question, then the reference), each reference summarised at the start of
        the next turn: the script's ``opening`` (first summary only), the hop's evidence, its ``after_evidence``
        elaboration, then (``known_in_summary``) the known hops before the next search, the ``before_answer``
        elaboration after the last search, and the script's ``summary_tail``; the last turn is the last summary and
        ``Final answer:``. With ``memory_steps`` each known hop is a memory step where it falls (the ``opening`` leads
        its summary when it comes first); otherwise known hops are left unwritten (recalled inside the next step or
        the answer). Draws nothing from ``rng``."""
        hops, moves = script.hops, script.moves
        turns: list[Turn] = []
        summary: str | None = None
        memory: list[str] = []
        opened = False

        def opening() -> list[str]:
            nonlocal opened
            first, opened = not opened, True
            return script.extra("opening") if first else []

        at = [j for j, m in enumerate(moves) if m.kind == "search"]  # positions of the searches among the moves
        for j, m in enumerate(moves):
            h = m.hop
            if m.kind == "known" and script.memory_steps:
                said = " ".join([*opening(), f"{KNOWN_LEAD} {hops[h].known_text}"])
                memory.append(self.render_memory_step(hops[h].entities, hops[h].question, said))
            if m.kind != "search":
                continue
            obs = script.observe(h, self.default_mode)
            turn = self.render_turn(
                summary=summary, memory=memory, entities=hops[h].entities, subquery=hops[h].question
            )
            turns.append((turn, obs))
            memory = []
            parts = [*opening(), script.evidence(h, obs), *script.extra("after_evidence", h)]
            later = [k for k in at if k > j]
            until = later[0] if later else len(moves)
            if script.known_in_summary and not script.memory_steps:
                parts += [f"{KNOWN_LEAD} {hops[k.hop].known_text}" for k in moves[j + 1 : until] if k.kind == "known"]
            if not later:
                parts += script.extra("before_answer")
            parts += script.summary_tail(moves[until].hop if until < len(moves) else None)
            summary = " ".join(parts)
        turns.append((self.render_turn(summary=summary, memory=memory, answer=script.answer), None))
        return turns
