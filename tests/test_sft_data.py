"""SFT data construction (TeaRAG §4.3.1): gold paths from MuSiQue, trajectories for every protocol, waste knob."""

from __future__ import annotations

import random
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from demo_policy.config import WritingConfig
from demo_policy.writing import make_transform

from effirag.errors import DataError
from effirag.train.gold_paths import (
    GoldHop,
    GoldPath,
    build_path,
    contains_answer,
    key_entities,
    musique_paths,
    resolve_refs,
)
from effirag.train.masking import InsertedSpan, split_inserted
from effirag.train.sft_data import AGENT_PROTOCOLS, SFTDataBuilder, SFTDataConfig
from effirag.train.trajectories import BASELINES, make_plan, replay
from effirag.types import Passage, QAExample, SubQuestion, Triplet

MUS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "musique_mini"
INSERTED = [InsertedSpan(o, c) for o, c in [("<Reference>", "</Reference>"), ("<information>", "</information>"),
                                            ("<context>", "</context>"), ("<documents>", "</documents>")]]  # fmt: skip


def words(text: str) -> int:
    return len(text.split())


WRITING = {f.name for f in fields(WritingConfig)}


def builder(passages: Any, triplets: Any, count: Any, **cfg: Any) -> SFTDataBuilder:
    """A builder of ``SFTDataConfig(**cfg)``, where the keys that are the demo recipe's writing switches
    (``WritingConfig``: hop_aware_summary, comparison_pairs, max_completions, ...) go to the recipe's render options
    and per-example rewrite, as recipes/demo_policy/mixture.py passes them."""
    writing = WritingConfig(**{k: v for k, v in cfg.items() if k in WRITING})
    data = SFTDataConfig(**{k: v for k, v in cfg.items() if k not in WRITING})
    transform = make_transform(writing, None)
    return SFTDataBuilder(passages, triplets, count, data, render_options=writing.render_options(), transform=transform)


@pytest.fixture(scope="module")
def musique():  # type: ignore[no-untyped-def]
    if not MUS.is_dir():
        pytest.skip("shared MuSiQue data not found")
    return musique_paths(MUS / "questions.json", MUS / "corpus.json", MUS / "openie_gpt-3.5-turbo-1106.json")


def test_resolve_refs() -> None:
    assert resolve_refs("Who was the first president of #1 ?", ["APA"]) == "Who was the first president of APA ?"
    assert resolve_refs("When did #2 meet #1?", ["A", "B"]) == "When did B meet A?"
    with pytest.raises(DataError, match="#2"):
        resolve_refs("Who is #2?", ["A"])


def test_contains_answer_and_key_entities() -> None:
    t1 = Triplet("Journal X", "published by", "American Psychological Association")
    t2 = Triplet("G. Stanley Hall", "first president of", "the American Psychological Association")
    t3 = Triplet("Journal X", "established in", "1991")
    assert contains_answer(t1, "American Psychological Association")
    assert contains_answer(t2, "american psychological association")  # normalised: case, article
    assert not contains_answer(t3, "American Psychological Association")
    assert key_entities([t1, t2], "American Psychological Association") == ("Journal X", "G. Stanley Hall")
    # with the sub-question: only the sides it names
    q = "Who was the first president of the association that published Journal X?"
    assert key_entities([t1, t2], "American Psychological Association", q) == ("Journal X",)
    assert key_entities([t1, t2], "American Psychological Association", "Who founded it?") == ()
    # the answer side is the one equal to the answer, even when the other side contains it ("Wuvia")
    t4 = Triplet("University of Wuvia", "located in", "Wuvia")
    assert key_entities([t4], "Wuvia", "In which city is University of Wuvia located?") == ("University of Wuvia",)
    t5 = Triplet("University of Wuvia", "established", "1671")  # contains the answer, names no other entity
    assert key_entities([t5], "Wuvia", "In which city is University of Wuvia located?") == ()


def test_hop_entities_fall_back_to_the_page_the_question_names() -> None:
    """OpenIE found no triplet holding the sub-answer: the hop is about its supporting page's subject when the
    sub-question names it (EffiRAG-World: "Where was Brouvo Lousoner born?", no born-in triplet)."""
    page = Passage("w1", "Brouvo Lousoner", "Brouvo Lousoner (born 1899) ... His birthplace was New Tel.")
    ex = QAExample("q1", "Where was Brouvo Lousoner born?", ("New Tel",),
                   decomposition=(SubQuestion("Where was Brouvo Lousoner born?", "New Tel", "w1"),))  # fmt: skip
    (hop,) = build_path(ex, {"w1": page}, {}).hops
    assert hop.entities == ("Brouvo Lousoner",) and hop.triplets == ()


