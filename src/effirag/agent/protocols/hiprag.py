"""HiPRAG: a parsable ``<step>`` format whose search and non-search steps can be judged one by one.

Layout (HiPRAG, Wu et al. 2025): one ``<think>`` block holding a sequence of steps, then one ``<answer>``. A search step
is ``<step><reasoning>…</reasoning><search>…</search><context>…</context><conclusion>…</conclusion></step>`` where the
engine inserts ``<context>`` after ``</search>``; a non-search step is ``<step><reasoning>…</reasoning>
<conclusion>…</conclusion></step>``. A model turn therefore runs from just after ``</context>`` (or from the start)
to the next ``</search>`` or ``</answer>``: it finishes the pending search step (its conclusion), may hold complete
non-search steps (recorded as REASON sub-steps), and ends with a new search step's opening or ``</think><answer>``.
:func:`hiprag_format_ok` implements the paper's format rule over the whole transcript.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from effirag.agent.parsing import body_without, cut_after_first
from effirag.agent.protocols.base import AgentProtocol, EpisodeState, FollowUp, ParseResult, SubStep, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
from effirag.types import Action

_TAGS = ("think", "step", "reasoning", "search", "context", "conclusion", "answer")
_B = body_without(_TAGS)
_WS = r"\s*"
_OPEN_THINK = re.compile(_WS + r"<think>")
_CONCLUSION = re.compile(_WS + rf"<conclusion>{_B}</conclusion>{_WS}</step>", re.DOTALL)
_REASON_STEP = re.compile(
    _WS + rf"<step>{_WS}<reasoning>{_B}</reasoning>{_WS}<conclusion>{_B}</conclusion>{_WS}</step>", re.DOTALL
)
_SEARCH_OPEN = re.compile(_WS + rf"<step>{_WS}<reasoning>{_B}</reasoning>{_WS}<search>{_B}</search>{_WS}\Z", re.DOTALL)
_FINAL = re.compile(_WS + rf"</think>{_WS}<answer>{_B}</answer>{_WS}\Z", re.DOTALL)
_SEARCH_STEP = re.compile(
    _WS + rf"<step>{_WS}<reasoning>{_B}</reasoning>{_WS}<search>{_B}</search>{_WS}<context>{_B}</context>{_WS}"
    rf"<conclusion>{_B}</conclusion>{_WS}</step>",
    re.DOTALL,
)
_WHOLE_HEAD = re.compile(_WS + r"<think>")
_WHOLE_TAIL = re.compile(_WS + rf"</think>{_WS}<answer>{_B}</answer>{_WS}\Z", re.DOTALL)


@dataclass(frozen=True)
class FormatCheck:
    """Result of HiPRAG's format rule: ``ok``, and when not, the first violation and where (character offset)."""

    ok: bool
    reason: str = ""
    position: int = -1
    n_steps: int = 0
    n_search_steps: int = 0
    answer: str | None = None


def hiprag_format_ok(text: str) -> FormatCheck:
    """HiPRAG's format rule over a whole generated trajectory (model text with the engine's ``<context>`` blocks).

    ok iff: the text is ``<think>``, one or more well-formed steps (each a search step with reasoning, search,
    context, conclusion in that order, or a non-search step with reasoning and conclusion), ``</think>``, then exactly
    one non-empty ``<answer> … </answer>`` and nothing after it; every tag's content is free of other protocol tags
    and reasoning/search/conclusion/answer contents are non-blank.
    """
    m = _WHOLE_HEAD.match(text)
    if m is None:
        return FormatCheck(False, "does not start with <think>", 0)
    pos, n_steps, n_search = m.end(), 0, 0
    while True:
        s = _SEARCH_STEP.match(text, pos)
        r = _REASON_STEP.match(text, pos) if s is None else None
        step = s or r
        if step is None:
            break
        blanks = [g for g in step.groups() if not g.strip()]
        # A search step's <context> may legitimately be empty (no results); its other fields may not.
        if s is not None and any(not g.strip() for i, g in enumerate(s.groups()) if i != 2):
            return FormatCheck(False, f"blank field in step {n_steps + 1}", pos, n_steps, n_search)
        if r is not None and blanks:
            return FormatCheck(False, f"blank field in step {n_steps + 1}", pos, n_steps, n_search)
        n_steps += 1
        n_search += s is not None
        pos = step.end()
    if n_steps == 0:
        return FormatCheck(False, "no well-formed <step> inside <think>", pos)
    tail = _WHOLE_TAIL.match(text, pos)
    if tail is None:
        return FormatCheck(
            False, f"expected </think><answer>…</answer> at the end after step {n_steps}", pos, n_steps, n_search
        )
    answer = tail.group(1).strip()
    if not answer:
        return FormatCheck(False, "empty <answer>", pos, n_steps, n_search)
    return FormatCheck(True, "", -1, n_steps, n_search, answer)


