"""Entity tables of a world: every entity, its name, its display name and its facts, plus the passage layout.

The tables are the only state that grows with the world (everything else is streamed). Generation order follows
:data:`~effirag.world.schema.ENTITY_TYPES`; indices are allocated for all types first so relations can point
anywhere, then names and relations are drawn from one ``random.Random`` seeded with ``"{seed}/entities"``.

Passage layout (deterministic, no randomness): entity passages are numbered in entity order; a person's first passage
("early life") states birth, birthplace, nationality, parents, education and occupation, the second ("career")
states occupation again, band, death, and up to two films directed and two companies founded. A band's passage names
its first three members; so ``directed_by``, ``founded_by`` and ``member_of`` facts can have two stating passages.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from effirag.world.config import WorldConfig
from effirag.world.names import NameGen
from effirag.world.plan import WorldPlan
from effirag.world.schema import (
    BAND,
    CITY,
    COMPANY,
    COUNTRY,
    ENTITY_TYPES,
    FILM,
    PASSAGES_PER_ENTITY,
    PERSON,
    RELATIONS_OF,
    UNIVERSITY,
)

MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)  # fmt: skip
FILM_GENRES = ("drama", "comedy", "thriller", "western", "musical", "science fiction", "horror", "documentary")
MUSIC_GENRES = ("rock", "jazz", "folk", "synth-pop", "blues", "punk", "soul", "indie pop")
INDUSTRIES = ("film", "automotive", "shipping", "software", "publishing", "textile", "aviation", "brewing")
OCCUPATIONS = ("architect", "novelist", "physicist", "painter", "politician", "surgeon", "journalist", "chemist")
MUSICIAN_JOBS = ("singer", "guitarist", "drummer", "bassist", "keyboardist")
FOUNDER_JOBS = ("entrepreneur", "businessman", "industrialist")
#: Person relations stated in the second ("career") passage; occupation is stated in both.
CAREER_RELATIONS = frozenset({"member_of", "death_date"})


class Ent:
    """One entity. ``rel`` maps relation name → entity index (entity objects) or literal string (values)."""

    __slots__ = (
        "companies", "display", "female", "films", "id", "idx", "members", "name", "pids", "rel", "type", "year",
    )  # fmt: skip

    def __init__(self, idx: int, etype: str) -> None:
        self.idx = idx
        self.id = f"e{idx}"
        self.type = etype
        self.name = ""
        self.display = ""
        self.female = False
        self.year = 0  # birth / founding / release year, used for consistency and disambiguation
        self.rel: dict[str, int | str] = {}
        self.pids: tuple[str, ...] = ()
        self.films: list[int] = []
        self.companies: list[int] = []
        self.members: list[int] = []


@dataclass
class Tables:
    """All entities (index = position) and the index ranges of each type."""

    ents: list[Ent]
    ranges: dict[str, range]
    plan: WorldPlan

    def of(self, etype: str) -> list[Ent]:
        r = self.ranges[etype]
        return self.ents[r.start : r.stop]

    def obj_display(self, ent: Ent, rel_name: str) -> str:
        """The object of ``ent``'s relation as text: the object entity's display name, or the literal value."""
        v = ent.rel[rel_name]
        return self.ents[v].display if isinstance(v, int) else v

    def fact_passages(self, ent: Ent, rel_name: str) -> tuple[str, ...]:
        """Passage ids stating the fact ``(ent, rel_name)``: the subject's passage first, then a back-mention."""
        if ent.type == PERSON:
            if rel_name == "occupation":
                return ent.pids
            own = ent.pids[1] if rel_name in CAREER_RELATIONS else ent.pids[0]
            if rel_name == "member_of":
                band = self.ents[ent.rel["member_of"]]  # type: ignore[index]
                if ent.idx in band.members[:3]:
                    return (own, band.pids[0])
            return (own,)
        own = ent.pids[0]
        if rel_name == "directed_by":
            director = self.ents[ent.rel["directed_by"]]  # type: ignore[index]
            if ent.idx in director.films[:2]:
                return (own, director.pids[1])
        elif rel_name == "capital":
            return (own, self.ents[ent.rel["capital"]].pids[0])  # type: ignore[index]
        elif rel_name == "founded_by":
            founder = self.ents[ent.rel["founded_by"]]  # type: ignore[index]
            if ent.idx in founder.companies[:2]:
                return (own, founder.pids[1])
        return (own,)

    def facts(self, ent: Ent) -> Iterator[str]:
        """Relation names ``ent`` has a fact for, in schema order."""
        for r in RELATIONS_OF[ent.type]:
            if r.name in ent.rel:
                yield r.name


def _date(rng: random.Random, year: int) -> str:
    return f"{rng.randint(1, 28)} {MONTHS[rng.randrange(12)]} {year}"


