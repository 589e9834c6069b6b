"""Sentence templates of EffiRAG-World passages: paraphrases per fact and filler (distractor) sentences per type.

Placeholders: ``{N}`` the subject's display name, ``{S}`` a subject reference (name, pronoun or "The film"…),
``{P}`` a possessive ("His", "The film's"), ``{O}``/``{O2}`` objects, ``{Y}`` a year, ``{D}`` a date, ``{X}`` another
entity mentioned as noise, ``{A}`` an adjective (``{aA}`` with its article). Filler sentences carry no fact of the
world; each has a noise triplet
template ``(head, relation, tail)`` that the renderer may emit to model irrelevant OpenIE output.
"""

from __future__ import annotations

# --- facts -------------------------------------------------------------------------------------------------------
PERSON_INTRO = (
    "{N} (born {D}) was a {DEM} {OCC}.",
    "{N} was a {DEM} {OCC}, born on {D}.",
    "Born on {D}, {N} was a {DEM} {OCC}.",
    "{N} (born {D}) is remembered as a {DEM} {OCC}.",
)
BORN_IN = ("{S} was born in {O}.", "{S} grew up in {O}, the city of {p} birth.", "{P} birthplace was {O}.")
PARENTS = (
    "{S} was born to {O} and {O2}.",
    "{P} parents were {O} and {O2}.",
    "{S} was the {CHILD} of {O} and {O2}.",
)
STUDIED = ("{S} studied at {O}.", "{S} was educated at {O}.", "{S} graduated from {O}.", "Later, {s} enrolled at {O}.")
CAREER_INTRO = (
    "{N} worked as a {OCC} for most of {p} life.",
    "As a {OCC}, {N} built a long career.",
    "{N} is best known for {p} work as a {OCC}.",
)
MEMBER = ("{S} was a member of the band {O}.", "{S} joined {O} as its {OCC}.", "{S} played with {O} for years.")
DIRECTED_ONE = ("{S} directed {O}.", "{S} directed the film {O}.", "Among {p} films is {O}.")
DIRECTED_TWO = ("{S} directed {O} and {O2}.", "{P} films include {O} and {O2}.")
FOUNDED_ONE = ("{S} founded {O}.", "{S} was the founder of {O}.", "In business, {s} founded {O}.")
DIED = ("{S} died on {D}.", "{S} passed away on {D}.", "{N} died on {D}.")

FILM_INTRO = (
    "{N} is a {Y} {G} film directed by {O}.",
    "{N} is a {G} film released in {Y}. It was directed by {O}.",
    "Directed by {O}, {N} is a {G} film that premiered in {Y}.",
    "{N} is a {G} film by director {O}, released in {Y}.",
)
PRODUCED = ("The film was produced by {O}.", "{O} produced the film.", "Production was handled by {O}.")

COMPANY_INTRO = (
    "{N} is a {G} company founded in {Y} by {O}.",
    "{N} was founded by {O} in {Y}. It operates in the {G} industry.",
    "Founded in {Y} by {O}, {N} is a company in the {G} industry.",
)
HQ = ("The company is headquartered in {O}.", "Its headquarters are in {O}.", "{N} is based in {O}.")

BAND_INTRO = (
    "{N} is a {G} band formed in {O} in {Y}.",
    "{N} are a {G} group from {O}, formed in {Y}.",
    "Formed in {Y} in {O}, {N} is a band that plays {G}.",
)
BAND_MEMBERS_ONE = ("Its members included {O}.", "{O} was a member of the band.")
BAND_MEMBERS_MANY = ("The band's members include {O} and {O2}.", "Its lineup featured {O} and {O2}.")

CITY_INTRO = ("{N} is a city in {O}.", "{N} is a town located in {O}.", "{N} is a city of {O}.")
CITY_FOUNDED = ("It was founded in {Y}.", "The settlement was founded in {Y}.", "{N} was founded in {Y}.")
CITY_CAPITAL = ("{N} is the capital of {O}.", "It serves as the capital of {O}.")

UNI_INTRO = (
    "{N} is a university in {O}.",
    "{N} is a public research university located in {O}.",
    "{N} is a private university in the city of {O}.",
)
UNI_FOUNDED = ("It was founded in {Y}.", "The university was established in {Y}.", "{N} was founded in {Y}.")

COUNTRY_INTRO = (
    "{N} is a country whose capital is {O}.",
    "The capital of {N} is {O}.",
    "{N} is a nation; its capital is {O}.",
)
COUNTRY_INDEP = ("{N} gained independence in {Y}.", "It became independent in {Y}.", "Independence came to {N} in {Y}.")

NOT_CONFUSED = ("Not to be confused with {X}.", "It should not be confused with {X}.")

