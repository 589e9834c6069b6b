"""The plan of a world, computed from its config alone before anything is generated: entity counts per type, role
counts among persons, how many chains of each hop count exist, and how many questions of each kind each split gets.

:func:`make_plan` raises :class:`~effirag.errors.ConfigError` naming the field when the config cannot be honoured
(too few persons for the roles, more questions than chains), so a bad config fails before any file is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from effirag.config import check
from effirag.world.config import HOP_FIELDS, WorldConfig
from effirag.world.schema import (
    BAND,
    CHAIN_PATTERNS,
    CITY,
    COMPANY,
    COUNTRY,
    ENTITY_TYPES,
    FILM,
    PASSAGES_PER_ENTITY,
    PERSON,
    RELATIONS_OF,
    is_optional,
)

#: Question kinds, in the order of the hop-mix fields.
KINDS = ("1", "2", "3", "4", "comparison")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class WorldPlan:
    """Counts derived from a config (deterministic, no randomness)."""

    counts: dict[str, int]  # entity type → number of entities
    directors: int
    founders: int
    musicians: int
    children: int
    chains: dict[str, int]  # question kind → number of distinct chains (or pairs) available
    targets: dict[str, dict[str, int]]  # split → kind → number of questions

    @property
    def n_entities(self) -> int:
        return sum(self.counts.values())

    def start_count(self, kind: str) -> int:
        """Entities a chain pattern can start from ("child" / "musician" are subsets of persons)."""
        if kind == "child":
            return self.children
        if kind == "musician":
            return self.musicians
        return self.counts[kind]


def split_counts(total: int, shares: dict[str, float]) -> dict[str, int]:
    """Largest-remainder rounding of ``total × share`` (ties broken by the order of ``shares``); sums to ``total``."""
    raw = {k: total * v for k, v in shares.items()}
    out = {k: math.floor(x) for k, x in raw.items()}
    rest = total - sum(out.values())
    for k in sorted(raw, key=lambda k: (-(raw[k] - out[k]), list(raw).index(k)))[:rest]:
        out[k] += 1
    return out


def make_plan(cfg: WorldConfig) -> WorldPlan:
    """Entity counts, role counts, chain availability and per-split targets; ConfigError if impossible."""
    counts: dict[str, int] = {}
    used = 0
    for t in ENTITY_TYPES:
        if t == FILM:
            continue
        share = getattr(cfg, f"share_{t}")
        counts[t] = max(2, math.floor(cfg.passages * share / PASSAGES_PER_ENTITY[t]))
        used += counts[t] * PASSAGES_PER_ENTITY[t]
    counts[FILM] = cfg.passages - used
    check(counts[FILM] >= 2, cfg, "share_film", f"leaves {counts[FILM]} passages for films; lower the other shares")
    check(
        counts[CITY] >= counts[COUNTRY],
        cfg,
        "share_city",
        f"{counts[CITY]} cities for {counts[COUNTRY]} countries: every country needs its capital",
    )
    directors = math.ceil(counts[FILM] / cfg.films_per_director)
    founders = math.ceil(counts[COMPANY] / cfg.companies_per_founder)
    musicians = max(counts[BAND], round(counts[BAND] * cfg.members_per_band))
    roles = directors + founders + musicians
    check(
        roles <= counts[PERSON],
        cfg,
        "share_person",
        f"{counts[PERSON]} persons cannot fill {directors} directors + {founders} founders + {musicians} musicians",
    )
    children = math.floor(counts[PERSON] * cfg.child_share)
    check(counts[PERSON] - children >= 4, cfg, "child_share", "leaves fewer than 4 persons to be parents")
    plan_chains: dict[str, int] = {}
    facts = sum(counts[t] * sum(1 for r in RELATIONS_OF[t] if not is_optional(r.name)) for t in ENTITY_TYPES)
    plan_chains["1"] = facts + 2 * children + musicians
    partial = WorldPlan(counts, directors, founders, musicians, children, {}, {})
    for hops in (2, 3, 4):
        plan_chains[str(hops)] = sum(partial.start_count(kind) for kind, _ in CHAIN_PATTERNS[hops])
    pairs = lambda n: n * (n - 1) // 2  # noqa: E731
    # comparison kinds: films (release), persons (birth, nationality), companies (founding)
    plan_chains["comparison"] = pairs(counts[FILM]) + 2 * pairs(counts[PERSON]) + pairs(counts[COMPANY])
    shares = dict(zip(KINDS, (getattr(cfg, f) for f in HOP_FIELDS), strict=True))
    targets = {s: split_counts(getattr(cfg, f"{s}_questions"), shares) for s in SPLITS}
    for kind, field in zip(KINDS, HOP_FIELDS, strict=True):
        wanted = sum(targets[s][kind] for s in SPLITS)
        # a chain serves one question; keep headroom so that split-disjoint sampling cannot run dry
        limit = plan_chains[kind] // 2
        label = "comparison" if kind == "comparison" else f"{kind}-hop"
        check(
            wanted <= limit,
            cfg,
            field,
            f"asks for {wanted} {label} questions over train/dev/test but the world has only "
            f"{plan_chains[kind]} such chains (at most half, {limit}, can be used); "
            f"raise 'passages' or lower the question counts",
        )
    return WorldPlan(counts, directors, founders, musicians, children, plan_chains, targets)
