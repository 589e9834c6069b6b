"""Layout detection, the 2Wiki/HotpotQA/FlashRAG layouts, round-trips and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from effirag.data import (
    detect_layout,
    load_corpus,
    load_openie,
    load_questions,
    split_contents,
    write_flashrag_corpus,
    write_flashrag_questions,
    write_hipporag_questions,
    write_openie,
)
from effirag.data.hub import load_hf_questions
from effirag.errors import DataError
from effirag.types import Passage, QAExample, SubQuestion, Triplet

TWOWIKI = {
    "_id": "q1",
    "type": "compositional",
    "question": "Who is the mother of the director of film Polish-Russian War?",
    "context": [
        ["Polish-Russian War (film)", ["Polish-Russian War is a 2009 film ", "directed by Xawery Żuławski."]],
        ["Xawery Żuławski", ["Xawery Żuławski is a director. ", "His mother is Małgorzata Braunek."]],
        ["Other", ["Unrelated."]],
    ],
    "supporting_facts": [["Polish-Russian War (film)", 1], ["Xawery Żuławski", 1]],
    "evidences": [
        ["Polish-Russian War", "director", "Xawery Żuławski"],
        ["Xawery Żuławski", "mother", "Małgorzata Braunek"],
    ],
    "answer": "Małgorzata Braunek",
}
HOTPOT = {
    "_id": "h1",
    "question": "Which magazine was started first?",
    "answer": "Arthur's Magazine",
    "type": "comparison",
    "level": "medium",
    "supporting_facts": [["Arthur's Magazine", 0], ["First for Women", 0]],
    "context": [
        ["Arthur's Magazine", ["Arthur's Magazine was started in 1844."]],
        ["First for Women", ["First for Women was started in 1989."]],
    ],
}


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_detect_layouts() -> None:
    assert detect_layout(TWOWIKI) == "2wiki"
    assert detect_layout(HOTPOT) == "hotpotqa"
    assert detect_layout({"id": 1, "question": "q", "golden_answers": ["a"]}) == "flashrag"
    assert detect_layout({"idx": 1, "question": "q", "answer": "a"}) == "simple"
    with pytest.raises(DataError, match="unknown question layout"):
        detect_layout({"foo": 1}, path="x.json", where="3")


def test_2wiki_layout_matches_corpus_by_title(tmp_path: Path) -> None:
    corpus_file = _write(
        tmp_path / "corpus.json",
        [
            {"title": "Polish-Russian War (film)", "text": "A different rendering of the same article."},
            {"title": "Xawery Żuławski", "text": "Xawery Żuławski is a director."},
        ],
    )
    corpus = load_corpus(corpus_file)
    qs = load_questions(_write(tmp_path / "q.json", [TWOWIKI]), corpus)
    ex = qs.examples[0]
    assert ex.supporting_ids == tuple(p.id for p in corpus.passages)
    assert ex.evidence[1] == Triplet("Xawery Żuławski", "mother", "Małgorzata Braunek")
    assert ex.hops == 2 and ex.qtype == "compositional"


def test_hotpot_layout_without_corpus(tmp_path: Path) -> None:
    qs = load_questions(_write(tmp_path / "h.json", [HOTPOT]))
    assert qs.layout == "hotpotqa" and len(qs.passages) == 2
    assert qs.examples[0].supporting_ids == tuple(p.id for p in qs.passages)


def test_flashrag_round_trip(tmp_path: Path) -> None:
    ps = [
        Passage("d1", "Alpha Film", "Alpha Film was directed by Bo Rin."),
        Passage("d2", "Bo Rin", "Bo Rin was born in Kel."),
    ]
    ex = QAExample(
        "w1",
        "Where was the director of Alpha Film born?",
        ("Kel", "Kel City"),
        hops=2,
        qtype="compositional",
        supporting_ids=("d1", "d2"),
        decomposition=(
            SubQuestion("Who directed Alpha Film?", "Bo Rin", "d1"),
            SubQuestion("Where was Bo Rin born?", "Kel", "d2"),
        ),
        evidence=(Triplet("Alpha Film", "directed by", "Bo Rin", "d1"),),
    )
    write_flashrag_corpus(tmp_path / "corpus.jsonl", ps)
    write_flashrag_questions(tmp_path / "q.jsonl", [ex])
    corpus = load_corpus(tmp_path / "corpus.jsonl")
    assert corpus.passages == ps
    back = load_questions(tmp_path / "q.jsonl", corpus)
    assert back.layout == "flashrag" and back.examples == [ex] and back.missing_gold == []
    # HippoRAG layouts written from the same objects read back too
    write_hipporag_questions(tmp_path / "hq.json", [ex], corpus.by_id)
    hq = load_questions(tmp_path / "hq.json", corpus)
    assert hq.layout == "musique" and hq.examples[0].supporting_ids == ("d1", "d2")
    assert hq.examples[0].decomposition == ex.decomposition
    write_openie(tmp_path / "openie.json", ps, list(ex.evidence))
    oie = load_openie(tmp_path / "openie.json", corpus)
    assert oie.triplets == [Triplet("Alpha Film", "directed by", "Bo Rin", "d1")]


def test_split_contents_variants() -> None:
    assert split_contents('"Alpha"\nText here') == ("Alpha", "Text here")
    assert split_contents("Alpha\nText here") == ("Alpha", "Text here")
    assert split_contents("no title") == ("", "no title")


def test_title_map_corpus(tmp_path: Path) -> None:
    c = load_corpus(_write(tmp_path / "c.json", {"Alpha": ["One.", "Two."], "Beta": "Three."}))
    assert [(p.title, p.text) for p in c] == [("Alpha", "One. Two."), ("Beta", "Three.")]


def test_malformed_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_text('{"id": "1", "question": "q", "golden_answers": ["a"]}\n{"id": 2, "question": \n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_questions(f)
    assert str(f) in str(e.value) and "line 2" in str(e.value)
    qs = load_questions(f, skip_invalid=True)
    assert len(qs.examples) == 1 and len(qs.skipped) == 1


def test_missing_field_names_record_and_field(tmp_path: Path) -> None:
    f = _write(
        tmp_path / "q.json",
        [{"id": "a", "question": "q", "golden_answers": ["x"]}, {"id": "b", "golden_answers": ["y"]}],
    )
    with pytest.raises(DataError) as e:
        load_questions(f)
    msg = str(e.value)
    assert str(f) in msg and "record 1" in msg and "'question'" in msg
    assert len(load_questions(f, skip_invalid=True).examples) == 1


def test_unknown_layout_and_bad_corpus(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="unknown question layout"):
        load_questions(_write(tmp_path / "q.json", [{"what": 1}]))
    with pytest.raises(DataError, match="unknown passage layout"):
        load_corpus(_write(tmp_path / "c.json", [{"body": "x"}]))
    with pytest.raises(DataError, match="file not found"):
        load_corpus(tmp_path / "absent.json")


def test_openie_unknown_passage_is_an_error(tmp_path: Path) -> None:
    corpus = load_corpus(_write(tmp_path / "c.json", [{"title": "A", "text": "a"}]))
    f = _write(tmp_path / "o.json", {"docs": [{"passage": "B\nb", "extracted_entities": [], "extracted_triples": []}]})
    with pytest.raises(DataError, match="passage not found in the corpus"):
        load_openie(f, corpus)


def test_hf_loader_offline_gives_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError) as e:
        load_hf_questions("nq", "test")
    msg = str(e.value)
    assert "RUC-NLPIR/FlashRAG_datasets" in msg and "'nq'" in msg and "\n" not in msg
