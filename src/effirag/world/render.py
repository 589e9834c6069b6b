"""Passages and triplets of one entity: Wikipedia-style text from templates, paraphrases and filler sentences.

Which passage states which fact is fixed by :meth:`~effirag.world.generate.Tables.fact_passages`; this module only
chooses the wording. Each stated fact becomes a triplet with an OpenIE-like surface relation (sometimes inverted)
unless it is dropped as "text only"; noise triplets come from the filler sentences. Randomness comes from one
``random.Random`` seeded with ``"{seed}/render"``, consumed in entity order, so the corpus is deterministic.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from effirag.world import templates as T
from effirag.world.config import WorldConfig
from effirag.world.generate import Ent, Tables
from effirag.world.names import demonym
from effirag.world.schema import BAND, CITY, COMPANY, COUNTRY, FILM, PERSON, RELATIONS, UNIVERSITY

TripletRow = tuple[str, str, str, str]  # head, relation, tail, source passage id
_FILLERS = {
    PERSON: T.PERSON_FILLERS,
    FILM: T.FILM_FILLERS,
    COMPANY: T.COMPANY_FILLERS,
    BAND: T.BAND_FILLERS,
    CITY: T.PLACE_FILLERS,
    UNIVERSITY: T.UNI_FILLERS,
    COUNTRY: T.COUNTRY_FILLERS,
}
_ADJ_A = tuple(("an " if a[0] in "aeiou" else "a ") + a for a in T.ADJ)
_GENERIC = tuple((f, n, "{X}" in f) for f, n in T.GENERIC_FILLERS)
_IT_REFS = {FILM: "The film", COMPANY: "The company", BAND: "The band", CITY: "The city", UNIVERSITY: "The university"}


class _Passage:
    """Sentences of one passage under construction, with the facts they state (for triplets)."""

    __slots__ = ("ctx", "facts", "fillers", "pid", "refs", "rnd", "sentences", "words")

    def __init__(self, pid: str, ctx: dict[str, str], refs: tuple[str, ...], rnd: Callable[[], float]) -> None:
        self.pid, self.ctx, self.refs, self.rnd = pid, ctx, refs, rnd
        self.sentences: list[str] = []
        self.facts: list[tuple[str, str, str, str]] = []  # subject type, relation, head, tail
        self.fillers: list[tuple[tuple[str, str, str], str, str]] = []  # noise template, {A}, {X}
        self.words = 0

    def say(self, sentence: str, **kw: str) -> None:
        """Append ``sentence`` with a fresh subject reference ({S}) and the given placeholders."""
        ctx = self.ctx
        ctx["S"] = self.refs[int(self.rnd() * len(self.refs))]
        if kw:
            ctx.update(kw)
        text = sentence.format_map(ctx)
        self.sentences.append(text)
        self.words += text.count(" ") + 1


class Renderer:
    """Renders entities one at a time; call :meth:`render` in entity order."""

    def __init__(self, tb: Tables, cfg: WorldConfig) -> None:
        self.tb, self.cfg = tb, cfg
        self.rng = random.Random(f"{cfg.seed}/render")
        self.rnd = self.rng.random
        # a few fixed random orders per type; picking one per passage is much cheaper than shuffling each time
        self._orders = {t: self._shuffles(pool) for t, pool in _FILLERS.items()}
        self._orders["career"] = self._shuffles(T.PERSON_CAREER_FILLERS)
        self.p_noise = cfg.noisy_triplet_share / (1.0 - cfg.noisy_triplet_share)
        self.persons = tb.ranges[PERSON]
        self._twins: dict[str, list[int]] = {}
        for e in tb.ents:
            if e.display != e.name:
                self._twins.setdefault(e.name, []).append(e.idx)

    def _shuffles(self, pool: Sequence[T.Filler]) -> list[tuple[tuple[str, tuple[str, str, str] | None, bool], ...]]:
        """32 random orders of a filler pool (then the generic fillers), with a "mentions {X}" flag per sentence."""
        return [
            tuple((f, n, "{X}" in f) for f, n in self.rng.sample(list(pool), len(pool))) + _GENERIC for _ in range(32)
        ]

    # -- helpers --------------------------------------------------------------------------------------------------
    def _new(self, e: Ent, pid: str) -> _Passage:
        """An empty passage about ``e`` with its subject references (name, pronoun, surname, "The film", …)."""
        if e.type == PERSON:
            he = "She" if e.female else "He"
            surname = e.name.rsplit(" ", 1)[-1]
            ctx = {
                "N": e.display,
                "s": he.lower(),
                "P": "Her" if e.female else "His",
                "p": "her" if e.female else "his",
                "CHILD": "daughter" if e.female else "son",
            }
            return _Passage(pid, ctx, (he, he, surname, e.display), self.rnd)
        ctx = {"N": e.display, "s": "it", "P": "Its", "p": "its"}
        return _Passage(pid, ctx, (_IT_REFS.get(e.type, "It"), "It"), self.rnd)

    def _o(self, e: Ent, rel: str) -> str:
        return self.tb.obj_display(e, rel)

    def _fact(self, ps: _Passage, e: Ent, rel: str) -> None:
        ps.facts.append((e.type, rel, e.display, self._o(e, rel)))

    def _pick(self, options: Sequence[str]) -> str:
        return options[int(self.rnd() * len(options))]

    def _noise_entity(self) -> str:
        return self.tb.ents[self.persons[int(self.rnd() * len(self.persons))]].display

    # -- passages per type ------------------------------------------------------------------------------------------
    def render(self, e: Ent) -> tuple[list[tuple[str, str, str]], list[TripletRow]]:
        """``([(pid, title, text)], [(head, relation, tail, pid)])`` for entity ``e``."""
        passages = getattr(self, f"_{e.type}")(e)
        out: list[tuple[str, str, str]] = []
        triplets: list[TripletRow] = []
        for i, ps in enumerate(passages):
            self._fill(ps, "career" if e.type == PERSON and i == 1 else e.type)
            out.append((ps.pid, e.display, " ".join(ps.sentences)))
            self._triplets(ps, triplets)
        return out, triplets

    def _person(self, e: Ent) -> list[_Passage]:
        tb = self.tb
        country = tb.ents[e.rel["nationality"]]  # type: ignore[index]
        occ = str(e.rel["occupation"])
        a = self._new(e, e.pids[0])
        a.say(self._pick(T.PERSON_INTRO), D=str(e.rel["birth_date"]), DEM=demonym(country.display), OCC=occ)
        for rel in ("birth_date", "nationality", "occupation"):
            self._fact(a, e, rel)
        body: list[tuple[str, tuple[str, ...], dict[str, str]]] = [
            (self._pick(T.BORN_IN), ("born_in",), {"O": self._o(e, "born_in")}),
            (self._pick(T.STUDIED), ("studied_at",), {"O": self._o(e, "studied_at")}),
        ]
        if "father" in e.rel:
            body.append(
                (self._pick(T.PARENTS), ("father", "mother"), {"O": self._o(e, "father"), "O2": self._o(e, "mother")})
            )
        k = int(self.rnd() * len(body))  # a random rotation, reversed half of the time
        body = body[k:] + body[:k]
        if self.rnd() < 0.5:
            body.reverse()
        for sentence, rels, kw in body:
            a.say(sentence, **kw)
            for rel in rels:
                self._fact(a, e, rel)
        b = self._new(e, e.pids[1])
        b.say(self._pick(T.CAREER_INTRO), OCC=occ)
        self._fact(b, e, "occupation")
        if "member_of" in e.rel:
            b.say(self._pick(T.MEMBER), O=self._o(e, "member_of"), OCC=occ)
            self._fact(b, e, "member_of")
        films = [tb.ents[f] for f in e.films[:2]]
        if len(films) == 2:
            b.say(self._pick(T.DIRECTED_TWO), O=films[0].display, O2=films[1].display)
        elif films:
            b.say(self._pick(T.DIRECTED_ONE), O=films[0].display)
        for f in films:
            self._fact(b, f, "directed_by")
        for c in e.companies[:2]:
            b.say(self._pick(T.FOUNDED_ONE), O=tb.ents[c].display)
            self._fact(b, tb.ents[c], "founded_by")
        if "death_date" in e.rel:
            b.say(self._pick(T.DIED), D=str(e.rel["death_date"]))
            self._fact(b, e, "death_date")
        return [a, b]

    def _film(self, e: Ent) -> list[_Passage]:
        a = self._new(e, e.pids[0])
        a.say(
            self._pick(T.FILM_INTRO), Y=str(e.rel["release_year"]), G=str(e.rel["genre"]), O=self._o(e, "directed_by")
        )
        for rel in ("release_year", "genre", "directed_by"):
            self._fact(a, e, rel)
        a.say(self._pick(T.PRODUCED), O=self._o(e, "produced_by"))
        self._fact(a, e, "produced_by")
        self._twin_note(a, e)
        return [a]

    def _company(self, e: Ent) -> list[_Passage]:
        a = self._new(e, e.pids[0])
        a.say(
            self._pick(T.COMPANY_INTRO),
            Y=str(e.rel["founded_year"]),
            G=str(e.rel["industry"]),
            O=self._o(e, "founded_by"),
        )
        for rel in ("industry", "founded_year", "founded_by"):
            self._fact(a, e, rel)
        a.say(self._pick(T.HQ), O=self._o(e, "headquartered_in"))
        self._fact(a, e, "headquartered_in")
        return [a]

    def _band(self, e: Ent) -> list[_Passage]:
        a = self._new(e, e.pids[0])
        a.say(self._pick(T.BAND_INTRO), Y=str(e.rel["formed_year"]), G=str(e.rel["genre"]), O=self._o(e, "formed_in"))
        for rel in ("genre", "formed_year", "formed_in"):
            self._fact(a, e, rel)
        members = [self.tb.ents[m] for m in e.members[:3]]
        if len(members) >= 2:
            a.say(self._pick(T.BAND_MEMBERS_MANY), O=", ".join(m.display for m in members[:-1]), O2=members[-1].display)
        else:
            a.say(self._pick(T.BAND_MEMBERS_ONE), O=members[0].display)
        for m in members:
            self._fact(a, m, "member_of")
        return [a]

    def _city(self, e: Ent) -> list[_Passage]:
        a = self._new(e, e.pids[0])
        country = self.tb.ents[e.rel["located_in"]]  # type: ignore[index]
        a.say(self._pick(T.CITY_INTRO), O=country.display)
        self._fact(a, e, "located_in")
        if country.rel.get("capital") == e.idx:
            a.say(self._pick(T.CITY_CAPITAL), O=country.display)
            self._fact(a, country, "capital")
        a.say(self._pick(T.CITY_FOUNDED), Y=str(e.rel["founded_year"]))
        self._fact(a, e, "founded_year")
        self._twin_note(a, e)
        return [a]

    def _university(self, e: Ent) -> list[_Passage]:
        a = self._new(e, e.pids[0])
        a.say(self._pick(T.UNI_INTRO), O=self._o(e, "located_in"))
        a.say(self._pick(T.UNI_FOUNDED), Y=str(e.rel["founded_year"]))
        self._fact(a, e, "located_in")
        self._fact(a, e, "founded_year")
        return [a]

    def _country(self, e: Ent) -> list[_Passage]:
        a = self._new(e, e.pids[0])
        a.say(self._pick(T.COUNTRY_INTRO), O=self._o(e, "capital"))
        a.say(self._pick(T.COUNTRY_INDEP), Y=str(e.rel["independence_year"]))
        self._fact(a, e, "capital")
        self._fact(a, e, "independence_year")
        return [a]

    def _twin_note(self, a: _Passage, e: Ent) -> None:
        """A "not to be confused with" distractor sentence for entities sharing their name."""
        twins = [t for t in self._twins.get(e.name, ()) if t != e.idx]
        if twins:
            a.say(self._pick(T.NOT_CONFUSED), X=self.tb.ents[twins[0]].display)

    # -- fillers and triplets -----------------------------------------------------------------------------------------
    def _fill(self, ps: _Passage, pool: str) -> None:
        """Insert filler sentences of ``pool`` at random positions (after the first) up to a random target length."""
        rnd, cfg = self.rnd, self.cfg
        target = cfg.min_words + int(rnd() * (cfg.max_words - 15 - cfg.min_words))
        orders = self._orders[pool]
        ctx, refs, max_words, sentences, adj = ps.ctx, ps.refs, cfg.max_words, ps.sentences, T.ADJ
        n_refs, n_adj, adj_a = len(refs), len(adj), _ADJ_A
        words = ps.words
        for sentence, noise, has_x in orders[int(rnd() * len(orders))]:
            if words >= target:
                break
            ctx["S"] = refs[int(rnd() * n_refs)]
            k = int(rnd() * n_adj)
            ctx["A"], ctx["aA"] = adj[k], adj_a[k]
            if has_x:
                ctx["X"] = self._noise_entity()
            text = sentence.format_map(ctx)
            n = text.count(" ") + 1
            if words + n > max_words:
                continue
            sentences.insert(1 + int(rnd() * len(sentences)), text)
            words += n
            if noise is not None:  # formatted only if a noise triplet is drawn (see _triplets)
                ps.fillers.append((noise, ctx["A"], ctx.get("X", "")))
        ps.words = words

    def _triplets(self, ps: _Passage, out: list[TripletRow]) -> None:
        rnd, p_noise, pid = self.rnd, self.p_noise, ps.pid
        text_only = self.cfg.text_only_share
        for etype, rel, head, tail in ps.facts:
            if rnd() < text_only:
                continue
            spec = RELATIONS[(etype, rel)]
            if spec.inverse and rnd() < 0.25:
                out.append((tail, spec.inverse[int(rnd() * len(spec.inverse))], head, pid))
            else:
                out.append((head, spec.surfaces[int(rnd() * len(spec.surfaces))], tail, pid))
            if rnd() < p_noise:
                if ps.fillers:  # each filler's noise triplet is used at most once
                    (h, r, t), a, x = ps.fillers.pop(int(rnd() * len(ps.fillers)))
                    ctx = {**ps.ctx, "A": a, "X": x}
                    out.append((h.format_map(ctx), r, t.format_map(ctx), pid))
                else:
                    out.append((head, "is", T.ADJ[int(rnd() * len(T.ADJ))], pid))
