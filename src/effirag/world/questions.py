"""Questions of a world: 1-hop, 2–4-hop compositional chains with MuSiQue-style decompositions, and comparisons.

A *chain* is the tuple of fact ids a question walks. Splits are disjoint in a strong sense: no chain, and no part
of two or more consecutive hops of a chain, is used by two splits (so a test 2-hop question is never the tail of a
train 3-hop question). Each hop of a decomposition carries its fact id (``metadata["facts"]``), its sub-question with
the previous answer substituted (``question``) and MuSiQue's ``#k`` template (``metadata["templates"]``).

Question ids are ``{split}-{kind}-{n:05d}`` (kind ``1hop`` … ``4hop`` or ``cmp``), numbered in file order.
"""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from typing import Any

from effirag.types import QAExample, SubQuestion, Triplet
from effirag.world.generate import MONTHS, Ent, Tables
from effirag.world.names import demonym
from effirag.world.plan import KINDS, SPLITS
from effirag.world.schema import CHAIN_PATTERNS, COMPANY, FILM, PERSON, RELATIONS

Hop = tuple[Ent, str]  # (subject entity, relation name)

# comparison kind → (entity type, relation compared, question templates over the two display names {x} and {y});
# the date kinds ask which came first, "nationality" asks yes / no (two phrasings, drawn at random)
COMPARISON_KINDS = ("film", "person", "company", "nationality")
COMPARISONS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "film": (FILM, "release_year", ("Which film came out first, {x} or {y}?",)),
    "person": (PERSON, "birth_date", ("Who was born first, {x} or {y}?",)),
    "company": (COMPANY, "founded_year", ("Which company was founded first, {x} or {y}?",)),
    "nationality": (PERSON, "nationality", ("Were {x} and {y} of the same nationality?",
                                            "Are {x} and {y} from the same country?")),
}  # fmt: skip


@dataclass
class WorldQuestion:
    """A question and the metadata EffiRAG-World adds to the FlashRAG record."""

    example: QAExample
    extra: dict[str, Any]


def fact_id(ent: Ent, rel: str) -> str:
    """Id of the fact ``(ent, rel)``: ``"e12.born_in"``."""
    return f"{ent.id}.{rel}"


def sub_question(ent: Ent, rel: str, subject: str | None = None, variant: int = 0) -> str:
    """The relation's question about ``ent`` (or about ``subject`` text, e.g. ``"#1"``)."""
    q = RELATIONS[(ent.type, rel)].questions[variant].format(s=ent.display if subject is None else subject)
    return q[0].upper() + q[1:]


def answers_for(tb: Tables, ent: Ent, rel: str) -> tuple[str, ...]:
    """Gold answer of a fact (the object's display name or value) and its aliases."""
    v = ent.rel[rel]
    out: list[str] = []
    if isinstance(v, int):
        obj = tb.ents[v]
        out = [obj.display, obj.name]
        if rel == "nationality":
            out.append(demonym(obj.name))
    else:
        out = [v]
        parts = v.split(" ")
        if len(parts) == 3 and parts[1] in MONTHS:  # a date: also "March 12, 1954"
            out.append(f"{parts[1]} {parts[0]}, {parts[2]}")
    return tuple(dict.fromkeys(out))


def _walk(tb: Tables, start: Ent, rels: tuple[str, ...]) -> list[Hop] | None:
    hops: list[Hop] = []
    seen = {start.idx}
    ent = start
    for i, rel in enumerate(rels):
        hops.append((ent, rel))
        v = ent.rel.get(rel)
        if v is None:
            return None
        if i < len(rels) - 1:
            if not isinstance(v, int) or v in seen:
                return None
            ent = tb.ents[v]
            seen.add(v)
        elif isinstance(v, int) and v in seen:
            return None  # the answer would be named in the question
    return hops


