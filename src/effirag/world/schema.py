"""The schema of EffiRAG-World: entity types, relations (with their question, phrase and triplet surface forms) and
the relation paths that compositional questions follow.

Every relation is *functional* (one object per subject), so a fact is identified by ``(subject, relation)`` and its id
is ``f"{subject_id}.{relation}"``. A relation's object is either another entity (``object_type`` set) or a literal
value (a year, a date, an occupation, a genre).
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTRY, CITY, UNIVERSITY, COMPANY, BAND, PERSON, FILM = (
    "country",
    "city",
    "university",
    "company",
    "band",
    "person",
    "film",
)
#: Generation order: a type only refers to types generated before it (films last: they need directors, producers).
ENTITY_TYPES: tuple[str, ...] = (COUNTRY, CITY, UNIVERSITY, COMPANY, BAND, PERSON, FILM)
#: Passages per entity of each type (persons get an "early life" and a "career" passage).
PASSAGES_PER_ENTITY: dict[str, int] = {t: 2 if t == PERSON else 1 for t in ENTITY_TYPES}


@dataclass(frozen=True, slots=True)
class Relation:
    """One relation of one subject type.

    ``questions[0]`` is the canonical sub-question (used in decompositions and knowledge.jsonl); the others are
    paraphrases used for top-level 1-hop questions. ``phrase`` nests the relation into a longer question ("the
    director of {s}"); ``sentence`` states the fact in knowledge.jsonl. ``surfaces`` are OpenIE-like triplet relations
    (head = subject); ``inverse`` ones read object → subject. ``cues``: groups of words that must all be hit (one word
    per group) for a question to be read as asking this relation.
    """

    name: str
    subject_type: str
    object_type: str | None
    questions: tuple[str, ...]
    phrase: str
    sentence: str
    surfaces: tuple[str, ...]
    inverse: tuple[str, ...]
    cues: tuple[frozenset[str], ...]


def _cues(*groups: str) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(g.split()) for g in groups)


_WHEN = "when year date day"
_RELATIONS: tuple[Relation, ...] = (
    Relation(
        "capital", COUNTRY, CITY,
        ("What is the capital of {s}?", "Which city is the capital of {s}?", "Name the capital city of {s}."),
        "the capital of {s}", "The capital of {s} is {o}.",
        ("capital", "has capital", "capital city"), ("capital of", "is the capital of"),
        _cues("capital"),
    ),
    Relation(
        "independence_year", COUNTRY, None,
        ("When did {s} gain independence?", "In what year did {s} become independent?"),
        "the year {s} became independent", "{s} gained independence in {o}.",
        ("independence", "gained independence in", "independent since"), (),
        _cues("independence independent"),
    ),
    Relation(
        "located_in", CITY, COUNTRY,
        ("In which country is {s}?", "Which country is {s} located in?", "{s} lies in which country?"),
        "the country where {s} lies", "{s} is a city in {o}.",
        ("located in", "is a city in", "country"), ("contains", "has city"),
        _cues("country located lies situated"),
    ),
    Relation(
        "founded_year", CITY, None,
        ("When was {s} founded?", "In what year was {s} founded?"),
        "the founding year of {s}", "{s} was founded in {o}.",
        ("founded in", "founded", "established in"), (),
        _cues("founded established founding", _WHEN),
    ),
    Relation(
        "located_in", UNIVERSITY, CITY,
        ("In which city is {s} located?", "Where is {s} located?", "Which city is {s} in?"),
        "the city where {s} is located", "{s} is located in {o}.",
        ("located in", "campus in", "city"), ("home to",),
        _cues("city located where"),
    ),
    Relation(
        "founded_year", UNIVERSITY, None,
        ("When was {s} founded?", "In what year was {s} established?"),
        "the founding year of {s}", "{s} was founded in {o}.",
        ("founded in", "established", "year founded"), (),
        _cues("founded established founding", _WHEN),
    ),
    Relation(
        "founded_by", COMPANY, PERSON,
        ("Who founded {s}?", "Who was the founder of {s}?", "Who established the company {s}?"),
        "the founder of {s}", "{s} was founded by {o}.",
        ("founded by", "founder", "was founded by"), ("founded", "is founder of"),
        _cues("who founder founded established"),
    ),
    Relation(
        "founded_year", COMPANY, None,
        ("When was {s} founded?", "In what year was {s} founded?"),
        "the founding year of {s}", "{s} was founded in {o}.",
        ("founded in", "established in", "founding year"), (),
        _cues("founded established founding", _WHEN),
    ),
    Relation(
        "headquartered_in", COMPANY, CITY,
        ("Where is {s} headquartered?", "In which city is {s} based?", "Which city hosts the headquarters of {s}?"),
        "the city where {s} is headquartered", "{s} is headquartered in {o}.",
        ("headquartered in", "headquarters", "based in"), ("hosts headquarters of",),
        _cues("headquartered headquarters based"),
    ),
    Relation(
        "industry", COMPANY, None,
        ("What industry is {s} in?", "In which industry does {s} operate?"),
        "the industry of {s}", "{s} operates in the {o} industry.",
        ("industry", "operates in", "sector"), (),
        _cues("industry sector business"),
    ),
    Relation(
        "formed_in", BAND, CITY,
        ("Where was {s} formed?", "In which city was the band {s} formed?"),
        "the city where {s} was formed", "{s} was formed in {o}.",
        ("formed in", "origin", "from"), ("birthplace of",),
        _cues("formed founded", "where city"),
    ),
    Relation(
        "formed_year", BAND, None,
        ("When was {s} formed?", "In what year was the band {s} formed?"),
        "the year {s} was formed", "{s} was formed in {o}.",
        ("formed in", "years active from", "formed"), (),
        _cues("formed founded", _WHEN),
    ),
    Relation(
        "genre", BAND, None,
        ("What genre of music does {s} play?", "Which musical genre is {s} known for?"),
        "the genre of {s}", "{s} plays {o}.",
        ("genre", "plays", "musical style"), (),
        _cues("genre style music musical"),
    ),
    Relation(
        "birth_date", PERSON, None,
        ("When was {s} born?", "What is the date of birth of {s}?", "On which date was {s} born?"),
        "the birth date of {s}", "{s} was born on {o}.",
        ("born on", "date of birth", "birth date"), (),
        _cues("born birth birthday", _WHEN),
    ),
    Relation(
        "born_in", PERSON, CITY,
        ("Where was {s} born?", "In which city was {s} born?", "What is the birthplace of {s}?"),
        "the birthplace of {s}", "{s} was born in {o}.",
        ("born in", "place of birth", "birthplace"), ("birthplace of",),
        _cues("born birth birthplace"),
    ),
    Relation(
        "nationality", PERSON, COUNTRY,
        ("What is the nationality of {s}?", "Which country was {s} a citizen of?", "What country is {s} from?"),
        "the country of {s}", "{s} was a citizen of {o}.",
        ("nationality", "citizen of", "country of citizenship"), ("home country of",),
        _cues("nationality citizen citizenship country"),
    ),
    Relation(
        "father", PERSON, PERSON,
        ("Who is the father of {s}?", "Who was {s}'s father?"),
        "the father of {s}", "The father of {s} is {o}.",
        ("father", "son of", "child of"), ("father of", "parent of"),
        _cues("father dad"),
    ),
    Relation(
        "mother", PERSON, PERSON,
        ("Who is the mother of {s}?", "Who was {s}'s mother?"),
        "the mother of {s}", "The mother of {s} is {o}.",
        ("mother", "born to", "child of"), ("mother of", "parent of"),
        _cues("mother mom"),
    ),
    Relation(
        "studied_at", PERSON, UNIVERSITY,
        ("Where did {s} study?", "Which university did {s} attend?", "What is the alma mater of {s}?"),
        "the university where {s} studied", "{s} studied at {o}.",
        ("studied at", "educated at", "alma mater"), ("alumnus", "graduated"),
        _cues("study studied attend attended alma educated university college graduate graduated"),
    ),
    Relation(
        "occupation", PERSON, None,
        ("What was the occupation of {s}?", "What did {s} do for a living?", "What was {s}'s profession?"),
        "the occupation of {s}", "{s} worked as a {o}.",
        ("occupation", "worked as", "profession"), (),
        _cues("occupation profession job living career"),
    ),
    Relation(
        "member_of", PERSON, BAND,
        ("Which band was {s} a member of?", "What band did {s} play in?"),
        "the band of {s}", "{s} was a member of {o}.",
        ("member of", "plays in", "band"), ("has member", "members include"),
        _cues("band member group"),
    ),
    Relation(
        "death_date", PERSON, None,
        ("When did {s} die?", "What is the date of death of {s}?"),
        "the death date of {s}", "{s} died on {o}.",
        ("died on", "date of death", "death"), (),
        _cues("die died death"),
    ),
    Relation(
        "directed_by", FILM, PERSON,
        ("Who directed {s}?", "Who was the director of {s}?", "Who is the director of the film {s}?"),
        "the director of {s}", "{s} was directed by {o}.",
        ("directed by", "was directed by", "director"), ("directed", "director of"),
        _cues("directed director direct directs"),
    ),
    Relation(
        "produced_by", FILM, COMPANY,
        ("Which company produced {s}?", "What company was {s} produced by?", "Which studio produced the film {s}?"),
        "the company that produced {s}", "{s} was produced by {o}.",
        ("produced by", "production company", "producer"), ("produced",),
        _cues("produced producer produce production studio"),
    ),
    Relation(
        "release_year", FILM, None,
        ("When was {s} released?", "In what year did {s} come out?", "What year was the film {s} released?"),
        "the release year of {s}", "{s} was released in {o}.",
        ("released in", "release year", "premiered in"), (),
        _cues("released release come came premiered premiere"),
    ),
    Relation(
        "genre", FILM, None,
        ("What genre is {s}?", "Which genre does the film {s} belong to?"),
        "the genre of {s}", "{s} is a {o} film.",
        ("genre", "is a", "film genre"), (),
        _cues("genre kind"),
    ),
)  # fmt: skip

#: (subject type, relation name) → Relation.
RELATIONS: dict[tuple[str, str], Relation] = {(r.subject_type, r.name): r for r in _RELATIONS}
#: Relations of each subject type, in the fixed order facts are listed.
RELATIONS_OF: dict[str, tuple[Relation, ...]] = {
    t: tuple(r for r in _RELATIONS if r.subject_type == t) for t in ENTITY_TYPES
}

#: Relation paths of compositional questions (2 to 4 hops; 1-hop questions ask any single fact), by hop count:
#: (start kind, relations). Every relation on a path is present for every entity of its subject type, except the
#: first one of a "child" / "musician" path (present for exactly those persons), so the number
#: of chains is known from the entity counts before anything is generated.
CHAIN_PATTERNS: dict[int, tuple[tuple[str, tuple[str, ...]], ...]] = {
    2: (
        (FILM, ("directed_by", "born_in")),
        (FILM, ("directed_by", "studied_at")),
        (FILM, ("directed_by", "birth_date")),
        (FILM, ("produced_by", "founded_by")),
        (FILM, ("produced_by", "headquartered_in")),
        (COMPANY, ("founded_by", "born_in")),
        (COMPANY, ("headquartered_in", "located_in")),
        (BAND, ("formed_in", "located_in")),
        (UNIVERSITY, ("located_in", "located_in")),
        (CITY, ("located_in", "capital")),
        (PERSON, ("born_in", "located_in")),
        (PERSON, ("studied_at", "located_in")),
        ("child", ("father", "born_in")),
        ("child", ("mother", "studied_at")),
        ("musician", ("member_of", "formed_in")),
    ),
    3: (
        (FILM, ("directed_by", "born_in", "located_in")),
        (FILM, ("produced_by", "founded_by", "born_in")),
        (FILM, ("directed_by", "studied_at", "located_in")),
        (COMPANY, ("founded_by", "born_in", "located_in")),
        (PERSON, ("born_in", "located_in", "capital")),
        ("child", ("father", "born_in", "located_in")),
        ("child", ("mother", "studied_at", "located_in")),
        ("musician", ("member_of", "formed_in", "located_in")),
    ),
    4: (
        (FILM, ("produced_by", "founded_by", "born_in", "located_in")),
        (FILM, ("directed_by", "studied_at", "located_in", "located_in")),
        (FILM, ("directed_by", "born_in", "located_in", "capital")),
        ("child", ("father", "studied_at", "located_in", "located_in")),
        ("musician", ("member_of", "formed_in", "located_in", "capital")),
    ),
}
_OPTIONAL = frozenset({"father", "mother", "member_of", "death_date"})


def start_type(kind: str) -> str:
    """The entity type of a chain start kind ("child" and "musician" are persons)."""
    return PERSON if kind in ("child", "musician") else kind


def relation(subject_type: str, name: str) -> Relation:
    """The relation ``name`` of ``subject_type``; KeyError names both when the schema has no such relation."""
    try:
        return RELATIONS[(subject_type, name)]
    except KeyError:
        raise KeyError(f"no relation {name!r} for subject type {subject_type!r}") from None


def is_optional(name: str) -> bool:
    """Person relations only some persons have (parents, band membership, death)."""
    return name in _OPTIONAL