# --- fillers: (sentence, noise triplet or None) -------------------------------------------------------------------
ADJ = (
    "remarkable",
    "influential",
    "controversial",
    "modest",
    "ambitious",
    "unusual",
    "celebrated",
    "quiet",
    "distinctive",
    "enduring",
    "experimental",
    "popular",
)
Filler = tuple[str, tuple[str, str, str] | None]
#: Person fillers: the "early life" passage draws from the first pool, the "career" passage from the second.
PERSON_FILLERS: tuple[Filler, ...] = (
    ("{S} was known among friends for {aA} sense of humour.", ("{N}", "known for", "sense of humour")),
    ("{S} spent several years travelling abroad as a young adult.", ("{N}", "spent", "several years travelling")),
    ("As a child, {s} was a close friend of {X}.", ("{N}", "friend of", "{X}")),
    ("{S} often spoke of {aA} childhood spent mostly outdoors.", None),
    ("{S} was fond of long walks, music and chess.", ("{N}", "fond of", "chess")),
    ("{P} teachers described {p} early talent as {A}.", ("{N}", "early talent", "{A}")),
    ("{S} learned to read before the age of five.", ("{N}", "learned to read", "age of five")),
    ("Little is known about {p} first years at school.", None),
)
PERSON_CAREER_FILLERS: tuple[Filler, ...] = (
    ("Critics described {p} style as {A}.", ("{N}", "style", "{A}")),
    ("{S} gave many interviews but rarely spoke about {p} private life.", None),
    ("{P} early work attracted little attention.", ("{N}", "early work", "little attention")),
    ("{S} later corresponded regularly with {X}.", ("{N}", "corresponded with", "{X}")),
    ("{S} received several awards during {p} career.", ("{N}", "received", "several awards")),
    ("{P} archives are kept in a private collection.", ("{N}", "archives", "private collection")),
    ("In interviews, {s} credited {X} as an influence.", ("{N}", "influenced by", "{X}")),
    ("Colleagues remembered {p} working habits as {A}.", ("{N}", "working habits", "{A}")),
)
FILM_FILLERS: tuple[Filler, ...] = (
    ("The film received {A} reviews from critics.", ("{N}", "received", "reviews")),
    ("Its score was praised as {A}.", ("{N}", "score", "{A}")),
    ("The story follows a family over one long summer.", ("{N}", "follows", "a family")),
    ("Shooting took place over eleven weeks.", ("{N}", "shooting", "eleven weeks")),
    ("Several scenes were later cut for length.", None),
    ("The film was screened at festivals abroad.", ("{N}", "screened at", "festivals")),
    ("{X} has called it {aA} piece of work.", ("{X}", "called", "{N}")),
    ("The lead role was first offered to {X}.", ("{N}", "lead role offered to", "{X}")),
    ("It was a modest success at the box office.", ("{N}", "was", "modest success")),
    ("A restored version was released decades later.", ("{N}", "restored version", "released")),
)
COMPANY_FILLERS: tuple[Filler, ...] = (
    ("The company grew quickly during its first decade.", ("{N}", "grew", "quickly")),
    ("It employs several thousand people.", ("{N}", "employs", "thousands")),
    ("Its logo was redesigned several times.", None),
    ("{X} served on its board for a few years.", ("{X}", "served on board of", "{N}")),
    ("The firm is known for {aA} corporate culture.", ("{N}", "known for", "corporate culture")),
    ("{X} once criticised its management in public.", ("{X}", "criticised", "{N}")),
    ("Its early products were considered {A}.", ("{N}", "products", "{A}")),
    ("The company went through a difficult restructuring.", ("{N}", "went through", "restructuring")),
)
BAND_FILLERS: tuple[Filler, ...] = (
    ("The band released a string of {A} albums.", ("{N}", "released", "albums")),
    ("Their live shows were described as {A}.", ("{N}", "live shows", "{A}")),
    ("They toured with {X} in their early years.", ("{N}", "toured with", "{X}")),
    ("Their second album sold well.", ("{N}", "second album", "sold well")),
    ("The group went on hiatus several times.", None),
    ("Critics compared their sound to {X}.", ("{N}", "compared to", "{X}")),
    ("Their debut single became a local hit.", ("{N}", "debut single", "local hit")),
)
PLACE_FILLERS: tuple[Filler, ...] = (
    ("It is known for {aA} old town.", ("{N}", "known for", "old town")),
    ("The area has a mild climate.", ("{N}", "has", "mild climate")),
    ("A large market is held there every week.", ("{N}", "market", "every week")),
    ("Its river port was once important for trade.", ("{N}", "river port", "trade")),
    ("Tourism has grown in recent decades.", None),
    ("The writer {X} described it as {A}.", ("{X}", "described", "{N}")),
    ("Its main square hosts a yearly festival.", ("{N}", "hosts", "festival")),
    ("Several bridges cross its river.", ("{N}", "has", "bridges")),
)
UNI_FILLERS: tuple[Filler, ...] = (
    ("It is known for its {A} library.", ("{N}", "known for", "library")),
    ("The campus covers several city blocks.", ("{N}", "campus", "city blocks")),
    ("It enrolls thousands of students each year.", ("{N}", "enrolls", "students")),
    ("{X} once gave a lecture there.", ("{X}", "lectured at", "{N}")),
    ("Its engineering school is highly ranked.", ("{N}", "has", "engineering school")),
    ("The university has {aA} rowing club.", None),
)
COUNTRY_FILLERS: tuple[Filler, ...] = (
    ("The country has {aA} coastline.", ("{N}", "has", "coastline")),
    ("Its economy relies on agriculture and trade.", ("{N}", "economy", "agriculture")),
    ("It has a parliamentary system of government.", ("{N}", "government", "parliamentary system")),
    ("Its national cuisine is considered {A}.", ("{N}", "cuisine", "{A}")),
    ("The country shares several rivers with its neighbours.", None),
    ("{X} wrote a well-known history of it.", ("{X}", "wrote history of", "{N}")),
)
UNI_FILLERS += (
    ("Its alumni association is active worldwide.", ("{N}", "has", "alumni association")),
    ("The main building was designed by {X}.", ("{N}", "designed by", "{X}")),
    ("Admission is considered {A}.", None),
)
GENERIC_FILLERS: tuple[Filler, ...] = (
    ("Little else is recorded about {p} early history.", None),
    ("Several accounts of this period differ in detail.", None),
    ("Further details appear in regional archives.", ("{N}", "details in", "regional archives")),
    ("Contemporary newspapers covered it only briefly.", None),
    ("Historians have offered {A} interpretations of this period.", ("historians", "offered", "interpretations")),
)
