"""Gold reasoning paths (TeaRAG §4.3.1, first half): one resolved hop per gold sub-question.

From a gold decomposition, every hop gets: its natural sub-question with ``#n`` replaced by the n-th earlier
sub-answer (MuSiQue's convention), the sub-answer, the supporting passage, the *supporting triplets* (triplets of that
passage that contain the sub-answer), the *key entities* (the other side of those triplets that the sub-question
names — what the hop is about; else the supporting page's subject when the question names it), and whether the policy
already knows the fact (EffiRAG-World's ``knowledge.jsonl``; never for MuSiQue).

Two sources share this one representation: EffiRAG-World folders and MuSiQue-layout data with OpenIE triplets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from effirag.errors import DataError
from effirag.metrics import normalize_answer
from effirag.types import Passage, QAExample, SubQuestion, Triplet

if TYPE_CHECKING:
    from effirag.data.corpus import Corpus
    from effirag.world import World

_REF = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class GoldHop:
    """One resolved hop of a gold path."""

    question: str
    answer: str
    passage: Passage | None
    triplets: tuple[Triplet, ...]
    entities: tuple[str, ...]
    known: bool = False
    known_text: str = ""  # the fact as a sentence, for hops answered from memory


@dataclass(frozen=True)
class GoldPath:
    """A question with its gold hops and final answers (the first answer is the canonical one)."""

    id: str
    question: str
    answers: tuple[str, ...]
    hops: tuple[GoldHop, ...]
    qtype: str | None = None

    @property
    def answer(self) -> str:
        return self.answers[0]


def resolve_refs(question: str, answers: Sequence[str], *, where: str = "") -> str:
    """Replace every ``#n`` (1-based) by the n-th earlier sub-answer; a reference to a later hop is a DataError."""

    def sub(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if not 1 <= n <= len(answers):
            raise DataError(f"#{n} refers to no earlier hop", record=where, field="question", value=question)
        return answers[n - 1]

    return _REF.sub(sub, question)


def contains_answer(triplet: Triplet, answer: str) -> bool:
    """Whether the sub-answer is the head or tail of ``triplet``, or is contained in one (SQuAD-normalised)."""
    a = normalize_answer(answer)
    if not a:
        return False
    return any(a == normalize_answer(x) or a in normalize_answer(x) for x in (triplet.head, triplet.tail))


def key_entities(triplets: Iterable[Triplet], answer: str, question: str | None = None) -> tuple[str, ...]:
    """The entities a hop is about: the side of each supporting triplet that is not the answer (triplet order).

    With ``question``, only the sides the sub-question names are kept (SQuAD-normalised containment): the policy
    writes ``<entities>`` from the question it is asking, so a key entity it could not read there (another triplet
    of the same passage, a date) would teach it to invent names. Empty when the question names none of them.
    """
    a = normalize_answer(answer)
    q = normalize_answer(question) if question is not None else None
    out: list[str] = []
    for t in triplets:
        h, tl = normalize_answer(t.head), normalize_answer(t.tail)
        # the answer side: an exact match first, containment only when neither side equals it
        if a == tl or (a != h and a in tl):
            other = t.head
        else:
            other = t.tail
        o = normalize_answer(other)
        if other in out or o == a or (q is not None and (not o or o not in q)):
            continue
        out.append(other)
    return tuple(out)


def build_path(
    example: QAExample,
    passages: Mapping[str, Passage],
    triplets_by_source: Mapping[str, Sequence[Triplet]],
    knows: Callable[[str], str | None] | None = None,
) -> GoldPath:
    """Resolve ``example``'s decomposition into a :class:`GoldPath`.

    ``knows(sub_question)`` returns the fact as a sentence when the policy knows it (None otherwise).
    """
    if not example.decomposition:
        raise DataError("no gold decomposition", record=example.id, field="decomposition")
    answers: list[str] = []
    hops: list[GoldHop] = []
    for i, sq in enumerate(example.decomposition):
        where = f"{example.id}.decomposition[{i}]"
        question = resolve_refs(sq.question, answers, where=where)
        passage = passages.get(sq.support_id) if sq.support_id is not None else None
        if sq.support_id is not None and passage is None:
            raise DataError("support passage not in the corpus", record=where, field="support", value=sq.support_id)
        support = [t for t in triplets_by_source.get(sq.support_id or "", ()) if contains_answer(t, sq.answer)]
        # the triplet whose other side the sub-question names first: it is the one that answers it
        q_norm = normalize_answer(question)
        support.sort(key=lambda t: not any(normalize_answer(x) in q_norm for x in (t.head, t.tail)))
        entities = key_entities(support, sq.answer, question)
        if not entities and passage is not None and normalize_answer(passage.title) in q_norm:
            # OpenIE missed the fact (or names it differently): the supporting page's subject, which the question names
            entities = (passage.title,)
        if not entities:
            # the hop is about the earlier answer it mentions, if any; else every supporting triplet's other side
            entities = tuple(a for a in answers if a in question)[-1:] or key_entities(support, sq.answer)
        fact = knows(question) if knows is not None else None
        hops.append(GoldHop(question, sq.answer, passage, tuple(support), entities, fact is not None, fact or ""))
        answers.append(sq.answer)
    return GoldPath(example.id, example.question, example.answers, tuple(hops), example.qtype)


def triplets_by_source(triplets: Iterable[Triplet]) -> dict[str, list[Triplet]]:
    out: dict[str, list[Triplet]] = {}
    for t in triplets:
        if t.source_id is not None:
            out.setdefault(t.source_id, []).append(t)
    return out


def load_world_triplets(path: Path) -> list[Triplet]:
    """An EffiRAG-World ``triplets.jsonl``; a record without head/relation/tail fails naming file and line."""
    from effirag.data.io import iter_jsonl

    out = []
    for line, r in iter_jsonl(path):
        try:
            out.append(Triplet(r["head"], r["relation"], r["tail"], r.get("source")))
        except (KeyError, TypeError) as e:
            raise DataError("expected {head, relation, tail, source}", path=path, record=line) from e
    return out


def world_paths(world_dir: str | Path, split: str = "train") -> tuple[list[GoldPath], list[Passage], list[Triplet]]:
    """Gold paths of an EffiRAG-World split, with the world's passages and triplets (for context simulation)."""
    from effirag.data import load_corpus, load_questions
    from effirag.world import World

    d = Path(world_dir)
    corpus = load_corpus(d / "corpus.jsonl")
    qs = load_questions(d / f"questions_{split}.jsonl", corpus)
    triplets = load_world_triplets(d / "triplets.jsonl")
    world = World.load(d)

    def knows(question: str) -> str | None:
        fact = world.fact_for(question)
        return fact.text if fact is not None and world.knows(fact) else None

    by_source = triplets_by_source(triplets)
    paths = [build_path(ex, corpus.by_id, by_source, knows) for ex in qs.examples if ex.decomposition]
    return paths, list(corpus.passages), triplets


def world_fact_paths(world_dir: str | Path, exclude_splits: Sequence[str] = ("dev", "test")) -> list[GoldPath]:
    """One single-hop gold path per fact of an EffiRAG-World the policy does not know, asked by its canonical
    sub-question and supported by the subject's own passage.

    Why: a world's splits name a few hundred entities, few enough that a small policy memorises which name goes
    with which question instead of learning to copy the name it reads; these paths put every entity in the copying
    role (SFT data), and give a retrieval reranker every fact to rank (train/reranker.py). Facts any question of
    ``exclude_splits`` asks are left out, so no evaluated hop is trained on; known facts are left out too
    (knowledge.jsonl teaches those).
    """
    from effirag.data import load_corpus
    from effirag.world import World

    d = Path(world_dir)
    world = World.load(d)
    corpus = load_corpus(d / "corpus.jsonl")
    excluded = asked_facts(world, d, exclude_splits, corpus)
    by_source = triplets_by_source(load_world_triplets(d / "triplets.jsonl"))
    paths = []
    for fact in world.facts.values():
        if fact.id in excluded or world.knows(fact) or not fact.passages:
            continue
        sq = SubQuestion(fact.question, fact.object, fact.passages[0])
        ex = QAExample(f"fact:{fact.id}", fact.question, (fact.object,), hops=1, decomposition=(sq,))
        paths.append(build_path(ex, corpus.by_id, by_source))
    return paths


def asked_facts(world: World, world_dir: Path, splits: Sequence[str], corpus: Corpus) -> set[str]:
    """Ids of the facts any hop of a question of ``splits`` asks (what training data must leave out)."""
    from effirag.data import load_questions

    out: set[str] = set()
    for split in splits:
        for ex in load_questions(world_dir / f"questions_{split}.jsonl", corpus).examples:
            answers: list[str] = []
            for i, sq in enumerate(ex.decomposition or ()):
                fact = world.fact_for(resolve_refs(sq.question, answers, where=f"{ex.id}.decomposition[{i}]"))
                if fact is not None:
                    out.add(fact.id)
                answers.append(sq.answer)
    return out


def musique_paths(
    questions_path: str | Path, corpus_path: str | Path, openie_path: str | Path | None = None, *, skip: int = 0
) -> tuple[list[GoldPath], list[Passage], list[Triplet]]:
    """Gold paths of questions with gold decompositions (MuSiQue / FlashRAG layouts), the file's first ``skip``
    questions left out; supporting triplets come from the OpenIE file (none without one: the hops' key entities then
    fall back to the page their question names)."""
    from effirag.data import load_corpus, load_openie, load_questions

    corpus = load_corpus(corpus_path)
    qs = load_questions(questions_path, corpus)
    triplets = load_openie(openie_path, corpus).triplets if openie_path is not None else []
    by_id = dict(corpus.by_id)
    for p in qs.passages:
        by_id.setdefault(p.id, p)
    by_source = triplets_by_source(triplets)
    paths = [build_path(ex, by_id, by_source) for ex in qs.examples[skip:] if ex.decomposition]
    return paths, list(corpus.passages), list(triplets)