def test_musique_gold_path_by_hand(musique) -> None:  # type: ignore[no-untyped-def]
    """2hop__150763_14904: hop 2's "#1" is replaced by hop 1's answer; supporting triplets are the OpenIE triplets
    of the supporting paragraph that contain the sub-answer, the one naming the sub-question's entity first."""
    paths, _, _ = musique
    p = paths[0]
    assert p.id == "2hop__150763_14904" and p.answer == "G. Stanley Hall"
    h1, h2 = p.hops
    assert h1.question == "What company published Journal of Psychotherapy Integration?"
    assert h1.answer == "American Psychological Association"
    assert h1.passage is not None and h1.passage.title == "Journal of Psychotherapy Integration"
    assert (
        h1.triplets[0].text
        == "(Journal of Psychotherapy Integration, published by, American Psychological Association)"
    )
    # only the sides the sub-question names: the passage's other triplets (Society for the Exploration of …,
    # Adolescence) are not what the hop asks about
    assert h1.entities == ("Journal of Psychotherapy Integration",)
    assert h2.question == "Who was the first president of American Psychological Association ?"
    assert h2.triplets[0].text == "(G. Stanley Hall, first president of, American Psychological Association)"
    assert h2.entities == ("American Psychological Association",)
    assert all(contains_answer(t, h2.answer) for t in h2.triplets)
    assert not h1.known and not h2.known


EXPECTED_TEARAG = [
    "<entities> Journal of Psychotherapy Integration </entities>\n"
    "<subquery> What company published Journal of Psychotherapy Integration? </subquery>",
    "<summary> The fact (Journal of Psychotherapy Integration, published by, American Psychological Association) "
    "implies the answer: American Psychological Association. </summary>\n"
    "<entities> American Psychological Association </entities>\n"
    "<subquery> Who was the first president of American Psychological Association ? </subquery>",
    "<summary> The reference gives (G. Stanley Hall, first president of, American Psychological Association), so "
    "the answer is G. Stanley Hall. </summary>\nFinal answer: G. Stanley Hall",
]


def test_musique_tearag_trajectory_equals_hand_written(musique) -> None:  # type: ignore[no-untyped-def]
    """No random distractor pool (only the other hop's passage), no waste, seed 0: the trained turns are exactly
    EXPECTED_TEARAG; each masked <Reference> holds its hop's gold triplet; the prompt is TeaRAG's own."""
    paths, _, _ = musique
    b = SFTDataBuilder([], [], words, SFTDataConfig(protocols=("tearag",), redundant_step_rate=0.0))
    ex = b.build_one(paths[0], b.protocols["tearag"], random.Random(0))
    assert ex is not None and len(ex.pairs) == 1
    segs = ex.pairs[0]
    assert [s.text for s in segs if s.trained] == EXPECTED_TEARAG
    assert [s.trained for s in segs] == [False, True, False, True, False, True]
    assert segs[0].text == b.protocols["tearag"].build_prompt(paths[0].question)
    assert segs[2].text.startswith("\n<Reference>\n") and segs[2].text.endswith("</Reference>\n")
    assert "(Journal of Psychotherapy Integration, published by, American Psychological Association)" in segs[2].text
    assert "(G. Stanley Hall, first president of, American Psychological Association)" in segs[4].text


@pytest.mark.parametrize("protocol", AGENT_PROTOCOLS + BASELINES[1:])
def test_every_protocol_builds_parsable_masked_trajectories(musique, protocol: str) -> None:  # type: ignore[no-untyped-def]
    """Every turn replays through the protocol's parser (replay raises otherwise); no trained segment holds an
    inserted span, and every inserted span is in a masked segment."""
    paths, passages, triplets = musique
    cfg = SFTDataConfig(protocols=(protocol,), redundant_step_rate=0.5, seed=1)
    builder = SFTDataBuilder(passages[:200], triplets[:2000], words, cfg)
    examples = builder.build(paths[:6])
    assert len(examples) >= 6
    for ex in examples:
        for pair in ex.pairs:
            assert not pair[0].trained
            for seg in pair:
                if seg.trained:
                    assert [s.trained for s in split_inserted(seg.text, INSERTED)] == [True], seg.text
            assert any(s.trained for s in pair)


def _known_path() -> GoldPath:
    p1 = Passage("a", "Mira Talvenor", "Mira Talvenor was born in Oskar. She studied law.")
    p2 = Passage("b", "Oskar", "Oskar is a town located in Veltrania.")
    hops = (
        GoldHop("Where was Mira Talvenor born?", "Oskar", p1, (Triplet("Mira Talvenor", "born in", "Oskar", "a"),),
                ("Mira Talvenor",), known=True, known_text="Mira Talvenor was born in Oskar."),
        GoldHop("In which country is Oskar?", "Veltrania", p2, (Triplet("Oskar", "country", "Veltrania", "b"),),
                ("Oskar",)),
    )  # fmt: skip
    return GoldPath("k1", "In which country was Mira Talvenor born?", ("Veltrania",), hops)


