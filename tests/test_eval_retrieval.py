"""Retrieval evaluation: HippoRAG Recall@k and answer recall by hand; the CLI end to end on real MuSiQue (BM25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effirag.cli.main import app
from effirag.eval.retrieval import answer_recall_at_k, evaluate_retrieval, recall_at_k
from effirag.retrieval.base import RetrievalResult
from effirag.types import ItemKind, QAExample, RetrievedItem

runner = CliRunner()


def test_recall_at_k_by_hand() -> None:
    """gold {a, b}; ranking [a, x, b, y]: top-1 holds a → 1/2; top-2 still 1/2; top-3 holds a and b → 2/2.

    A duplicate retrieved id counts once: [a, a] with gold {a, b} → 1/2. Gold {a, b, c}, ranking [c] → 1/3.
    """
    ranking = ["a", "x", "b", "y"]
    assert recall_at_k(ranking, {"a", "b"}, 1) == 0.5
    assert recall_at_k(ranking, {"a", "b"}, 2) == 0.5
    assert recall_at_k(ranking, {"a", "b"}, 3) == 1.0
    assert recall_at_k(["a", "a"], ["a", "b"], 2) == 0.5
    assert recall_at_k(["c"], ["a", "b", "c"], 5) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="without gold"):
        recall_at_k(ranking, [], 2)
    with pytest.raises(ValueError, match="k=0"):
        recall_at_k(ranking, ["a"], 0)


def test_answer_recall_whole_tokens() -> None:
    texts = ["It opened in 1935.", "The Hague is a city."]
    assert answer_recall_at_k(texts, ["35"], 2) == 0.0  # "35" is not a token of "1935"
    assert answer_recall_at_k(texts, ["1935"], 1) == 1.0
    assert answer_recall_at_k(texts, ["the hague"], 1) == 0.0  # only in the second text
    assert answer_recall_at_k(texts, ["Hague"], 2) == 1.0  # articles and case are normalised away


def test_evaluate_retrieval_averages_by_hand() -> None:
    """Two questions, ks = (1, 2).

    q1: gold {p1, p2}, ranking [p1, p9] → R@1 = 1/2, R@2 = 1/2. q2: gold {p3}, ranking [p8, p3] → R@1 = 0, R@2 = 1.
    Means: R@1 = (0.5 + 0)/2 = 25 %, R@2 = (0.5 + 1)/2 = 75 %. Answer "Paris" occurs only in q2's p3 text → answer
    recall@1 = 0 %, @2 = 50 %. Tokens (4 per item): @1 → 4, @2 → 8.
    """
    texts = {"p1": "alpha beta gamma delta", "p9": "x y z w", "p8": "one two three four", "p3": "it is Paris"}
    rankings = {"q1": ["p1", "p9"], "q2": ["p8", "p3"]}

    def search(question: str, k: int) -> RetrievalResult:
        return RetrievalResult(
            [RetrievedItem(ItemKind.CHUNK, i, texts[i], 1.0, tokens=4) for i in rankings[question][:k]]
        )

    exs = [
        QAExample("1", "q1", ("Rome",), supporting_ids=("p1", "p2")),
        QAExample("2", "q2", ("Paris",), supporting_ids=("p3",)),
    ]
    rep = evaluate_retrieval(exs, search, [2, 1], name="scripted")
    assert rep.recall == {"1": 25.0, "2": 75.0}
    assert rep.answer_recall == {"1": 0.0, "2": 50.0}
    assert rep.tokens_per_retrieval == {"1": 4.0, "2": 8.0}
    assert rep.to_dict()["n_questions"] == 2
    with pytest.raises(ValueError, match="no questions"):
        evaluate_retrieval([], search, [1])


@pytest.mark.slow
def test_cli_build_search_eval_bm25_on_musique(shared_data: Path, tmp_path: Path) -> None:
    mus = shared_data / "musique_mini"
    out = tmp_path / "idx"
    r = runner.invoke(app, ["index", "build", "--corpus", str(mus / "corpus.json"), "--out", str(out), "--no-dense"])
    assert r.exit_code == 0, r.output
    assert (out / "manifest.json").is_file()
    r = runner.invoke(app, ["search", "Dutch East India Company", "--index", str(out), "--mode", "sparse", "--json"])
    assert r.exit_code == 0, r.output
    hit = json.loads(r.stdout)["items"][0]
    assert "East India Company" in hit["title"] and hit["tokens"] > 0
    r = runner.invoke(app, ["search", "Dutch East India Company", "--index", str(out), "--k", "0"])
    assert r.exit_code == 2 and "k=0" in r.output
    r = runner.invoke(app, ["search", "x", "--index", str(tmp_path / "none")])
    assert r.exit_code == 2 and "does not exist" in r.output
    args = ["eval", "retrieval", "--questions", str(mus / "questions.json"), "--corpus", str(mus / "corpus.json")]
    r = runner.invoke(app, [*args, "--retriever", "bm25", "--k", "2", "5", "--index", str(out), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["retriever"] == "bm25" and rep["n_questions"] == 70
    assert rep["recall"] == {"2": pytest.approx(44.8, abs=0.1), "5": pytest.approx(52.0, abs=0.1)}
    assert set(rep["answer_recall"]) == set(rep["tokens_per_retrieval"]) == {"2", "5"}


def test_tokenizer_option_counts_with_the_encoders_wordpiece() -> None:
    """'encoder' loads the bundled MiniLM's WordPiece: "Leiden, 1606" → leiden , 160 ##6 (4 pieces, no [CLS]/[SEP]);
    whitespace counts 2 words; a folder without a tokenizer is refused, naming it."""
    import typer

    from effirag.cli.eval import _IndexSource, _load_tokenizer
    from effirag.retrieval.tokens import count_tokens

    src = _IndexSource(Path("c.json"), None, None, "all-MiniLM-L6-v2", "none", 0)
    assert _load_tokenizer("whitespace", src) is None
    assert count_tokens(_load_tokenizer("encoder", src), "Leiden, 1606") == 4
    with pytest.raises(typer.Exit):
        _load_tokenizer("/nonexistent-tokenizer-dir", src)