_INSTRUCTIONS = (
    "You answer questions with the HiPRAG protocol. Put all reasoning in one <think> </think> block made of "
    "<step> </step> blocks. A search step is <step><reasoning> why a search is needed </reasoning>"
    "<search> query </search>, then the system adds <context> results </context>, and you close it with "
    "<conclusion> what you learned </conclusion></step>. A step that needs no search is "
    "<step><reasoning> … </reasoning><conclusion> … </conclusion></step>. Search only for facts you do not "
    "know. After </think>, write the final answer as <answer> answer </answer>.\n"
)


class HiPRAGProtocol(AgentProtocol):
    """HiPRAG's step format; see the module docstring for the turn grammar."""

    name: ClassVar[str] = "hiprag"
    stop: ClassVar[tuple[str, ...]] = ("</search>", "</answer>")
    followup: ClassVar[bool] = True

    fewshot: ClassVar[bool] = True

    def build_prompt(self, question: str, context: str | None = None) -> str:
        return _INSTRUCTIONS + self.shots() + self.question_block(question, context)

    def question_block(self, question: str, context: str | None = None) -> str:
        return f"Question: {question}\n"

    def wrap_observation(self, body: str) -> str:
        return f"\n<context>\n{body}\n</context>\n"

    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        kept, _ = cut_after_first(text, self.stop)
        pos = 0
        if not state.transcript:
            m = _OPEN_THINK.match(kept)
            if m is None:
                return invalid(kept, "<think>: missing at the start")
            pos = m.end()
        followup: FollowUp | None = None
        if state.pending is not None:
            m = _CONCLUSION.match(kept, pos)
            if m is None or not m.group(1).strip():
                return invalid(kept, "<conclusion>: missing or empty after <context>")
            followup = FollowUp(conclusion=m.group(1).strip())
            pos = m.end()
        subs: list[SubStep] = []
        while (m := _REASON_STEP.match(kept, pos)) is not None:
            reasoning, conclusion = m.group(1).strip(), m.group(2).strip()
            if not reasoning or not conclusion:
                return invalid(kept, f"<step> {len(subs) + 1}: blank reasoning or conclusion")
            subs.append(SubStep(kept[pos : m.end()], reasoning=reasoning, conclusion=conclusion))
            pos = m.end()
        if (m := _SEARCH_OPEN.match(kept, pos)) is not None:
            reasoning, query = m.group(1).strip(), m.group(2).strip()
            if not reasoning or not query:
                return invalid(kept, "<step>: blank reasoning or search query")
            return ParseResult(
                Action.SEARCH,
                kept,
                query=query,
                mode=self.default_mode,
                reasoning=reasoning,
                followup=followup,
                substeps=tuple(subs),
            )
        if (m := _FINAL.match(kept, pos)) is not None:
            answer = m.group(1).strip()
            if not answer:
                return invalid(kept, "<answer>: empty")
            if not subs and state.pending is None and not state.steps:
                return invalid(kept, "<think>: no step before the answer")
            return ParseResult(Action.ANSWER, kept, answer=answer, followup=followup, substeps=tuple(subs))
        return invalid(kept, f"unexpected text at offset {pos}: {kept[pos : pos + 40]!r}")

    def episode_format_error(self, state: EpisodeState) -> str | None:
        """HiPRAG's F(T) over the replayed transcript."""
        check = hiprag_format_ok(state.transcript)
        return None if check.ok else f"HiPRAG format: {check.reason}"

    # --- what a perfect model writes (SFT data) ---------------------------------------------------------------
    def render_turn(
        self,
        *,
        first: bool = False,
        conclusion: str | None = None,
        steps: Sequence[tuple[str, str]] = (),
        search: tuple[str, str] | None = None,
        answer: str | None = None,
    ) -> str:
        """One turn: ``<think>`` if ``first``, the pending search step's ``conclusion``, complete non-search
        ``steps`` as (reasoning, conclusion), then either ``search`` = (reasoning, query) or the final ``answer``."""
        if (search is None) == (answer is None):
            raise ValueError("render_turn: give exactly one of search= or answer=")
        parts = ["<think>\n"] if first else []
        if conclusion is not None:
            parts.append(f"<conclusion> {conclusion} </conclusion>\n</step>\n")
        parts += [f"<step>\n<reasoning> {r} </reasoning>\n<conclusion> {c} </conclusion>\n</step>\n" for r, c in steps]
        if search is not None:
            parts.append(f"<step>\n<reasoning> {search[0]} </reasoning>\n<search> {search[1]} </search>")
        else:
            parts.append(f"</think>\n<answer> {answer} </answer>")
        return "".join(parts)

    # A step's reasoning: the lead phrase of its choice (answer from memory, search, search again to verify), then the
    # sub-question; with ``question_first``, the sub-question, then the choice.
    LEADS: ClassVar[dict[str, tuple[str, str]]] = {
        "known": ("I know the answer to:", "I know the answer."),
        "search": ("I need to search for:", "I need to search for it."),
        "verify": ("I should verify:", "I should verify it."),
    }

    @classmethod
    def step_reasoning(cls, question: str, kind: str, question_first: bool = False) -> str:
        """A step's reasoning for the sub-question ``question`` and the choice ``kind`` (``known``, ``search`` or
        ``verify``). Question first, the choice is written after the words it depends on, so that a model deciding
        between a search and its memory reads the fact in question before it decides (the lead first, it decides
        before it has written which fact)."""
        if kind not in cls.LEADS:
            raise ValueError(f"HiPRAG step_reasoning: kind {kind!r} is not one of {sorted(cls.LEADS)}")
        lead, after = cls.LEADS[kind]
        return f"{question} {after}" if question_first else f"{lead} {question}"

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """A search step per searched hop (its conclusion, the hop's evidence and its ``after_evidence`` elaboration,
        opens the next turn; the last search's conclusion also holds the ``before_answer`` one) and a non-search step
        per known hop; the script's ``opening`` leads the first search step's reasoning (never a non-search step's,
        whose reasoning names the one fact it asserts). A trajectory with no step at all gets one non-search step whose
        conclusion is the script's ``reason``. With the script's ``question_first`` each step's reasoning states the
        sub-question before the choice (:meth:`step_reasoning`). Draws nothing from ``rng``."""
        turns: list[Turn] = []
        conclusion: str | None = None
        steps: list[tuple[str, str]] = []
        first = True
        last = max((i for i, m in enumerate(script.moves) if m.kind != "known"), default=-1)
        for i, m in enumerate(script.moves):
            hop = script.hops[m.hop]
            if m.kind == "known":
                steps.append((self.step_reasoning(hop.question, "known", script.question_first), hop.known_text))
                continue
            kind = "verify" if m.repeat else "search"
            opening = script.extra("opening") if conclusion is None else []
            reasoning = self.step_reasoning(hop.question, kind, script.question_first)
            search = (" ".join([*opening, reasoning]), hop.question)
            text = self.render_turn(first=first, conclusion=conclusion, steps=steps, search=search)
            obs = script.observe(m.hop, self.default_mode)
            turns.append((text, obs))
            parts = [script.evidence(m.hop, obs), *script.extra("after_evidence", m.hop)]
            if i == last:
                parts += script.extra("before_answer")
            first, steps, conclusion = False, [], " ".join(parts)
        if first and not steps:
            steps = [(self.step_reasoning(script.question, "known", script.question_first), script.reason)]
        turns.append((self.render_turn(first=first, conclusion=conclusion, steps=steps, answer=script.answer), None))
        return turns