def test_known_facts_are_answered_without_search() -> None:
    path = _known_path()
    b = SFTDataBuilder([], [], words, SFTDataConfig(redundant_step_rate=0.0))
    hip = b.build_one(path, b.protocols["hiprag"], random.Random(0))
    assert hip is not None
    text = "".join(s.text for s in hip.pairs[0] if s.trained)
    assert text.count("<search>") == 1  # only the unknown hop is searched
    assert "<conclusion> Mira Talvenor was born in Oskar. </conclusion>" in text  # a non-search step
    sr1 = b.build_one(path, b.protocols["searchr1"], random.Random(0))
    assert sr1 is not None
    turns = [s.text for s in sr1.pairs[0] if s.trained]
    assert turns[0].startswith("<think> I already know that Mira Talvenor was born in Oskar.")
    assert "<search> In which country is Oskar? </search>" in turns[0]


def test_redundant_step_rate_adds_waste() -> None:
    """rate 0 → plans are exactly one move per hop; rate 1 → every plan has one extra or converted search."""
    path = _known_path()
    rng = random.Random(0)
    plans0 = [make_plan(path, rng, 0.0, "searchr1") for _ in range(20)]
    assert all(w == "" and [m.kind for m in moves] == ["known", "search"] for moves, w in plans0)
    plans1 = [make_plan(path, rng, 1.0, "searchr1") for _ in range(40)]
    assert {w for _, w in plans1} == {"repeat", "known_search"}
    for moves, _ in plans1:
        n_search = sum(m.kind == "search" for m in moves)
        assert n_search == 2  # repeat: known + 2 searches of hop 2; known_search: both hops searched


def test_zeroshot_only_for_fully_known_paths() -> None:
    b = SFTDataBuilder([], [], words, SFTDataConfig(protocols=("zeroshot",)))
    assert b.build_one(_known_path(), b.protocols["zeroshot"], random.Random(0)) is None


def test_replay_rejects_a_turn_the_parser_refuses() -> None:
    from effirag.agent.protocols import get_protocol

    with pytest.raises(ValueError, match="does not parse"):
        replay(get_protocol("searchr1"), "Q?", [("<think> x </think> no action", None)])


def test_build_path_needs_a_decomposition() -> None:
    ex = QAExample("q", "Q?", ("a",))
    with pytest.raises(DataError, match="decomposition"):
        build_path(ex, {}, {})
    bad = QAExample("q", "Q?", ("a",), decomposition=(SubQuestion("Who?", "a", "missing"),))
    with pytest.raises(DataError, match="support"):
        build_path(bad, {}, {})


def test_evidence_shown_needs_the_fact_not_just_the_answer_name() -> None:
    """A hop's evidence is shown when the observation holds a gold triplet or the gold passage's answer sentence.
    A distractor that merely names the answer (the capital's country passage when the hop asks where a town lies)
    does not count: SFT must never summarise an answer the observation does not state."""
    from effirag.train.sft_data import evidence_shown

    town = Passage("w1", "Beida", "Beida is a town located in Cekou. It was founded in 1680.")
    trip = Triplet("Beida", "located in", "Cekou", "w1")
    hop = GoldHop("In which country is Beida?", "Cekou", town, (trip,), ("Beida",))
    distractor = "Doc 1 (Title: Cekou) Cekou is a nation; its capital is Stuia."
    assert not evidence_shown(hop, distractor)
    assert evidence_shown(hop, distractor + "\nDoc 2 (Title: Beida) Beida is a town located in Cekou. It was")
    assert evidence_shown(hop, f"Doc 1 (Triplet) {trip.text}")
    no_trip = GoldHop("In which country is Beida?", "Cekou", town, (), ("Beida",))
    assert not evidence_shown(no_trip, distractor)
    bare = GoldHop("In which country is Beida?", "Cekou", None, (), ("Beida",))
    assert evidence_shown(bare, distractor) and not evidence_shown(bare, "Doc 1 nothing here")


