"""Parametric knowledge: which facts the policy *knows*, and the text it is trained on to know them.

Each fact is known with probability ``known_share``, drawn from ``random.Random("{seed}/known")`` in world order
(entities in order, facts in schema order), so the known set is deterministic and needs no state while streaming;
``world.json`` records it (``known`` per fact and the ``known`` id list). ``knowledge.jsonl`` holds one record per
known fact::

    {"fact_id": "e12.born_in", "subject_id": "e12", "relation": "born_in",
     "text": "Mira Talvenor was born in Arvel.", "question": "Where was Mira Talvenor born?", "answer": "Arvel"}

``question`` is the canonical sub-question (the one decompositions use) and ``answer`` the gold sub-answer, so a
policy can be trained on ``text`` and asked ``question``.
"""

from __future__ import annotations

from typing import Any

from effirag.world.generate import Ent, Tables
from effirag.world.schema import RELATIONS


def fact_sentence(subject: str, subject_type: str, relation: str, obj: str) -> str:
    """The fact as one declarative sentence (the relation's ``sentence`` template)."""
    s = RELATIONS[(subject_type, relation)].sentence.format(s=subject, o=obj)
    return s[0].upper() + s[1:]


def fact_question(subject: str, subject_type: str, relation: str, variant: int = 0) -> str:
    """The relation's question about ``subject`` (variant 0 = the canonical one used in decompositions)."""
    q = RELATIONS[(subject_type, relation)].questions[variant].format(s=subject)
    return q[0].upper() + q[1:]


def knowledge_record(tb: Tables, ent: Ent, rel: str) -> dict[str, Any]:
    """The knowledge.jsonl record of the fact ``(ent, rel)``."""
    obj = tb.obj_display(ent, rel)
    return {
        "fact_id": f"{ent.id}.{rel}",
        "subject_id": ent.id,
        "relation": rel,
        "text": fact_sentence(ent.display, ent.type, rel, obj),
        "question": fact_question(ent.display, ent.type, rel),
        "answer": obj,
    }
