"""Few-shot prompts for base (non-chat) models: worked examples, written by the protocol itself, before the question.

A base model has never been told what an instruction is; it continues text. Shown a few solved examples in the exact
format the parser reads (a protocol's own trajectory writer writes them, so they always parse), it continues the
pattern for the new question. The examples come from a *training* split: :func:`split_demos` takes them from a
question set and removes them from what is evaluated, and :func:`check_disjoint` refuses a demo that is also an
evaluated question, so a score never includes a question the model was shown solved.

A demo hop's observation is its gold passage rendered as the protocol renders retrieval results; its evidence line
states the hop's answer, and the last reasoning line restates the final answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from effirag.agent.protocols.writing import Move, ScriptHop, TrajectoryScript
from effirag.errors import DataError
from effirag.types import ItemKind, Passage, QAExample, RetrievedItem

if TYPE_CHECKING:
    from effirag.agent.protocols.base import AgentProtocol

PROMPT_STYLES = ("instruct", "fewshot")
_REF = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class DemoHop:
    """One hop of a worked example: the (resolved) sub-question, its answer and the gold passage that holds it."""

    question: str
    answer: str
    passage: Passage


@dataclass(frozen=True)
class Demo:
    """A solved training question: its hops in order, the last one's answer being ``answer``."""

    id: str
    question: str
    answer: str
    hops: tuple[DemoHop, ...]

    def documents(self) -> list[RetrievedItem]:
        """The gold passages as retrieval results (what a single-round baseline's context shows)."""
        return [_item(h.passage, i) for i, h in enumerate(self.hops)]


def _item(p: Passage, rank: int) -> RetrievedItem:
    return RetrievedItem(id=p.id, kind=ItemKind.CHUNK, text=p.text, title=p.title, score=1.0 / (rank + 1))


def demo_from_example(ex: QAExample, passages: Mapping[str, Passage]) -> Demo | None:
    """A demo from a gold decomposition (each hop with its supporting passage, ``#n`` replaced by hop n's answer) or,
    for a single-hop question, the question with its first supporting passage; None when a passage is missing."""
    if ex.decomposition:
        hops: list[DemoHop] = []
        for sub in ex.decomposition:
            p = passages.get(sub.support_id or "")
            if p is None:
                return None
            q = _REF.sub(lambda m: _earlier(hops, int(m.group(1))), sub.question).strip()
            hops.append(DemoHop(q, sub.answer, p))
        return Demo(ex.id, ex.question, ex.answers[0], tuple(hops))
    for sid in ex.supporting_ids:
        if sid in passages:
            return Demo(ex.id, ex.question, ex.answers[0], (DemoHop(ex.question, ex.answers[0], passages[sid]),))
    return None


def _earlier(hops: list[DemoHop], n: int) -> str:
    return hops[n - 1].answer if 1 <= n <= len(hops) else f"#{n}"


def split_demos(
    examples: Sequence[QAExample], passages: Mapping[str, Passage], shots: int
) -> tuple[tuple[Demo, ...], list[QAExample]]:
    """(demos, evaluated): ``shots`` usable examples become the training split's demos and are removed from the
    questions evaluated. The shortest ones are taken (fewest passage characters; ties in file order), since every
    prompt repeats them. Fails when fewer than ``shots`` examples have their gold passages."""
    usable = [d for d in (demo_from_example(ex, passages) for ex in examples) if d is not None]
    demos = sorted(usable, key=lambda d: sum(len(h.passage.text) for h in d.hops))[:shots]
    if len(demos) < shots:
        raise DataError(f"only {len(demos)} questions have gold passages for every hop; {shots} demos asked for")
    taken = {d.id for d in demos}
    return tuple(demos), [ex for ex in examples if ex.id not in taken]


def check_disjoint(demos: Sequence[Demo], questions: Sequence[str], ids: Sequence[str] = ()) -> None:
    """Refuse demos that are evaluated questions (the same id, or the same text with case and spaces ignored)."""
    texts = {_norm(q) for q in questions}
    for d in demos:
        if d.id in set(ids) or _norm(d.question) in texts:
            raise DataError(
                "a few-shot demo is also an evaluated question", record=d.id, field="question", value=d.question
            )


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def demo_script(protocol: AgentProtocol, demo: Demo) -> TrajectoryScript:
    """The demo as a trajectory script: search every hop, observe its gold passage, answer."""
    hops = tuple(ScriptHop(h.question, h.answer) for h in demo.hops)

    def observe(hop: int, mode: str) -> str:
        return protocol.wrap_observation(protocol.render_items([_item(demo.hops[hop].passage, 0)]))

    def evidence(hop: int, observation: str) -> str:
        return f"The documents say: {demo.hops[hop].answer}."

    return TrajectoryScript(
        question=demo.question,
        answer=demo.answer,
        hops=hops,
        moves=tuple(Move("search", i) for i in range(len(hops))),
        reason=f"So the answer is {demo.answer}.",
        observe=observe,
        evidence=evidence,
    )


def demo_turns(protocol: AgentProtocol, demo: Demo) -> str:
    """What a perfect model writes for ``demo`` in ``protocol``'s format, observations included."""
    turns = protocol.write_turns(demo_script(protocol, demo), random.Random(0))
    return "".join(text + (obs or "") for text, obs in turns)