def test_max_completions_keeps_the_first_step_without_eos() -> None:
    """max_completions=1 keeps the prompt and the first completion of each trajectory, nothing after; the same
    seed draws the same trajectories, so the kept step is the whole trajectory's first. By hand for TeaRAG on the
    two-hop path: prompt (masked), then '<entities> Mira Talvenor </entities>…' or the known hop's answer; no
    <Reference>, and tokenize_examples trains no EOS after it (the trajectory does not end there)."""
    from effirag.train.sft_data import tokenize_examples

    path = _known_path()
    cfg = {"protocols": ("tearag", "searchr1"), "redundant_step_rate": 0.0, "single_hop_rate": 0.0, "seed": 3}
    full = builder([], [], words, **cfg).build([path])  # type: ignore[arg-type]
    cut = builder([], [], words, **cfg, max_completions=1).build([path])  # type: ignore[arg-type]
    assert [e.id for e in cut] == [e.id for e in full]
    for f, c in zip(full, cut, strict=True):
        assert f.complete
        assert len(c.pairs) == 1
        assert [s.trained for s in c.pairs[0]] == [False, True]
        first = next(s for s in f.pairs[0] if s.trained)
        assert c.pairs[0] == f.pairs[0][:2] and c.pairs[0][1] == first
        assert c.complete is (sum(len(p) for p in f.pairs) == 2)  # complete only when nothing was cut

    class Tok:  # one id per word; EOS = 0
        eos_token_id = 0

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [len(w) for w in text.split()]

    tearag_full, tearag_cut = full[0], cut[0]
    assert tearag_full.protocol == "tearag" and not tearag_cut.complete
    assert tokenize_examples([tearag_full], Tok(), 10_000)[0]["labels"][-1] == 0  # EOS trained at the end
    row = tokenize_examples([tearag_cut], Tok(), 10_000)[0]
    assert row["labels"][-1] != 0 and len(row["input_ids"]) == sum(len(s.text.split()) for s in tearag_cut.pairs[0])


def test_max_completions_is_validated() -> None:
    with pytest.raises(ValueError, match="max_completions"):
        WritingConfig(max_completions=-1)


def test_hop_aware_summary_writes_out_the_next_hop_or_the_stop() -> None:
    """Both hops of the Mira Talvenor path unknown, so TeaRAG searches twice. With ``hop_aware_summary`` the first
    summary ends with one of SUMMARY_NEXT filled with hop 2's sub-question ("… In which country is Oskar?"), the
    last with one of SUMMARY_LAST, just before "</summary>"; without it, neither phrase appears."""
    from effirag.train.trajectories import SUMMARY_LAST, SUMMARY_NEXT

    known = _known_path()
    path = replace(known, hops=(replace(known.hops[0], known=False, known_text=""), known.hops[1]))
    on = builder([], [], words, protocols=("tearag",), redundant_step_rate=0.0,
                                                     hop_aware_summary=True)  # fmt: skip
    off = builder([], [], words, protocols=("tearag",), redundant_step_rate=0.0)
    turns_on = [s.text for s in on.build_one(path, on.protocols["tearag"], random.Random(0)).pairs[0] if s.trained]  # type: ignore[union-attr]
    turns_off = [s.text for s in off.build_one(path, off.protocols["tearag"], random.Random(0)).pairs[0] if s.trained]  # type: ignore[union-attr]
    assert len(turns_on) == 3 and len(turns_off) == 3  # search hop 1, summary + search hop 2, summary + answer
    nexts = [t.format(q="In which country is Oskar?") for t in SUMMARY_NEXT]
    first, last = turns_on[1].split(" </summary>")[0], turns_on[2].split(" </summary>")[0]
    assert any(first.endswith(n) for n in nexts), first
    assert any(last.endswith(e) for e in SUMMARY_LAST), last
    assert turns_on[2].endswith("Final answer: Veltrania")
    for t in turns_off:
        assert not any(n in t for n in nexts) and not any(e in t for e in SUMMARY_LAST)
    assert turns_on[0] == turns_off[0]  # the first step has no summary


def test_known_notes_write_a_known_hop_into_the_summary_before_it() -> None:
    """Hop 1 unknown (searched), hop 2 known ("Oskar is a town located in Veltrania."). Without ``known_notes`` TeaRAG
    searches hop 1, summarises it and answers "Veltrania" with the recall unwritten; with it, the summary ends
    "I already know that Oskar is a town located in Veltrania." right before </summary>, and the turn still ends with
    "Final answer: Veltrania". The search turn is the same either way (no summary before the first search)."""
    known = _known_path()
    path = replace(
        known,
        hops=(
            replace(known.hops[0], known=False, known_text=""),
            replace(known.hops[1], known=True, known_text="Oskar is a town located in Veltrania."),
        ),
    )
    cfg = {"protocols": ("tearag",), "redundant_step_rate": 0.0}
    on = builder([], [], words, **cfg, known_notes=True)  # type: ignore[arg-type]
    off = builder([], [], words, **cfg)  # type: ignore[arg-type]
    turns_on = [s.text for s in on.build_one(path, on.protocols["tearag"], random.Random(0)).pairs[0] if s.trained]  # type: ignore[union-attr]
    turns_off = [s.text for s in off.build_one(path, off.protocols["tearag"], random.Random(0)).pairs[0] if s.trained]  # type: ignore[union-attr]
    assert len(turns_on) == 2 and len(turns_off) == 2  # one search, then summary + answer
    assert turns_on[0] == turns_off[0]
    note = "I already know that Oskar is a town located in Veltrania."
    assert turns_on[1].split(" </summary>")[0].endswith(note), turns_on[1]
    assert turns_on[1].endswith("Final answer: Veltrania") and turns_off[1].endswith("Final answer: Veltrania")
    assert "I already know" not in turns_off[1]
    # the rest of the summary is the same draw: the note only appends
    assert turns_on[1].replace(" " + note, "") == turns_off[1]