class QuestionMaker:
    """Samples questions for every split (see module docstring); randomness from ``"{seed}/questions"``."""

    def __init__(self, tb: Tables, seed: int) -> None:
        self.tb = tb
        self.rng = random.Random(f"{seed}/questions")
        persons = tb.of(PERSON)
        self.starts: dict[str, list[Ent]] = {t: tb.of(t) for t in tb.ranges}
        self.starts["child"] = [p for p in persons if "father" in p.rel]
        self.starts["musician"] = [p for p in persons if "member_of" in p.rel]
        self.cum: dict[int, list[int]] = {}
        for h in (2, 3, 4):
            acc, cum = 0, []
            for kind, _ in CHAIN_PATTERNS[h]:
                acc += len(self.starts[kind])
                cum.append(acc)
            self.cum[h] = cum
        self.owner: dict[tuple[str, ...], str] = {}

    # -- candidates ---------------------------------------------------------------------------------------------------
    def _chain(self, hops: int) -> list[Hop] | None:
        rng, tb = self.rng, self.tb
        if hops == 1:
            ent = tb.ents[rng.randrange(len(tb.ents))]
            names = list(tb.facts(ent))
            return [(ent, names[rng.randrange(len(names))])]
        cum = self.cum[hops]
        r = rng.randrange(cum[-1])
        k = bisect.bisect_right(cum, r)
        kind, rels = CHAIN_PATTERNS[hops][k]
        starts = self.starts[kind]
        return _walk(tb, starts[r - (cum[k - 1] if k else 0)], rels)

    def _claim(self, key: tuple[str, ...], split: str) -> bool:
        """Reserve a chain (and its multi-hop parts) for ``split``; False if another split or question has it."""
        if key in self.owner:
            return False
        parts = [key[i:j] for i in range(len(key)) for j in range(i + 2, len(key) + 1) if (i, j) != (0, len(key))]
        if any(self.owner.get(p, split) != split for p in parts):
            return False
        self.owner[key] = split
        for p in parts:
            self.owner[p] = split
        return True

    # -- questions ----------------------------------------------------------------------------------------------------
    def _compositional(self, hops: list[Hop]) -> WorldQuestion:
        tb, rng = self.tb, self.rng
        start, _ = hops[0]
        phrase = start.display
        for ent, rel in hops[:-1]:
            phrase = RELATIONS[(ent.type, rel)].phrase.format(s=phrase)
        last, last_rel = hops[-1]
        variant = rng.randrange(len(RELATIONS[(last.type, last_rel)].questions))
        question = sub_question(last, last_rel, phrase if len(hops) > 1 else None, variant)
        decomposition, templates, facts, evidence = [], [], [], []
        for i, (ent, rel) in enumerate(hops):
            ans = answers_for(tb, ent, rel)
            pid = tb.fact_passages(ent, rel)[0]
            decomposition.append(SubQuestion(sub_question(ent, rel), ans[0], pid))
            templates.append(sub_question(ent, rel, f"#{i}" if i else None))
            facts.append(fact_id(ent, rel))
            evidence.append(Triplet(ent.display, RELATIONS[(ent.type, rel)].surfaces[0], ans[0], pid))
        ex = QAExample(
            id="",
            question=question,
            answers=answers_for(tb, last, last_rel),
            hops=len(hops),
            qtype="single-hop" if len(hops) == 1 else "compositional",
            supporting_ids=tuple(dict.fromkeys(d.support_id for d in decomposition if d.support_id)),
            decomposition=tuple(decomposition),
            evidence=tuple(evidence),
        )
        return WorldQuestion(ex, {"facts": facts, "templates": templates, "chain": [r for _, r in hops]})

    def _comparison(self) -> tuple[tuple[str, ...], WorldQuestion] | None:
        tb, rng = self.tb, self.rng
        kind = COMPARISON_KINDS[rng.randrange(4)]
        etype, rel, templates = COMPARISONS[kind]
        pool = self.starts[etype]  # cached: tb.of() copies the slice
        a = pool[rng.randrange(len(pool))]
        if kind == "nationality" and rng.random() < 0.5:  # a "yes" pair: someone with the same nationality
            at = rng.randrange(len(pool))
            same = [p for p in pool[at : at + 400] if p.rel["nationality"] == a.rel["nationality"]]
            b = same[rng.randrange(len(same))] if same else pool[rng.randrange(len(pool))]
        else:
            b = pool[rng.randrange(len(pool))]
        if a.idx == b.idx or (kind != "nationality" and a.year == b.year):
            return None
        if rng.random() < 0.5:
            a, b = b, a
        x, y = a.display, b.display
        if kind == "nationality":
            same_country = a.rel["nationality"] == b.rel["nationality"]
            answers: tuple[str, ...] = ("yes",) if same_country else ("no",)
            question = rng.choice(templates).format(x=x, y=y)
        else:
            first = a if a.year < b.year else b
            answers = tuple(dict.fromkeys((first.display, first.name)))
            question = templates[0].format(x=x, y=y)
        decomposition, evidence = [], []
        for ent in (a, b):
            pid = tb.fact_passages(ent, rel)[0]
            value = answers_for(tb, ent, rel)[0]
            decomposition.append(SubQuestion(sub_question(ent, rel), value, pid))
            evidence.append(Triplet(ent.display, RELATIONS[(ent.type, rel)].surfaces[0], value, pid))
        facts = [fact_id(a, rel), fact_id(b, rel)]
        ex = QAExample(
            id="",
            question=question,
            answers=answers,
            hops=2,
            qtype="comparison",
            supporting_ids=tuple(dict.fromkeys(d.support_id for d in decomposition if d.support_id)),
            decomposition=tuple(decomposition),
            evidence=tuple(evidence),
        )
        key = ("cmp", *sorted(facts))
        extra = {"facts": facts, "templates": [d.question for d in decomposition], "comparison": kind}
        return key, WorldQuestion(ex, extra)

    def make(self, targets: dict[str, dict[str, int]]) -> dict[str, list[WorldQuestion]]:
        """Questions per split with exactly ``targets[split][kind]`` of each kind, ids assigned in file order."""
        slots = [(split, kind) for split in SPLITS for kind in KINDS for _ in range(targets[split][kind])]
        self.rng.shuffle(slots)
        out: dict[str, list[WorldQuestion]] = {s: [] for s in SPLITS}
        for split, kind in slots:
            for _attempt in range(10000):
                if kind == "comparison":
                    got = self._comparison()
                    if got is None or not self._claim(got[0], split):
                        continue
                    out[split].append(got[1])
                    break
                hops = self._chain(int(kind))
                if hops is None or not self._claim(tuple(fact_id(e, r) for e, r in hops), split):
                    continue
                out[split].append(self._compositional(hops))
                break
            else:
                raise RuntimeError(f"could not draw a fresh {kind} question for split {split!r} in 10000 tries")
        for split, qs in out.items():
            for n, q in enumerate(qs):
                tag = "cmp" if q.example.qtype == "comparison" else f"{q.example.hops}hop"
                ex = q.example
                q.example = QAExample(
                    f"{split}-{tag}-{n:05d}", ex.question, ex.answers, ex.hops, ex.qtype, ex.supporting_ids,
                    ex.decomposition, ex.evidence,
                )  # fmt: skip
        return out
