"""Plausible invented names from syllables: people, places, countries, films, companies, bands, universities.

No name lists are copied: words are built from onset/vowel/coda syllables with type-specific endings, and titles
combine them with a small hand-written vocabulary. Every method draws from the caller's ``random.Random`` only, so
names are deterministic given the generator's state. Names contain letters and spaces only (no apostrophes or
digits), so that question text can be matched back to entity names after normalisation.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

_ONSETS = (
    "b",
    "br",
    "c",
    "d",
    "dr",
    "f",
    "g",
    "gr",
    "h",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "sh",
    "t",
    "th",
    "tr",
    "v",
    "w",
    "z",
    "st",
    "kl",
    "sv",
)
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ia", "ei", "ou", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "nd", "rt", "st", "v", "th", "k")
_FEMALE_END = ("a", "ina", "ela", "ine", "ara", "issa", "wen", "ette", "ia")
_MALE_END = ("an", "o", "ric", "en", "us", "ard", "im", "el", "or")
_SURNAME_END = ("son", "berg", "ley", "ov", "ardi", "mont", "wick", "ez", "sen", "ton", "ski", "ard", "holt", "ner")
_CITY_END = ("ford", "holm", "grad", "ville", "port", "ton", "mere", "burg", "dale", "haven", "sk", "ora", "ia", "")
_CITY_PREFIX = ("New", "Port", "San", "East", "Upper", "Old", "Lake", "Fort")
_COUNTRY_END = ("ia", "land", "stan", "ora", "ania", "esia", "onia", "ary")
_ADJECTIVES = (
    "Silent",
    "Crimson",
    "Broken",
    "Hidden",
    "Golden",
    "Last",
    "Distant",
    "Quiet",
    "Burning",
    "Frozen",
    "Little",
    "Endless",
    "Bitter",
    "Wild",
    "Pale",
    "Iron",
    "Hollow",
    "Forgotten",
    "Northern",
    "Secret",
    "Velvet",
    "Restless",
    "Lonely",
    "Electric",
    "Scarlet",
    "Midnight",
    "Wandering",
    "Shattered",
    "Gentle",
    "Savage",
)
_NOUNS = (
    "Harbor",
    "River",
    "Garden",
    "Horizon",
    "Lantern",
    "Empire",
    "Season",
    "Orchard",
    "Shadow",
    "Voyage",
    "Mirror",
    "Winter",
    "Citadel",
    "Station",
    "Frontier",
    "Promise",
    "Letter",
    "Tide",
    "Storm",
    "Bridge",
    "Island",
    "Crown",
    "Machine",
    "Chorus",
    "Meadow",
    "Signal",
    "Canyon",
    "Archive",
    "Carnival",
    "Compass",
)
_PLURALS = (
    "Wolves",
    "Lanterns",
    "Pilots",
    "Rivers",
    "Engines",
    "Sparrows",
    "Ghosts",
    "Tigers",
    "Anchors",
    "Comets",
    "Owls",
    "Saints",
    "Strangers",
    "Echoes",
    "Giants",
)
_COMPANY_END = (
    "Pictures",
    "Studios",
    "Industries",
    "Systems",
    "Holdings",
    "Motors",
    "Media",
    "Films",
    "Works",
    "Group",
    "Entertainment",
    "Labs",
)
_OF = ("of", "of the", "beyond", "under", "across")


class NameGen:
    """Name generator over one ``random.Random``."""

    _choice: Callable[[Sequence[str]], str]

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        rnd = rng.random
        # random() * len is several times faster than rng.choice (no rejection sampling); the bias is < 2**-40
        self._choice = lambda seq: seq[int(rnd() * len(seq))]

    def root(self, syllables: int | None = None) -> str:
        """An invented word of 1–3 syllables, capitalised (e.g. ``Thaelmor``)."""
        c = self._choice
        n = syllables or (2 if self.rng.random() < 0.7 else 3)
        word = "".join(c(_ONSETS) + c(_VOWELS) for _ in range(n - 1)) + c(_ONSETS) + c(_VOWELS) + c(_CODAS)
        return word.capitalize()

    def first_name(self, female: bool) -> str:
        stem = self._choice(_ONSETS) + self._choice(_VOWELS) + self._choice(("l", "r", "n", "v", "s", "d", "m"))
        return (stem + self._choice(_FEMALE_END if female else _MALE_END)).capitalize()

    def full_name(self, female: bool, surname: str) -> str:
        return f"{self.first_name(female)} {surname}"

    def surname(self) -> str:
        return self.root(2 if self.rng.random() < 0.6 else 1) + self._choice(_SURNAME_END)

    def city(self) -> str:
        name = self.root(2 if self.rng.random() < 0.5 else 1) + self._choice(_CITY_END)
        if len(name) < 4 or self.rng.random() < 0.12:
            return f"{self._choice(_CITY_PREFIX)} {name.capitalize()}"
        return name.capitalize()

    def country(self) -> str:
        name = self.root(2) + self._choice(_COUNTRY_END)
        return name.capitalize()

    def film(self) -> str:
        r = self.rng.random()
        c = self._choice
        if r < 0.3:
            return f"The {c(_ADJECTIVES)} {c(_NOUNS)}"
        if r < 0.55:
            return f"{c(_NOUNS)} {c(_OF)} {self.root()}"
        if r < 0.75:
            return f"{c(_ADJECTIVES)} {c(_NOUNS)} {c(_OF)} {self.root()}"
        if r < 0.9:
            return f"{self.root()} {c(_NOUNS)}"
        return f"The {c(_NOUNS)} {c(_OF)} {c(_ADJECTIVES)} {c(_NOUNS)}"

    def company(self, surname: str) -> str:
        base = surname if self.rng.random() < 0.35 else self.root()
        return f"{base} {self._choice(_COMPANY_END)}"

    def band(self) -> str:
        r = self.rng.random()
        if r < 0.5:
            return f"The {self._choice(_ADJECTIVES)} {self._choice(_PLURALS)}"
        if r < 0.8:
            return f"{self.root()} {self._choice(_PLURALS)}"
        return f"The {self.root()} {self._choice(_PLURALS)}"

    def university(self, city: str, surnames: Sequence[str]) -> str:
        """A university name: after its city, after a surname drawn from ``surnames``, or invented."""
        r = self.rng.random()
        surname = self._choice(surnames)
        if r < 0.35:
            return f"University of {city}"
        if r < 0.55:
            return f"{city} State University"
        if r < 0.8:
            return f"{surname} College"
        return f"{self.root()} Institute of Technology"


def demonym(country: str) -> str:
    """Adjective of a country name, always containing it (``Velora`` → ``Veloran``, ``Tarnland`` → ``Tarnlandic``)."""
    if country.endswith("land"):
        return country + "ic"
    if country.endswith("stan"):
        return country + "i"
    if country.endswith("a"):
        return country + "n"
    if country.endswith("y"):
        return country + "an"
    return country + "ian"