def test_evidence_first_quotes_the_sentence_before_the_answer() -> None:
    """A hop with no triplet, so every summary quotes the passage sentence "Oskar is a town located in Veltrania.".
    Over 40 draws the default templates put the answer first at least once ("The reference states that Veltrania
    answers it: …", one of three templates: P(never in 40) = (2/3)^40 ≈ 1e-7, and the seeds are fixed);
    with ``evidence_first`` the first "Veltrania" is always the one inside the quoted sentence, and the answer is
    named again after it. Same count of templates, so each seed draws the same template index either way."""
    from effirag.train.trajectories import SUMMARY_TEXT, SUMMARY_TEXT_EVIDENCE_FIRST, evidence

    p2 = Passage("b", "Oskar", "Oskar is a town located in Veltrania.")
    hop = GoldHop("In which country is Oskar?", "Veltrania", p2, (), ("Oskar",))
    sentence = "Oskar is a town located in Veltrania."
    assert len(SUMMARY_TEXT) == len(SUMMARY_TEXT_EVIDENCE_FIRST)
    plain = [evidence(hop, random.Random(seed)) for seed in range(40)]
    first = [evidence(hop, random.Random(seed), evidence_first=True) for seed in range(40)]
    assert any(s.find("Veltrania") < s.find(sentence) for s in plain)
    for s in first:
        assert s.find("Veltrania") > s.find(sentence) >= 0, s
        assert s.rfind("Veltrania") > s.find(sentence) + len(sentence), s
    # draws agree: where the plain draw used one of the shared templates, the text is the same
    assert sum(a == b for a, b in zip(plain, first, strict=True)) == sum(
        not a.startswith("The reference states that Veltrania") for a in plain
    )


def test_gold_triplet_rate_shows_the_passage_instead_of_the_triplet() -> None:
    """Hop 2 of the Mira Talvenor path (gold passage "b", gold triplet (Oskar, country, Veltrania)), graph mode, no
    distractor pool. At the default rate 1 every draw shows the gold triplet, and the passage about half the time.
    At rate 0 no draw shows the triplet and every draw shows the passage, so the TeaRAG summary must quote the
    passage's sentence. Passage modes ignore the knob. Rate 1 makes no extra draw: the items of 30 seeds are the
    same as with the knob left out, so data built without it is unchanged."""
    from effirag.train.context_sim import ContextSimulator, SimConfig

    path = _known_path()
    hop = path.hops[1]
    triplet = hop.triplets[0].text

    def draws(rate: float | None, mode: str) -> list[list[str]]:
        cfg = SimConfig(k=3) if rate is None else SimConfig(k=3, gold_triplet_rate=rate)
        sim = ContextSimulator([], [], cfg)
        return [[it.text for it in sim.items(path, [hop], mode, random.Random(s))] for s in range(30)]

    on = draws(1.0, "kag")
    assert all(triplet in d for d in on)
    assert 0 < sum(hop.passage.text in d for d in on) < 30  # type: ignore[union-attr]
    assert on == draws(None, "kag")
    off = draws(0.0, "kag")
    assert all(triplet not in d and hop.passage.text in d for d in off)  # type: ignore[union-attr]
    assert draws(0.0, "passage") == draws(1.0, "passage")
    b = builder([], [], words, protocols=("tearag",), redundant_step_rate=0.0,
                                                    single_hop_rate=0.0, gold_triplet_rate=0.0)  # fmt: skip
    turns = [s.text for s in b.build_one(path, b.protocols["tearag"], random.Random(0)).pairs[0] if s.trained]  # type: ignore[union-attr]
    assert "Oskar is a town located in Veltrania." in turns[-1] and triplet not in turns[-1]
    with pytest.raises(ValueError, match="gold_triplet_rate"):
        SFTDataConfig(gold_triplet_rate=1.5)


