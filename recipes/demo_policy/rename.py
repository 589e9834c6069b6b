"""Counterfactual entity renaming of SFT trajectories: names can only be copied from the context, not recalled.

Why: a few-million-parameter policy trained on the demo world's train paths got 78% of the names in train summaries
right but about half on test ones, so it may learn (subject, relation) → object by heart instead of reading it off
the ``<Reference>``. Swapping a trajectory's entity names for other names of the same type, consistently in the
question, the retrieved context and the targets, makes a memorised object wrong and leaves copying as the only way
to predict it. Only trajectories that search every hop are renamed: a hop answered from memory must keep the
world's real names, or the policy would learn false facts. Measured on the demo policy
(docs/demo_policy.md): on its own it did not lift test summaries; what did was an induction-ready start, which kept
renaming on (stage 1).

Everything here is pure: the caller passes the random generator and the pool of names.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from effirag.train.gold_paths import GoldPath
from effirag.train.masking import Segment


@dataclass(frozen=True)
class EntityPool:
    """The world's entity names by type, and for each name the longer names that contain it (kept as they are)."""

    types: Mapping[str, str]  # name -> type
    by_type: Mapping[str, tuple[str, ...]]
    containing: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_names(cls, typed: Iterable[tuple[str, str]]) -> EntityPool:
        """A pool from (name, type) pairs. A name of two types (a city and a company both called "Oskar") is left
        out: which entity a text means is then unclear, so it is neither renamed nor drawn as a new name."""
        kinds: dict[str, set[str]] = {}
        for name, kind in typed:
            kinds.setdefault(name, set()).add(kind)
        types = {name: next(iter(k)) for name, k in kinds.items() if len(k) == 1}
        by_type: dict[str, list[str]] = {}
        for name, kind in sorted(types.items()):
            by_type.setdefault(kind, []).append(name)
        # "Houfyville" is part of "Houfyville State University": renaming the city must leave the university whole.
        containing = {n: tuple(m for m in types if n in m and m != n) for n in types}
        return cls(types, {k: tuple(v) for k, v in by_type.items()}, {n: c for n, c in containing.items() if c})


def path_names(path: GoldPath, pool: EntityPool) -> list[str]:
    """The pool's names among a path's key entities and answers, in first-seen order (a display name such as
    ``"Haesigrad (Fethirtania)"`` counts by its name part)."""
    out: list[str] = []
    for hop in path.hops:
        for text in (*hop.entities, hop.answer):
            name = text if text in pool.types else text.split(" (", 1)[0]
            if name in pool.types and name not in out:
                out.append(name)
    for text in path.answers:
        name = text if text in pool.types else text.split(" (", 1)[0]
        if name in pool.types and name not in out:
            out.append(name)
    return out


def draw_renaming(names: list[str], pool: EntityPool, text: str, rng: random.Random) -> dict[str, str]:
    """A new name of the same type for each of ``names``: distinct, and none already occurring in ``text`` (so the
    renamed row never mixes a new name with an unrelated entity of that name). A name without a free candidate after
    50 draws keeps its own name."""
    mapping: dict[str, str] = {}
    taken = set(names)
    for name in names:
        candidates = pool.by_type[pool.types[name]]
        for _ in range(50):
            new = rng.choice(candidates)
            if new not in taken and new not in text:
                mapping[name] = new
                taken.add(new)
                break
    return mapping


def rename_text(text: str, mapping: Mapping[str, str], pool: EntityPool) -> str:
    """``text`` with every whole-word occurrence of a ``mapping`` key replaced by its value, in one pass (so a swap
    A→B, B→A works), leaving alone longer names that contain a key."""
    if not mapping:
        return text
    words = set(mapping)
    for name in mapping:
        words.update(pool.containing.get(name, ()))
    # Longest first: at each position the alternation takes the longest name that matches.
    alternation = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    pattern = re.compile(rf"(?<!\w)(?:{alternation})(?!\w)")
    return pattern.sub(lambda m: mapping.get(m.group(0), m.group(0)), text)


def rename_pairs(pairs: list[list[Segment]], mapping: Mapping[str, str], pool: EntityPool) -> list[list[Segment]]:
    """Every segment of ``pairs`` renamed by ``mapping`` (trained flags kept)."""
    return [[replace(s, text=rename_text(s.text, mapping, pool)) for s in pair] for pair in pairs]
