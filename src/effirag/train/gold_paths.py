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

    Why: the splits' questions name a few hundred entities, few enough that a small policy memorises which name goes
    with which question instead of learning to copy the name it reads (the demo policy's failure, BENCHMARKS.md).
    These paths put every entity in the copying role. Facts any question of ``exclude_splits`` asks are left out,
    so no evaluated hop is trained on; known facts are left out too (knowledge.jsonl teaches those).
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


def compared_first(values: Sequence[str], *, where: str = "") -> int:
    """Index of the earliest of two or more dates or years ("24 June 1975", "1921"), compared by year: the answer of
    EffiRAG-World's "which came first" comparisons, whose two years always differ. A value that does not end in a
    year, or a tie, is a DataError naming ``where``."""
    years = []
    for v in values:
        last = v.rsplit(" ", 1)[-1]
        if not last.isdigit():
            raise DataError("expected a date or year ending in the year", record=where, field="value", value=v)
        years.append(int(last))
    best = min(years)
    if years.count(best) > 1:
        raise DataError("two values share the earliest year", record=where, field="value", value=list(values))
    return years.index(best)


def world_comparison_paths(
    world_dir: str | Path, n: int, *, seed: int = 0, exclude_splits: Sequence[str] = ("dev", "test")
) -> list[GoldPath]:
    """``n`` comparison questions drawn afresh from an EffiRAG-World's facts, as gold paths (two hops, one per side).

    Why: a world's train split has ~120 comparisons, too few for a small policy to learn to compare two years it has
    read (BENCHMARKS.md item 32: the demo policy reads both sides, then answers a third name). These paths ask the
    world's four comparison kinds (questions.COMPARISONS, drawn uniformly; half of the nationality pairs share one)
    over facts no question of ``exclude_splits`` asks, so no evaluated pair or side is trained on. Pairs are distinct,
    the "first" kinds never tie on the year, and the hops are resolved as :func:`world_paths` does (known facts
    flagged). Randomness from ``"{seed}/comparison-paths"``; fewer than ``n`` only when the world runs out of pairs.
    """
    import random

    from effirag.data import load_corpus
    from effirag.world import World
    from effirag.world.questions import COMPARISON_KINDS, COMPARISONS

    d = Path(world_dir)
    world = World.load(d)
    corpus = load_corpus(d / "corpus.jsonl")
    excluded = asked_facts(world, d, exclude_splits, corpus)
    pools = {
        kind: [f for f in world.facts.values()
               if f.subject_type == etype and f.relation == rel and f.id not in excluded and f.passages]
        for kind, (etype, rel, _) in COMPARISONS.items()
    }  # fmt: skip
    by_source = triplets_by_source(load_world_triplets(d / "triplets.jsonl"))

    def knows(question: str) -> str | None:
        fact = world.fact_for(question)
        return fact.text if fact is not None and world.knows(fact) else None

    rng = random.Random(f"{seed}/comparison-paths")
    seen: set[tuple[str, str]] = set()
    paths: list[GoldPath] = []
    for _attempt in range(50 * n):
        if len(paths) == n:
            break
        kind = COMPARISON_KINDS[rng.randrange(len(COMPARISON_KINDS))]
        pool = pools[kind]
        if len(pool) < 2:
            continue
        a, b = rng.sample(pool, 2)
        if kind == "nationality" and rng.random() < 0.5:
            same = [f for f in pool if f.object == a.object and f.id != a.id]
            b = same[rng.randrange(len(same))] if same else b
        key = (min(a.id, b.id), max(a.id, b.id))
        values = [a.object, b.object]
        if key in seen or (kind != "nationality" and len({v.rsplit(" ", 1)[-1] for v in values}) < 2):
            continue
        seen.add(key)
        templates = COMPARISONS[kind][2]
        question = rng.choice(templates).format(x=a.subject, y=b.subject)
        if kind == "nationality":
            answers: tuple[str, ...] = ("yes",) if a.object == b.object else ("no",)
        else:
            first = (a, b)[compared_first(values, where=f"cmp:{a.id}|{b.id}")]
            answers = tuple(dict.fromkeys((first.subject, world.entities[first.subject_id].name)))
        decomposition = tuple(SubQuestion(f.question, f.object, f.passages[0]) for f in (a, b))
        support = tuple(dict.fromkeys(f.passages[0] for f in (a, b)))
        ex = QAExample(f"cmp:{a.id}|{b.id}", question, answers, 2, "comparison", support, decomposition)
        paths.append(build_path(ex, corpus.by_id, by_source, knows))
    return paths


def sides_swapped(path: GoldPath) -> GoldPath:
    """A two-hop comparison asked with its sides in the other order: the two names swap places in the question and the
    hops run in that order; the answers stay. Why: the demo policy's answer to a comparison does not follow the values
    it has read (BENCHMARKS.md items 37-39); with both orders of one question in the data, naming a side by its position
    is wrong for exactly one of the two, and only the compare is right for both."""
    if path.qtype != "comparison" or len(path.hops) != 2 or not all(h.entities for h in path.hops):
        raise ValueError(f"sides_swapped: {path.id!r} is not a two-hop comparison naming both sides")
    a, b = path.hops[0].entities[0], path.hops[1].entities[0]
    if a in b or b in a or path.question.count(a) != 1 or path.question.count(b) != 1:
        raise ValueError(f"sides_swapped: {path.id!r}: {a!r} and {b!r} must each be named once in {path.question!r}")
    question = path.question.replace(a, "\0").replace(b, a).replace("\0", b)
    return GoldPath(f"{path.id}~swapped", question, path.answers, path.hops[::-1], path.qtype)


def musique_paths(
    questions_path: str | Path, corpus_path: str | Path, openie_path: str | Path
) -> tuple[list[GoldPath], list[Passage], list[Triplet]]:
    """Gold paths of MuSiQue-layout questions; supporting triplets come from the OpenIE file."""
    from effirag.data import load_corpus, load_openie, load_questions

    corpus = load_corpus(corpus_path)
    qs = load_questions(questions_path, corpus)
    oie = load_openie(openie_path, corpus)
    by_id = dict(corpus.by_id)
    for p in qs.passages:
        by_id.setdefault(p.id, p)
    by_source = triplets_by_source(oie.triplets)
    paths = [build_path(ex, by_id, by_source) for ex in qs.examples if ex.decomposition]
    return paths, list(corpus.passages), oie.triplets
