"""``World``: a generated world loaded back from its output folder, with exact ground truth.

API (what the agent, rewards and SFT-data code use)::

    w = World.load("out/world")                 # reads world.json
    w.facts["e12.born_in"]                      # Fact (frozen): id, subject_id, subject, subject_type, relation,
                                                #   object, object_id, passages (ids of the passages stating it)
    w.knows(fact) / w.knows("e12.born_in")      # is the fact in the known subset (knowledge.jsonl)?
    w.fact_for("Where was Mira Talvenor born?") # → Fact | None: the one fact a (sub-)question asks
    w.facts_stated("Mira Talvenor was born in Arvel.")  # → [Fact]: true facts a text asserts (subject + object)
    w.entity("e12") / w.entity("Mira Talvenor") # Entity by id, display name or unambiguous plain name
    w.facts_of("e12"), w.known_facts()

Fact ids are ``"{subject_id}.{relation}"``. Every question record's ``metadata["facts"]`` lists the fact id of each
decomposition hop, in order, and ``decomposition[i]["question"]`` is ``w.facts[id].question`` (the canonical
sub-question), so ``w.fact_for(sub_question)`` returns that fact. Over-search: a search whose query asks a fact
``w.knows``; under-search: an unsearched step asserting (``w.facts_stated``) a fact ``w.knows`` not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from effirag.data.io import read_json
from effirag.errors import DataError
from effirag.world.build import FORMAT
from effirag.world.knowledge import fact_question, fact_sentence
from effirag.world.lookup import NameIndex, normalize, relation_for


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity: ``display`` is the unique name used in text and questions (``name (qualifier)`` when shared)."""

    id: str
    type: str
    name: str
    display: str
    passages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact (subject, relation, object) and the passages that state it (the subject's own passage first)."""

    id: str
    subject_id: str
    subject: str
    subject_type: str
    relation: str
    object: str
    object_id: str | None
    passages: tuple[str, ...]

    @property
    def text(self) -> str:
        """The fact as one sentence (as in knowledge.jsonl)."""
        return fact_sentence(self.subject, self.subject_type, self.relation, self.object)

    @property
    def question(self) -> str:
        """The canonical sub-question asking this fact (as in decompositions and knowledge.jsonl)."""
        return fact_question(self.subject, self.subject_type, self.relation)


class World:
    """Entities, facts and the known subset of one generated world."""

    def __init__(
        self,
        entities: Mapping[str, Entity],
        facts: Mapping[str, Fact],
        known: frozenset[str],
        config: Mapping[str, Any],
        seed: int,
        path: str = "",
    ) -> None:
        self.entities = dict(entities)
        self.facts = dict(facts)
        self.known = known
        self.config = dict(config)
        self.seed = seed
        self.path = path
        self._by_subject: dict[str, list[Fact]] = {}
        for f in self.facts.values():
            self._by_subject.setdefault(f.subject_id, []).append(f)
        self._names = NameIndex((e.id, e.name, e.display) for e in self.entities.values())

    @classmethod
    def load(cls, path: str | Path) -> World:
        """Load ``world.json`` from an output folder (or the file itself)."""
        p = Path(path)
        if p.is_dir():
            p = p / "world.json"
        data = read_json(p)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DataError(f"not an EffiRAG-World file (expected format {FORMAT!r})", path=p, field="format")
        try:
            entities = {
                e["id"]: Entity(e["id"], e["type"], e["name"], e["display"], tuple(e["passages"]))
                for e in data["entities"]
            }
            facts = {}
            for i, f in enumerate(data["facts"]):
                subj = entities.get(f["subject"])
                if subj is None:
                    raise DataError("unknown subject entity", path=p, record=f"facts[{i}]", field="subject",
                                    value=f["subject"])  # fmt: skip
                facts[f["id"]] = Fact(
                    f["id"], subj.id, subj.display, subj.type, f["relation"], f["object"], f["object_id"],
                    tuple(f["passages"]),
                )  # fmt: skip
            known = frozenset(data["known"])
        except KeyError as e:
            raise DataError("missing field", path=p, field=str(e.args[0])) from e
        missing = sorted(known - facts.keys())[:1]
        if missing:
            raise DataError("known fact id names no fact", path=p, field="known", value=missing[0])
        return cls(entities, facts, known, data.get("config", {}), int(data.get("seed", 0)), str(p))

    def knows(self, fact: Fact | str) -> bool:
        """Whether the policy knows ``fact`` (a Fact or a fact id): it is in knowledge.jsonl."""
        return (fact.id if isinstance(fact, Fact) else fact) in self.known

    def known_facts(self) -> list[Fact]:
        """Every known fact, in world order."""
        return [f for f in self.facts.values() if f.id in self.known]

    def entity(self, key: str) -> Entity:
        """Entity by id, display name or plain name; KeyError if absent or if a plain name is shared."""
        if key in self.entities:
            return self.entities[key]
        ids = self._names.ids.get(" ".join(normalize(key)), [])
        if len(ids) == 1:
            return self.entities[ids[0]]
        why = "is shared by " + ", ".join(self.entities[i].display for i in ids) if ids else "names no entity"
        raise KeyError(f"{key!r} {why}")

    def facts_of(self, entity_id: str) -> list[Fact]:
        """Facts whose subject is ``entity_id``, in schema order."""
        return list(self._by_subject.get(entity_id, []))

    def fact_for(self, question: str) -> Fact | None:
        """The fact a (sub-)question asks, or None when it asks no single fact (see :mod:`effirag.world.lookup`).

        Works on the canonical sub-questions, their paraphrases, and lower-cased / unpunctuated forms of them.
        """
        eid, rest = self._names.find(normalize(question))
        if eid is None:
            return None
        rel = relation_for(self.entities[eid].type, rest)
        if rel is None:
            return None
        return self.facts.get(f"{eid}.{rel}")

    def facts_stated(self, text: str) -> list[Fact]:
        """True facts a text asserts: the subject is named and so is the object (an entity's name, or the literal
        value as consecutive words, e.g. ``12 March 1954``). Wrong claims match nothing. Order: by subject mention.
        """
        words = normalize(text)
        spans = self._names.spans(words)
        found: list[str] = []
        for start, end, ids in spans:
            rest = words[:start] + words[end:]
            eid = self._names.resolve(ids, rest)
            if eid is not None and eid not in found:
                found.append(eid)
        joined = " " + " ".join(words) + " "
        out: list[Fact] = []
        for eid in found:
            for f in self._by_subject.get(eid, []):
                if f.object_id is not None:
                    if f.object_id in found:
                        out.append(f)
                elif " " + " ".join(normalize(f.object)) + " " in joined:
                    out.append(f)
        return out