def test_search_known_searches_every_hop_for_the_listed_protocols() -> None:
    """The Mira Talvenor path: hop 1 ("Where was Mira Talvenor born?" → Oskar) is known, hop 2 is not. By default
    TeaRAG skips hop 1: one turn with <subquery> "In which country is Oskar?" (Oskar recalled silently), then the
    answer. With ``search_known=("tearag",)`` TeaRAG searches both hops in order: the first subquery is hop 1's, the
    second hop 2's, then the answer "Veltrania" (3 trained turns). Search-R1 is not listed, so it still writes the
    recall ("I already know that …") and searches once. Plans without waste: [search, search] against [known, search].
    An unknown protocol name is refused, naming the field."""
    path = _known_path()
    assert [m.kind for m in make_plan(path, random.Random(0), 0.0, "tearag", search_known=True)[0]] == [
        "search",
        "search",
    ]
    assert [m.kind for m in make_plan(path, random.Random(0), 0.0, "tearag")[0]] == ["known", "search"]
    cfg = {"protocols": ("tearag", "searchr1"), "redundant_step_rate": 0.0}
    on = builder([], [], words, **cfg, search_known=("tearag",))  # type: ignore[arg-type]
    off = builder([], [], words, **cfg)  # type: ignore[arg-type]

    def turns(b: SFTDataBuilder, protocol: str) -> list[str]:
        ex = b.build_one(path, b.protocols[protocol], random.Random(0))
        assert ex is not None
        return [s.text for s in ex.pairs[0] if s.trained]

    t_on, t_off = turns(on, "tearag"), turns(off, "tearag")
    assert len(t_off) == 2 and "<subquery> In which country is Oskar? </subquery>" in t_off[0]
    assert len(t_on) == 3
    assert "<subquery> Where was Mira Talvenor born? </subquery>" in t_on[0]
    assert "<subquery> In which country is Oskar? </subquery>" in t_on[1]
    assert t_on[2].endswith("Final answer: Veltrania")
    assert turns(on, "searchr1") == turns(off, "searchr1")
    assert turns(on, "searchr1")[0].startswith("<think> I already know that Mira Talvenor was born in Oskar.")
    with pytest.raises(ValueError, match="search_known"):
        SFTDataConfig(search_known=("nosuch",))


def _ada_or_bo() -> GoldPath:
    """ "Who was born first, Ada Vell or Bo Rinn?": Ada Vell → 3 May 1901, Bo Rinn → 9 June 1880, answer Bo Rinn; each
    hop with its passage, its triplet and its entity."""
    pa = Passage("a", "Ada Vell", "Ada Vell was born on 3 May 1901.")
    pb = Passage("b", "Bo Rinn", "Bo Rinn was born on 9 June 1880.")
    hops = (
        GoldHop("When was Ada Vell born?", "3 May 1901", pa, (Triplet("Ada Vell", "birth date", "3 May 1901", "a"),),
                ("Ada Vell",)),
        GoldHop("When was Bo Rinn born?", "9 June 1880", pb, (Triplet("Bo Rinn", "birth date", "9 June 1880", "b"),),
                ("Bo Rinn",)),
    )  # fmt: skip
    return GoldPath("c1", "Who was born first, Ada Vell or Bo Rinn?", ("Bo Rinn",), hops, "comparison")


def _tearag_trained(b: SFTDataBuilder, p: GoldPath) -> list[str]:
    """The trained texts of ``p``'s TeaRAG trajectory built by ``b`` (draws from seed 0)."""
    ex = b.build_one(p, b.protocols["tearag"], random.Random(0))
    assert ex is not None
    return [s.text for s in ex.pairs[0] if s.trained]


def test_comparison_reason_writes_both_answers_into_the_last_summary() -> None:
    """The question "Who was born first, Ada Vell or Bo Rinn?": hop 1 "When was Ada Vell born?" → 3 May 1901, hop 2
    "When was Bo Rinn born?" → 9 June 1880, answer Bo Rinn. With ``hop_aware_summary`` alone TeaRAG's last summary
    ends with a stop note (one of SUMMARY_LAST); with ``comparison_reason`` too it ends "The two answers are 3 May 1901
    and 9 June 1880, so the answer is Bo Rinn." and the turn still ends "Final answer: Bo Rinn". The first summary (a
    hop is left) names the next sub-question either way. A compositional path is unchanged by the knob."""
    from effirag.train.trajectories import SUMMARY_LAST

    path = _ada_or_bo()
    cfg = {"protocols": ("tearag",), "redundant_step_rate": 0.0, "hop_aware_summary": True}
    on = builder([], [], words, **cfg, comparison_reason=True)  # type: ignore[arg-type]
    off = builder([], [], words, **cfg)  # type: ignore[arg-type]

    turns = _tearag_trained
    t_on, t_off = turns(on, path), turns(off, path)
    assert len(t_on) == len(t_off) == 3
    assert t_on[1] == t_off[1] and "When was Bo Rinn born?" in t_on[1].split("</summary>")[0]
    reason = "The two answers are 3 May 1901 and 9 June 1880, so the answer is Bo Rinn."
    assert t_on[2].split(" </summary>")[0].endswith(reason), t_on[2]
    assert any(t_off[2].split(" </summary>")[0].endswith(note) for note in SUMMARY_LAST), t_off[2]
    assert t_on[2].endswith("Final answer: Bo Rinn") and t_off[2].endswith("Final answer: Bo Rinn")
    compositional = replace(path, qtype="compositional")
    assert turns(on, compositional) == turns(off, compositional)


