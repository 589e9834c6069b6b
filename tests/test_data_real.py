"""Loaders on the real files in ../shared/data."""

from __future__ import annotations

from pathlib import Path

from effirag.data import dataset_stats, load_corpus, load_openie, load_questions


def test_musique_counts_and_gold_coverage(shared_data: Path) -> None:
    mus = shared_data / "musique_mini"
    corpus = load_corpus(mus / "corpus.json")
    qs = load_questions(mus / "questions.json", corpus)
    assert qs.layout == "musique"
    assert len(qs.examples) == 70
    assert len(corpus) == 1890
    # every gold supporting passage of every question is in the corpus
    assert qs.missing_gold == []
    for ex in qs.examples:
        assert ex.supporting_ids, ex.id
        for pid in ex.supporting_ids:
            assert pid in corpus.by_id
        # every hop's support is a supporting paragraph, and the last sub-answer is the question's answer
        assert all(d.support_id in ex.supporting_ids for d in ex.decomposition)
        assert ex.hops == len(ex.decomposition)


def test_musique_first_example_fields(shared_data: Path) -> None:
    mus = shared_data / "musique_mini"
    corpus = load_corpus(mus / "corpus.json")
    ex = load_questions(mus / "questions.json", corpus).examples[0]
    assert ex.id == "2hop__150763_14904"
    assert ex.answers == ("G. Stanley Hall", "Stanley Hall")
    assert ex.decomposition[0].answer == "American Psychological Association"
    assert ex.decomposition[1].question == "Who was the first president of #1 ?"
    assert corpus.by_id[ex.decomposition[0].support_id].title  # resolves to a real passage
    assert ex.qtype == "2hop"


def test_musique_openie_counts(shared_data: Path) -> None:
    """17,419 raw triples; 185 are not 3 strings (dropped as HippoRAG does); 30 repeat (source, h, r, t) exactly."""
    mus = shared_data / "musique_mini"
    corpus = load_corpus(mus / "corpus.json")
    oie = load_openie(mus / "openie_gpt-3.5-turbo-1106.json", corpus)
    assert oie.raw == 17419
    assert oie.malformed == 185
    assert oie.duplicates == 30
    assert len(oie.triplets) == 17204
    assert all(t.source_id in corpus.by_id for t in oie.triplets)
    stats = dataset_stats(load_questions(mus / "questions.json", corpus), corpus, oie)
    assert stats["n_questions"] == 70 and stats["n_passages"] == 1890 and stats["n_triplets"] == 17204
    assert stats["hops"] == {"2": 45, "3": 21, "4": 4}
    assert stats["gold_passages"] == {"total": 169, "found": 169}


def test_popqa_answers_and_gold(shared_data: Path) -> None:
    corpus = load_corpus(shared_data / "popqa" / "corpus.json")
    qs = load_questions(shared_data / "popqa" / "questions.json", corpus)
    assert qs.layout == "popqa" and len(qs.examples) == 500 and len(corpus) == 1475
    assert qs.missing_gold == []
    ex = qs.examples[0]
    assert ex.question == "What is George Rankin's occupation?"
    assert ex.answers[0] == "politician" and "political leader" in ex.answers
    assert all(e.hops == 1 for e in qs.examples)


def test_bamboogle_and_2wiki_corpus(shared_data: Path) -> None:
    qs = load_questions(shared_data / "bamboogle" / "bamboogle.jsonl")
    assert qs.layout == "simple" and len(qs.examples) == 125
    assert qs.examples[0].answers == ("james madison",)
    corpus = load_corpus(shared_data / "2wiki_corpus" / "corpus.json")
    assert len(corpus) == 6119
    assert corpus.passages[0].title == "Teutberga"
