"""Reading a (sub-)question back to the one fact it asks: which entity it names and which relation it asks.

Rules (deterministic, no model):

1. Normalise: lower case, possessive ``'s`` dropped, punctuation → spaces.
2. Entity: the longest word n-grams that equal a normalised display or plain name, non-overlapping. Exactly one
   entity span must be found; a plain name shared by several entities is resolved by the qualifier words of their
   display names (``1987 film``), else the question is ambiguous.
3. Relation: among the subject type's relations, those whose cue groups are all hit by the remaining words;
   relations whose hit words are a strict subset of another's are dropped ("When was X born?" hits birth_date
   {born, when} and born_in {born}: birth_date). Exactly one must remain.
4. Nested questions are refused: a remaining word that cues only relations of *other* subject types ("Where was the
   director of X born?" — ``born`` is a person cue, X a film) means more than one hop, so no single fact; so does a
   type noun that is neither the subject's nor the answer's type ("In which *country* is the city where X is
   headquartered?" — X is a company, its headquarters a city).

Anything else returns None: the question does not ask exactly one fact of the world.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from effirag.world.schema import RELATIONS, RELATIONS_OF

_NON_WORD = re.compile(r"[^0-9a-z]+")
_POSSESSIVE = re.compile(r"'s\b")
#: Question words and types that appear in questions of every kind: not evidence of a second hop.
GENERIC = frozenset({"who", "where", "when", "what", "which", "year", "date", "day", "city", "country"})
#: Nouns naming an entity type (a question may name its subject's type and its answer's type, nothing else).
TYPE_NOUNS = {
    "country": "country", "city": "city", "town": "city", "university": "university", "college": "university",
    "company": "company", "studio": "company", "band": "band", "group": "band", "film": "film", "movie": "film",
}  # fmt: skip
_ALL_CUES = frozenset(w for r in RELATIONS.values() for g in r.cues for w in g) - GENERIC - TYPE_NOUNS.keys()
_TYPE_CUES = {t: frozenset(w for r in rels for g in r.cues for w in g) for t, rels in RELATIONS_OF.items()}


def normalize(text: str) -> list[str]:
    """Lower-cased words without punctuation or possessive ``'s`` ("Who was Mira's father?" → who was mira father)."""
    return _NON_WORD.sub(" ", _POSSESSIVE.sub("", text.lower().replace("’", "'"))).split()


class NameIndex:
    """Normalised display and plain names → entity ids, for matching names inside question text."""

    def __init__(self, entities: Iterable[tuple[str, str, str]]) -> None:
        """``entities``: ``(id, name, display)`` triples."""
        self.ids: dict[str, list[str]] = {}
        self.qualifier: dict[str, frozenset[str]] = {}
        self.max_words = 1
        for eid, name, display in entities:
            for text in dict.fromkeys((display, name)):
                words = normalize(text)
                key = " ".join(words)
                self.ids.setdefault(key, []).append(eid)
                self.max_words = max(self.max_words, len(words))
            if display != name:
                self.qualifier[eid] = frozenset(normalize(display)) - frozenset(normalize(name))

    def spans(self, words: list[str]) -> list[tuple[int, int, list[str]]]:
        """Every entity name in ``words``: ``(start, end, candidate ids)``, longest first, non-overlapping."""
        taken = [False] * len(words)
        spans: list[tuple[int, int, list[str]]] = []
        for n in range(min(self.max_words, len(words)), 0, -1):
            for i in range(len(words) - n + 1):
                if any(taken[i : i + n]):
                    continue
                ids = self.ids.get(" ".join(words[i : i + n]))
                if ids:
                    spans.append((i, i + n, ids))
                    for j in range(i, i + n):
                        taken[j] = True
        return sorted(spans)

    def resolve(self, ids: list[str], words: Iterable[str]) -> str | None:
        """One id among ``ids`` (candidates sharing a plain name) whose qualifier words all occur in ``words``."""
        if len(ids) == 1:
            return ids[0]
        present = set(words)
        hits = [i for i in ids if i in self.qualifier and self.qualifier[i] <= present]
        return hits[0] if len(hits) == 1 else None

    def find(self, words: list[str]) -> tuple[str | None, list[str]]:
        """``(entity id, remaining words)`` when exactly one entity is named unambiguously, else ``(None, words)``."""
        spans = self.spans(words)
        if len(spans) != 1:
            return None, words
        start, end, ids = spans[0]
        rest = words[:start] + words[end:]
        if len(ids) > 1:
            present = set(rest)
            ids = [i for i in ids if i in self.qualifier and self.qualifier[i] <= present]
            if len(ids) != 1:
                return None, words
            rest = [w for w in rest if w not in self.qualifier[ids[0]]]
        return ids[0], rest


def relation_for(subject_type: str, words: Iterable[str]) -> str | None:
    """The one relation of ``subject_type`` the words ask about (rules 3–4 of the module docstring), or None."""
    present = set(words)
    if (present & _ALL_CUES) - _TYPE_CUES[subject_type]:
        return None  # a cue of another type's relation: the question nests a second hop
    hits: list[tuple[str, frozenset[str]]] = []
    for rel in RELATIONS_OF[subject_type]:
        matched: set[str] = set()
        for group in rel.cues:
            got = group & present
            if not got:
                break
            matched |= got
        else:
            hits.append((rel.name, frozenset(matched)))
    kept = [(n, m) for n, m in hits if not any(m < other for _, other in hits)]
    if len(kept) != 1:
        return None
    name = kept[0][0]
    allowed = {subject_type, RELATIONS[(subject_type, name)].object_type}
    if any(TYPE_NOUNS[w] not in allowed for w in present if w in TYPE_NOUNS):
        return None  # the question names a third type: it nests another hop
    return name