def test_comparison_pairs_name_each_entity_beside_its_answer() -> None:
    """The question "Who was born first, Ada Vell or Bo Rinn?" (hops: Ada Vell → 3 May 1901, Bo Rinn → 9 June 1880,
    answer Bo Rinn). With ``comparison_pairs`` TeaRAG's last summary holds "Ada Vell: 3 May 1901; Bo Rinn: 9 June
    1880. So the answer is Bo Rinn." and still ends with a stop note (hop_aware_summary), then "Final answer: Bo Rinn".
    The first summary is the same as without the knob; a compositional path, and a comparison whose hop names no
    entity, are unchanged."""
    from effirag.train.trajectories import SUMMARY_LAST

    path = _ada_or_bo()
    hops = path.hops
    cfg = {"protocols": ("tearag",), "redundant_step_rate": 0.0, "hop_aware_summary": True}
    on = builder([], [], words, **cfg, comparison_pairs=True)  # type: ignore[arg-type]
    off = builder([], [], words, **cfg)  # type: ignore[arg-type]

    turns = _tearag_trained
    t_on, t_off = turns(on, path), turns(off, path)
    assert len(t_on) == len(t_off) == 3
    assert t_on[1] == t_off[1]
    last = t_on[2].split(" </summary>")[0]
    assert "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn." in last, t_on[2]
    assert any(last.endswith(note) for note in SUMMARY_LAST), t_on[2]
    pairs = " Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. So the answer is Bo Rinn."
    assert last.replace(pairs, "") == t_off[2].split(" </summary>")[0]
    assert t_on[2].endswith("Final answer: Bo Rinn")
    assert turns(on, replace(path, qtype="compositional")) == turns(off, replace(path, qtype="compositional"))
    nameless = replace(path, hops=(replace(hops[0], entities=()), hops[1]))
    assert turns(on, nameless) == turns(off, nameless)


def test_qtype_weights_multiply_the_copies_of_one_question_type() -> None:
    """Two 2-hop paths, a comparison and a compositional one, one TeaRAG copy each by default (single_hop_rate 0: no
    split-off hops). With ``qtype_weights={"comparison": 3.0}`` the comparison gets 1.0 × 3.0 = 3 copies (ids ~0, ~1,
    ~2) and the compositional path still 1; 2.5 gives 2 copies plus a third with probability 0.5. A negative factor
    is refused, naming the field."""
    pa = Passage("a", "Ada Vell", "Ada Vell was born on 3 May 1901.")
    pb = Passage("b", "Bo Rinn", "Bo Rinn was born on 9 June 1880.")
    hops = (
        GoldHop("When was Ada Vell born?", "3 May 1901", pa, (Triplet("Ada Vell", "birth date", "3 May 1901", "a"),),
                ("Ada Vell",)),
        GoldHop("When was Bo Rinn born?", "9 June 1880", pb, (Triplet("Bo Rinn", "birth date", "9 June 1880", "b"),),
                ("Bo Rinn",)),
    )  # fmt: skip
    cmp_path = GoldPath("c1", "Who was born first, Ada Vell or Bo Rinn?", ("Bo Rinn",), hops, "comparison")
    comp_path = replace(cmp_path, id="p1", qtype="compositional")
    cfg = {"protocols": ("tearag",), "redundant_step_rate": 0.0, "single_hop_rate": 0.0}

    def ids(**extra: object) -> list[str]:
        b = SFTDataBuilder([pa, pb], [], words, SFTDataConfig(**cfg, **extra))  # type: ignore[arg-type]
        return [e.id for e in b.build([cmp_path, comp_path])]

    assert ids() == ["c1/tearag", "p1/tearag"]
    assert ids(qtype_weights={"comparison": 3.0}) == ["c1/tearag~0", "c1/tearag~1", "c1/tearag~2", "p1/tearag"]
    n = [sum(i.startswith("c1/") for i in ids(qtype_weights={"comparison": 2.5}, seed=s)) for s in range(20)]
    assert set(n) == {2, 3}
    with pytest.raises(ValueError, match="qtype_weights"):
        SFTDataConfig(qtype_weights={"comparison": -1.0})