class _Namer:
    """Unique-name registry: regenerates on accidental clashes, allows deliberate ones."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def unique(self, make: Callable[[], str]) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("name space exhausted: could not draw a fresh name in 1000 tries")


def build_tables(cfg: WorldConfig, plan: WorldPlan) -> Tables:
    """Draw every entity, name and relation of the world (deterministic given ``cfg.seed``).

    The helpers below draw in a fixed order from one ``random.Random``: places, persons, universities, companies,
    bands, films. Reordering them changes every generated world.
    """
    rng = random.Random(f"{cfg.seed}/entities")
    draw = _Draw(rng, NameGen(rng), _Namer())
    ents: list[Ent] = []
    ranges: dict[str, range] = {}
    for t in ENTITY_TYPES:
        start = len(ents)
        ents.extend(Ent(start + i, t) for i in range(plan.counts[t]))
        ranges[t] = range(start, len(ents))
    tb = Tables(ents, ranges, plan)
    _draw_places(tb, cfg, draw)
    surnames, surname_of = _draw_persons(tb, cfg, draw)
    _draw_organisations(tb, draw, surnames, surname_of)
    _draw_films(tb, cfg, draw)
    _set_displays(tb)
    n = 0
    for e in ents:
        k = PASSAGES_PER_ENTITY[e.type]
        e.pids = tuple(f"w{n + j:07d}" for j in range(k))
        n += k
    return tb


class _Draw:
    """The world's one random stream, its name generator and its unique-name registry, shared by the draw steps."""

    def __init__(self, rng: random.Random, names: NameGen, namer: _Namer) -> None:
        self.rng = rng
        self.names = names
        self.namer = namer
        rnd = rng.random

        def ri(n: int) -> int:  # uniform in [0, n): faster than randrange, bias < 2**-40
            return int(rnd() * n)

        self.ri = ri


def _roles(tb: Tables) -> tuple[list[Ent], list[Ent], list[Ent], list[Ent]]:
    """Persons by role, by index range: directors, founders, musicians, everyone else."""
    persons, plan = tb.of(PERSON), tb.plan
    n_dir, n_found, n_mus = plan.directors, plan.founders, plan.musicians
    return (
        persons[:n_dir],
        persons[n_dir : n_dir + n_found],
        persons[n_dir + n_found : n_dir + n_found + n_mus],
        persons[n_dir + n_found + n_mus :],
    )


def _draw_places(tb: Tables, cfg: WorldConfig, draw: _Draw) -> None:
    """Countries (with capitals) and cities; some cities deliberately share a name across countries."""
    rng, names, namer, ri = draw.rng, draw.names, draw.namer, draw.ri
    countries, cities = tb.of(COUNTRY), tb.of(CITY)
    for c in countries:
        c.name = namer.unique(names.country)
        c.rel["independence_year"] = str(rng.randint(1700, 1990))
    city_countries: dict[str, set[int]] = {}
    for i, city in enumerate(cities):
        country = countries[i] if i < len(countries) else countries[ri(len(countries))]
        city.rel["located_in"] = country.idx
        city.rel["founded_year"] = str(rng.randint(700, 1900))
        if i < len(countries):
            country.rel["capital"] = city.idx
        twin = cities[ri(i)] if i > len(countries) and rng.random() < cfg.collision_share else None
        if twin is not None and country.idx not in city_countries[twin.name]:
            city.name = twin.name  # deliberate collision, disambiguated by country below
        else:
            city.name = namer.unique(names.city)
        city_countries.setdefault(city.name, set()).add(country.idx)


def _draw_persons(tb: Tables, cfg: WorldConfig, draw: _Draw) -> tuple[list[str], dict[int, str]]:
    """Persons: sex, years, families (children drawn at random, parents among the others), names and facts.

    Returns the surname pool and each person's surname, which universities and companies are named after.
    """
    rng, names, namer, ri = draw.rng, draw.names, draw.namer, draw.ri
    persons, cities, unis, bands = tb.of(PERSON), tb.of(CITY), tb.of(UNIVERSITY), tb.of(BAND)
    directors, founders, musicians, others = _roles(tb)
    for p in persons:
        p.female = rng.random() < 0.5
        p.year = rng.randint(1880, 1950)
    child_set = set(rng.sample(range(len(persons)), tb.plan.children))
    parents = [p for j, p in enumerate(persons) if j not in child_set]
    fathers = [p for p in parents if not p.female] or parents
    mothers = [p for p in parents if p.female] or parents
    n_surnames = max(1, round(len(parents) * cfg.surname_pool))
    surnames = [namer.unique(names.surname) for _ in range(n_surnames)]
    surname_of: dict[int, str] = {p.idx: surnames[ri(n_surnames)] for p in parents}
    for j in sorted(child_set):
        child = persons[j]
        father, mother = fathers[ri(len(fathers))], mothers[ri(len(mothers))]
        child.rel["father"], child.rel["mother"] = father.idx, mother.idx
        child.year = max(father.year, mother.year) + rng.randint(20, 38)
        surname_of[child.idx] = surname_of[father.idx]
    for p in persons:
        sn = surname_of[p.idx]
        p.name = namer.unique(partial(names.full_name, p.female, sn))
        p.rel["birth_date"] = _date(rng, p.year)
        city = cities[ri(len(cities))]
        p.rel["born_in"] = city.idx
        p.rel["nationality"] = city.rel["located_in"]
        p.rel["studied_at"] = unis[ri(len(unis))].idx
        if p.year < 1960 and rng.random() < cfg.death_share:
            p.rel["death_date"] = _date(rng, min(2024, p.year + rng.randint(35, 95)))
    for p in directors:
        p.rel["occupation"] = "film director"
    for p in founders:
        p.rel["occupation"] = FOUNDER_JOBS[ri(len(FOUNDER_JOBS))]
    for k, p in enumerate(musicians):
        p.rel["occupation"] = MUSICIAN_JOBS[ri(len(MUSICIAN_JOBS))]
        band = bands[k] if k < len(bands) else bands[ri(len(bands))]
        p.rel["member_of"] = band.idx
        band.members.append(p.idx)
    for p in others:
        p.rel["occupation"] = OCCUPATIONS[ri(len(OCCUPATIONS))]
    return surnames, surname_of


