"""Baselines as ordinary protocols: zero-shot, naive single-round RAG (Single-S), Single-Con and Single-PPR.

Each answers in one turn with ``<answer> … </answer>``. The single-round RAG baselines retrieve once with the question
before the model's turn (the engine does it, so the retrieval is timed and its tokens counted like any search):
Single-S takes the top-k dense passages, Single-Con the top chunks concatenated with the top triplets (TeaRAG's
baseline; mode ``chunks_triplets``), Single-PPR one KAG + PPR retrieval (mode ``kag``).
"""

from __future__ import annotations

import random
from typing import ClassVar

from effirag.agent.parsing import cut_after_first, extract_tag
from effirag.agent.protocols.base import AgentProtocol, EpisodeState, ParseResult, invalid
from effirag.agent.protocols.writing import TrajectoryScript, Turn
from effirag.types import Action

_ANSWER = "Write only the answer, inside <answer> </answer>, for example <answer> Paris </answer>."


class ZeroShotProtocol(AgentProtocol):
    """Zero-shot: the question alone, one answering turn."""

    name: ClassVar[str] = "zeroshot"
    mode_choice: ClassVar[str] = "none"
    stop: ClassVar[tuple[str, ...]] = ("</answer>",)
    single_turn: ClassVar[bool] = True
    title: ClassVar[str] = "zero-shot baseline"

    fewshot: ClassVar[bool] = True

    def build_prompt(self, question: str, context: str | None = None) -> str:
        return (
            f"Answer the question ({self.title}). {_ANSWER}\n" + self.shots() + self.question_block(question, context)
        )

    def question_block(self, question: str, context: str | None = None) -> str:
        docs = f"Use these documents:\n{context}" if context is not None else ""
        return f"{docs}Question: {question}\n"

    def wrap_observation(self, body: str) -> str:
        return f"<documents>\n{body}\n</documents>\n"

    def parse_turn(self, text: str, state: EpisodeState) -> ParseResult:
        kept, closer = cut_after_first(text, self.stop)
        ans = extract_tag(kept, "answer")
        if closer is None or not ans.ok:
            return invalid(kept, ans.describe() if closer else "<answer>: not closed")
        return ParseResult(Action.ANSWER, kept, answer=ans.value)

    @staticmethod
    def render_answer(answer: str) -> str:
        """The one turn a perfect model writes."""
        return f"<answer> {answer} </answer>"

    def write_turns(self, script: TrajectoryScript, rng: random.Random) -> list[Turn]:
        """The answer alone (the script's moves are not written: a baseline does not search turn by turn)."""
        return [(self.render_answer(script.answer), None)]


class NaiveRAGProtocol(ZeroShotProtocol):
    """Single-S: one dense retrieval with the question, then one answering turn."""

    name: ClassVar[str] = "naive"
    mode_choice: ClassVar[str] = "run"
    pre_retrieval_mode: ClassVar[str | None] = "passage"
    title: ClassVar[str] = "naive RAG baseline, Single-S"


class SingleConProtocol(ZeroShotProtocol):
    """Single-Con: top chunks and top triplets concatenated, then one answering turn."""

    name: ClassVar[str] = "single-con"
    mode_choice: ClassVar[str] = "fixed"
    pre_retrieval_mode: ClassVar[str | None] = "chunks_triplets"
    title: ClassVar[str] = "chunks and triplets baseline, Single-Con"


class SinglePPRProtocol(ZeroShotProtocol):
    """Single-PPR: one KAG + PPR retrieval, then one answering turn."""

    name: ClassVar[str] = "single-ppr"
    mode_choice: ClassVar[str] = "fixed"
    pre_retrieval_mode: ClassVar[str | None] = "kag"
    title: ClassVar[str] = "KAG and PPR baseline, Single-PPR"
