"""ReasonRAG's staged loop: Reasoning → (``<query>`` → Grounding → Reasoning) … → ``<answer>`` (Terminal).

ReasonRAG (Zhang et al. 2025) prompts each stage differently. The reasoning prompt asks the model to reflect on
earlier errors, judge whether the gathered evidence suffices, and either write a concise ``<query>`` or the
``<answer>``. After a query the engine retrieves documents and the grounding prompt asks the model to extract the
relevant evidence, or ``<evidence>None</evidence>``. The reasoning prompt carries the history of (reasoning, query,
evidence) so far. The stage is "grounding" exactly while a search step awaits its evidence (``state.pending``).
"""

from __future__ import annotations

import random
import re
from typing import ClassVar

from effirag.agent.parsing import TagStatus, cut_after_first, extract_tag
from effirag.agent.protocols.base import AgentProtocol, EpisodeState, FollowUp, ParseResult, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
from effirag.types import Action

NO_EVIDENCE = "None"
_QUOTE = re.compile(r'"([^"]+)"')
# the value an evidence text concludes: what follows its last "is" or ":" (e.g. "Hence the answer is 1733.")
_CONCLUSION = re.compile(r"^.*(?:\bis\b|:)\s*(.*?)[\s.]*$", re.S)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


class ReasonRAGProtocol(AgentProtocol):
    """ReasonRAG: stage-specific prompts; the prompt is rebuilt from the history each turn (not append-only)."""

    name: ClassVar[str] = "reasonrag"
    stop: ClassVar[tuple[str, ...]] = ("</query>", "</answer>", "</evidence>")
    followup: ClassVar[bool] = True

    def build_prompt(self, question: str, context: str | None = None) -> str:
        return self.reasoning_prompt(question, [])

    @staticmethod
    def reasoning_prompt(question: str, memory: list[str]) -> str:
        """The reasoning-stage prompt: instructions, question, and the history of earlier steps."""
        history = "\n".join(memory) if memory else "Nothing has been searched yet."
        return (
            "You answer questions with the ReasonRAG protocol (reasoning stage). Reason briefly over the history. "
            "If an earlier step was wrong, say so and correct it. Decide whether the evidence is enough: if it is, "
            "write <answer> answer </answer>; if not, write one concise search query as <query> query </query>.\n"
            f"Question: {question}\nHistory:\n{history}\n"
        )

    @staticmethod
    def grounding_prompt(question: str, query: str, documents: str) -> str:
        """The grounding-stage prompt: extract the evidence for ``query`` from the retrieved ``documents``."""
        return (
            "You extract evidence with the ReasonRAG protocol (grounding stage). From the documents, copy the facts "
            "that answer the query inside <evidence> </evidence>. If no document helps, write "
            f"<evidence>{NO_EVIDENCE}</evidence>.\nQuestion: {question}\nQuery: {query}\n{documents}"
        )

    def wrap_observation(self, body: str) -> str:
        return f"<documents>\n{body}\n</documents>\n"

    def prompt(self, state: EpisodeState) -> str:
        if state.pending is not None:
            step = state.steps[state.pending]
            base = self.grounding_prompt(state.question, step.query or "", step.observation)
        else:
            base = self.reasoning_prompt(state.question, state.memory)
        return base + state.stage_suffix

    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        if state.pending is not None:
            kept, closer = cut_after_first(text, self.stop)
            ev = extract_tag(kept, "evidence")
            if closer != "</evidence>" or not ev.ok:
                return invalid(kept, ev.describe() if closer else "<evidence>: not closed", stage="grounding")
            value = None if (ev.value or "").lower() == NO_EVIDENCE.lower() else ev.value
            return ParseResult(
                Action.REASON, kept, stage="grounding", evidence=value, followup=FollowUp(evidence=value)
            )
        kept, closer = cut_after_first(text, self.stop)
        if closer is None or closer == "</evidence>":
            return invalid(kept, "neither </query> nor </answer> found", stage="reasoning")
        tag = closer[2:-1]
        found = extract_tag(kept, tag)
        other = extract_tag(kept, "answer" if tag == "query" else "query")
        if other.status is not TagStatus.MISSING:
            return invalid(kept, f"more than one action: {other.describe()}", stage="reasoning")
        if not found.ok:
            return invalid(kept, found.describe(), stage="reasoning")
        reasoning = kept[: kept.find(f"<{tag}>")].strip()
        if tag == "answer":
            return ParseResult(Action.ANSWER, kept, answer=found.value, stage="reasoning", reasoning=reasoning)
        return ParseResult(
            Action.SEARCH, kept, query=found.value, mode=self.default_mode, stage="reasoning", reasoning=reasoning
        )

    def advance(self, state: EpisodeState, result: ParseResult, observation: str) -> None:
        if result.action is Action.INVALID or result.action is Action.ANSWER:
            state.stage_suffix += result.text + observation
            return
        state.stage_suffix = ""
        if result.action is Action.SEARCH:
            reasoning = result.reasoning or ""
            state.memory.append(f"Reasoning: {reasoning}\nQuery: {result.query}")
        elif result.action is Action.REASON:
            evidence = result.evidence
            state.memory.append(f"Evidence: {evidence if evidence is not None else NO_EVIDENCE}")

    def turn_content(self, text: str, stage: str | None) -> str:
        """A grounding turn's content is the facts it copies from the documents (its quoted spans, as the grounding
        prompt asks) and the value it concludes after them; the words around them ("The passage says:", "Hence the
        answer is") are wording. Evidence without a quoted fact, and reasoning turns, are their whole normalised
        text. E.g. ``<evidence> The reference states: "It was founded in 1733." Hence the answer is 1733.
        </evidence>`` and ``<evidence> The passage says: "It was founded in 1733." This implies the answer: 1733.
        </evidence>`` have the same content, ``it was founded in 1733. → 1733``."""
        if stage != "grounding":
            return _norm(text)
        ev = extract_tag(text, "evidence")
        body = ev.value if ev.ok and ev.value is not None else text
        quotes = _QUOTE.findall(body)
        if not quotes:
            return _norm(body)
        rest = body[body.rfind('"') + 1 :]
        m = _CONCLUSION.match(rest)
        conclusion = m.group(1) if m else rest
        return " | ".join(_norm(q) for q in quotes) + " → " + _norm(conclusion)

    # --- what a perfect model writes (SFT data) ---------------------------------------------------------------
    @staticmethod
    def render_reasoning(reasoning: str, *, query: str | None = None, answer: str | None = None) -> str:
        """A reasoning-stage turn ending in a query or the answer."""
        if (query is None) == (answer is None):
            raise ValueError("render_reasoning: give exactly one of query= or answer=")
        tail = f"<query> {query} </query>" if query is not None else f"<answer> {answer} </answer>"
        return f"{reasoning}\n{tail}"

    @staticmethod
    def render_grounding(evidence: str | None) -> str:
        """A grounding-stage turn: ``<evidence> … </evidence>`` (``None`` when nothing helps)."""
        return f"<evidence> {evidence if evidence is not None else NO_EVIDENCE} </evidence>"

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """Per searched hop a reasoning turn ending in ``<query>`` (after the documents) and a grounding turn with the
        hop's evidence; known hops are noted in the next reasoning; the script's ``opening`` leads the first
        reasoning, each hop's ``after_evidence`` elaboration follows its evidence note, and the last reasoning adds
        the ``before_answer`` one, judges the evidence enough and ends with the script's ``reason`` before
        ``<answer>``. Draws nothing from ``rng``."""
        turns: list[Turn] = []
        notes: list[str] = []
        opened = False

        def opening() -> list[str]:
            nonlocal opened
            first, opened = not opened, True
            return script.extra("opening") if first else []

        for m in script.moves:
            hop = script.hops[m.hop]
            if m.kind == "known":
                notes.append(f"I know that {hop.known_text}")
                continue
            lead = "Let me double-check" if m.repeat else "The evidence is not enough yet. I need"
            reasoning = " ".join([*opening(), *notes, f"{lead}: {hop.question}"])
            obs = script.observe(m.hop, self.default_mode)
            turns.append((self.render_reasoning(reasoning, query=hop.question), obs))
            turns.append((self.render_grounding(script.evidence(m.hop, obs)), None))
            notes = [f"The evidence shows {hop.answer}.", *script.extra("after_evidence", m.hop)]
        reasoning = " ".join(
            [*opening(), *notes, *script.extra("before_answer"), "The evidence is enough.", script.reason]
        )
        turns.append((self.render_reasoning(reasoning, answer=script.answer), None))
        return turns