def _draw_organisations(tb: Tables, draw: _Draw, surnames: list[str], surname_of: dict[int, str]) -> None:
    """Universities, companies (each with a founder) and bands (formed after their members were born)."""
    rng, names, namer, ri = draw.rng, draw.names, draw.namer, draw.ri
    cities, unis, companies, bands = tb.of(CITY), tb.of(UNIVERSITY), tb.of(COMPANY), tb.of(BAND)
    founders = _roles(tb)[1]
    for u in unis:
        city = cities[ri(len(cities))]
        u.rel["located_in"] = city.idx
        u.rel["founded_year"] = str(rng.randint(1500, 1990))
        u.name = namer.unique(partial(names.university, city.name, surnames))
    for k, co in enumerate(companies):
        founder = founders[k] if k < len(founders) else founders[ri(len(founders))]
        co.rel["founded_by"] = founder.idx
        founder.companies.append(co.idx)
        co.year = min(2020, founder.year + rng.randint(22, 50))
        co.rel["founded_year"] = str(co.year)
        co.rel["headquartered_in"] = cities[ri(len(cities))].idx
        co.rel["industry"] = INDUSTRIES[ri(len(INDUSTRIES))]
        co.name = namer.unique(partial(names.company, surname_of[founder.idx]))
    for b in bands:
        b.name = namer.unique(names.band)
        b.rel["formed_in"] = cities[ri(len(cities))].idx
        b.year = min(2022, min(tb.ents[m].year for m in b.members) + rng.randint(16, 28))
        b.rel["formed_year"] = str(b.year)
        b.rel["genre"] = MUSIC_GENRES[ri(len(MUSIC_GENRES))]


def _draw_films(tb: Tables, cfg: WorldConfig, draw: _Draw) -> None:
    """Films, each with a director and a producer; some share a title, disambiguated by release year."""
    rng, names, namer, ri = draw.rng, draw.names, draw.namer, draw.ri
    films, companies = tb.of(FILM), tb.of(COMPANY)
    directors = _roles(tb)[0]
    film_years: dict[str, set[int]] = {}
    for k, f in enumerate(films):
        director = directors[k] if k < len(directors) else directors[ri(len(directors))]
        f.rel["directed_by"] = director.idx
        director.films.append(f.idx)
        f.rel["produced_by"] = companies[ri(len(companies))].idx
        f.year = min(2024, director.year + rng.randint(24, 60))
        f.rel["genre"] = FILM_GENRES[ri(len(FILM_GENRES))]
        twin = films[ri(k)] if k > 0 and rng.random() < cfg.collision_share else None
        if twin is not None and f.year not in film_years[twin.name]:
            f.name = twin.name  # deliberate collision, disambiguated by year below
        else:
            f.name = namer.unique(names.film)
        film_years.setdefault(f.name, set()).add(f.year)
        f.rel["release_year"] = str(f.year)


def _set_displays(tb: Tables) -> None:
    """Display name = name, or ``name (qualifier)`` when several entities share the name."""
    by_name: dict[str, list[Ent]] = {}
    for e in tb.ents:
        by_name.setdefault(e.name, []).append(e)
    for e in tb.ents:
        if len(by_name[e.name]) == 1:
            e.display = e.name
        elif e.type == FILM:
            e.display = f"{e.name} ({e.year} film)"
        else:
            e.display = f"{e.name} ({tb.ents[e.rel['located_in']].name})"  # type: ignore[index]
    seen: set[str] = set()
    for e in tb.ents:
        if e.display in seen:
            raise RuntimeError(f"display name {e.display!r} is not unique (entity {e.id})")
        seen.add(e.display)