def test_final_completion_only_trains_the_last_step_and_keeps_the_rest_as_context() -> None:
    """By hand: TeaRAG on the two-hop path with both hops unknown searches twice, so its one pair is [prompt (masked),
    step 1 (trained), reference 1 (masked), summary 1 + step 2 (trained), reference 2 (masked), last summary + final
    answer (trained)]. Final-only keeps the same six texts, trained only at the sixth: [F, F, F, F, F, T]. A
    ReasonRAG example (several pairs) keeps only its last pair; an example that trains nothing is an error."""
    from demo_policy.writing import final_completion_only

    from effirag.train.masking import Segment
    from effirag.train.sft_data import SFTExample

    known = _known_path()
    path = replace(known, hops=tuple(replace(h, known=False, known_text="") for h in known.hops))
    cfg = SFTDataConfig(protocols=("tearag",), redundant_step_rate=0.0, single_hop_rate=0.0, seed=0)
    full = SFTDataBuilder([], [], words, cfg).build([path])[0]
    assert [s.trained for s in full.pairs[0]] == [False, True, False, True, False, True]
    cut = final_completion_only(full)
    assert [s.text for s in cut.pairs[0]] == [s.text for s in full.pairs[0]]
    assert [s.trained for s in cut.pairs[0]] == [False, False, False, False, False, True]
    assert "Final answer:" in cut.pairs[0][-1].text and cut.complete

    multi = SFTExample("x", "reasonrag", [[Segment("p1", False), Segment("a", True)], [Segment("p2", False),
                       Segment("b", True), Segment("c", False)]])  # fmt: skip
    assert final_completion_only(multi).pairs == [[Segment("p2", False), Segment("b", True), Segment("c", False)]]
    with pytest.raises(ValueError, match="'none' trains no segment"):
        final_completion_only(SFTExample("none", "tearag", [[Segment("p", False)]]))


def test_comparison_decision_writes_the_word_before_the_name() -> None:
    """``comparison_decision`` (with ``comparison_pairs``): TeaRAG's last summary of "Who was born first, Ada Vell or
    Bo Rinn?" holds "Ada Vell: 3 May 1901; Bo Rinn: 9 June 1880. The earlier is the second. So the answer is Bo
    Rinn." where the plain pairs line has "… 1880. So the answer is Bo Rinn."; everything else is the same text, and
    the final answer is "Bo Rinn". Without ``comparison_pairs`` the knob is refused, naming the field."""
    from effirag.errors import ConfigError

    path = _ada_or_bo()
    cfg = {"protocols": ("tearag",), "redundant_step_rate": 0.0, "hop_aware_summary": True, "comparison_pairs": True}
    decide = builder([], [], words, **cfg, comparison_decision=True)  # type: ignore[arg-type]
    plain = builder([], [], words, **cfg)  # type: ignore[arg-type]

    t_dec, t_plain = _tearag_trained(decide, path), _tearag_trained(plain, path)
    assert "1880. The earlier is the second. So the answer is Bo Rinn." in t_dec[2]
    assert t_dec[2].replace(" The earlier is the second.", "") == t_plain[2]
    assert t_dec[:2] == t_plain[:2] and t_dec[2].endswith("Final answer: Bo Rinn")
    with pytest.raises(ConfigError, match="comparison_decision"):
        WritingConfig(comparison_decision=True)


def test_qtype_weights_can_name_a_hop_count() -> None:
    """``qtype_weights`` {compositional: 1.5, "3-hop compositional": 2.0}: a 3-hop compositional path gets 1.5 x 2.0
    = 3.0, a 2-hop compositional one 1.5 (its 'N-hop' key is absent), a 3-hop comparison (no key) 1.0, and a 1-hop
    'single-hop' split-off 1.0; "2-hop comparison": 0.5 alone halves only two-hop comparisons."""
    from effirag.train.sft_data import qtype_factor

    hop = GoldHop("q?", "a", None, (), ("E",))

    def path(n: int, qtype: str) -> GoldPath:
        return GoldPath("p", "q?", ("a",), (hop,) * n, qtype)

    w = {"compositional": 1.5, "3-hop compositional": 2.0}
    assert qtype_factor(w, path(3, "compositional")) == 3.0
    assert qtype_factor(w, path(2, "compositional")) == 1.5
    assert qtype_factor(w, path(3, "comparison")) == 1.0
    assert qtype_factor(w, path(1, "single-hop")) == 1.0
    assert qtype_factor({"2-hop comparison": 0.5}, path(2, "comparison")) == 0.5
    assert qtype_factor({"2-hop comparison": 0.5}, path(3, "comparison")) == 1.0
