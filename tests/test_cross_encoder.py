"""(slow fixture: a tiny cross-encoder trained here, ~20 CPU-s) ``--reranker cross-encoder:DIR``: the trainer, the
spec, and the second stage of the passage, sparse, graph, hybrid and KAG modes, through the library and the CLIs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cross_encoder_fixtures import SMALL_QUESTIONS, build_tiny_encoder, write_small_data
from effirag.errors import ConfigError
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import EffiRetriever, RetrieverConfig, load_retriever
from effirag.retrieval.rerank import RerankerSpec, parse_reranker
from effirag.retrieval.similarity import CrossEncoderSimilarity
from effirag.types import Passage

pytestmark = pytest.mark.slow

RERANKED_MODES = ["passage", "sparse", "graph", "hybrid"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, small_passages: list[Passage]) -> tuple[Path, dict[str, Any]]:
    """(folder, report) of a 2-layer BERT built from a config and trained by ``train_cross_encoder`` on one question
    per small passage, every other passage a negative."""
    from effirag.train.cross_encoder import CrossEncoderTrainConfig, train_cross_encoder

    root = tmp_path_factory.mktemp("cross-encoder")
    init = build_tiny_encoder(root / "init", small_passages)
    questions, corpus = write_small_data(root / "data", small_passages)
    cfg = CrossEncoderTrainConfig(
        questions=questions, corpus=corpus, output_dir=root / "ce", init=str(init), heldout=0, pool=6, negatives=5,
        max_steps=100, batch_groups=6, learning_rate=3e-3, max_length=32, threads=1,
    )  # fmt: skip
    return root / "ce", train_cross_encoder(cfg)


@pytest.fixture(scope="module")
def reranked(trained: tuple[Path, dict[str, Any]], small_index_dir: Path) -> EffiRetriever:
    return load_retriever(
        small_index_dir, encoder=HashingEncoder(256), reranker=f"cross-encoder:{trained[0]}",
        config=RetrieverConfig(rerank_depth=6),
    ).load()  # fmt: skip


def _text(p: Passage) -> str:
    return f"{p.title}\n{p.text}"


def test_group_loss_worked_example() -> None:
    """One group of logits (0, 0), gold first: CE = −log(e⁰ / (e⁰ + e⁰)) = log 2 = 0.693147; BCE = mean(−log σ(0),
    −log(1 − σ(0))) = log 2; the loss at bce_weight 1 is 2·log 2 = 1.386294, at weight 0 it is log 2."""
    import torch

    from effirag.train.cross_encoder import group_loss

    logits = torch.zeros(1, 2)
    assert float(group_loss(logits, 1.0)) == pytest.approx(1.386294, abs=1e-6)
    assert float(group_loss(logits, 0.0)) == pytest.approx(0.693147, abs=1e-6)


def test_spec_parsing_and_resolution() -> None:
    assert parse_reranker(None) is None and parse_reranker("none") is None and parse_reranker(" NONE ") is None
    assert parse_reranker("") is None
    assert parse_reranker("cross-encoder:ce/dir") == RerankerSpec("cross-encoder", Path("ce/dir"))
    assert parse_reranker("bilinear:b") == RerankerSpec("bilinear", Path("b"))
    assert parse_reranker("checkpoints/demo-reranker") == RerankerSpec("bilinear", Path("checkpoints/demo-reranker"))
    assert str(RerankerSpec("cross-encoder", Path("x"))) == "cross-encoder:x" and str(parse_reranker("b/c")) == "b/c"
    assert parse_reranker("cross-encoder:ce").resolved(Path("ckpt")) == RerankerSpec("cross-encoder", Path("ckpt/ce"))
    with pytest.raises(ConfigError, match="names no folder"):
        parse_reranker("cross-encoder:")


def test_inference_settings_resolve_a_cross_encoder_against_the_checkpoint() -> None:
    from effirag.agent.settings import InferenceSettings

    s = InferenceSettings(reranker="cross-encoder:../ce")
    assert s.reranker_spec(Path("checkpoints/policy")) == RerankerSpec("cross-encoder", Path("checkpoints/ce"))
    with pytest.raises(ConfigError, match="reranker"):
        InferenceSettings(reranker="cross-encoder: ")


def test_trainer_learns_every_gold_passage(trained: tuple[Path, dict[str, Any]], small_passages: list[Passage]) -> None:
    folder, report = trained
    assert report["loss_last_10"] < 0.5 * report["loss_first_10"]
    assert json.loads((folder / "report.json").read_text())["train_groups"] == len(SMALL_QUESTIONS)
    sim = CrossEncoderSimilarity(folder)
    texts = [_text(p) for p in small_passages]
    for _, q, _, gold in SMALL_QUESTIONS:
        scores = sim.score(q, texts)
        best = max(range(len(texts)), key=lambda i: scores[i])
        assert small_passages[best].id == gold, (q, scores)


def test_a_folder_with_several_outputs_is_refused(tmp_path: Path, small_passages: list[Passage]) -> None:
    from transformers import AutoConfig, AutoModelForSequenceClassification

    folder = build_tiny_encoder(tmp_path / "m", small_passages)
    cfg = AutoConfig.from_pretrained(folder)
    cfg.num_labels = 2
    AutoModelForSequenceClassification.from_config(cfg).save_pretrained(folder)
    with pytest.raises(ConfigError, match="2 outputs"):
        CrossEncoderSimilarity(folder).load()


@pytest.mark.parametrize("mode", RERANKED_MODES)
def test_each_mode_reorders_its_top_candidates_by_the_cross_encoder(
    mode: str, reranked: EffiRetriever, small_retriever: EffiRetriever, trained: tuple[Path, dict[str, Any]]
) -> None:
    """Items come in the cross-encoder's order of the mode's own top 6 (its scores as item scores), so every gold
    passage the mode finds is first; paging serves the same reranked list."""
    sim = CrossEncoderSimilarity(trained[0])
    for _, q, _, gold in SMALL_QUESTIONS:
        base = small_retriever.retrieve(q, mode, min(6, small_retriever.max_k)).items
        scores = sim.score(q, [f"{it.title}\n{it.text}" for it in base])
        want = [base[i].id for i in sorted(range(len(base)), key=lambda i: (-scores[i], i))]
        res = reranked.retrieve(q, mode, 3)
        assert [it.id for it in res.items] == want[:3] and "rerank" in res.timings
        assert res.items[0].score == pytest.approx(max(scores), abs=1e-5)
        if gold in [it.id for it in base]:
            assert res.items[0].id == gold
        assert [it.id for it in reranked.retrieve(q, mode, 2, offset=1).items] == want[1:3]


def test_reranking_puts_golds_first_that_the_first_stage_does_not(
    reranked: EffiRetriever, small_retriever: EffiRetriever
) -> None:
    def gold_first(r: EffiRetriever, mode: str) -> int:
        return sum(r.retrieve(q, mode, 1).items[0].id == g for _, q, _, g in SMALL_QUESTIONS)

    before = {m: gold_first(small_retriever, m) for m in RERANKED_MODES}
    after = {m: gold_first(reranked, m) for m in RERANKED_MODES}
    assert all(after[m] >= before[m] for m in RERANKED_MODES) and sum(after.values()) > sum(before.values())
    assert after["passage"] == len(SMALL_QUESTIONS)


def test_kag_mode_scores_chunks_and_triplets_with_the_cross_encoder(
    reranked: EffiRetriever, trained: tuple[Path, dict[str, Any]], small_passages: list[Passage]
) -> None:
    """KAG's rerank stage keeps the chunks the cross-encoder scores highest: the gold chunk of each question is the
    first chunk KAG serves, and its stage timings include the rerank."""
    assert isinstance(reranked.similarity, CrossEncoderSimilarity)
    assert reranked.modes.two_stage().reranker is reranked.similarity
    by_id = {p.id: p for p in small_passages}
    for _, q, _, gold in SMALL_QUESTIONS:
        res = reranked.retrieve(q, "kag", 3, entities=[by_id[gold].title])
        chunks = [it.id for it in res.items if it.kind.value == "chunk"]
        assert chunks and chunks[0] == gold, (q, [it.id for it in res.items])
        assert "rerank" in res.timings


def test_a_bilinear_spec_stays_kag_only(small_index_dir: Path) -> None:
    from effirag.retrieval.bilinear import BilinearSimilarity

    r = load_retriever(small_index_dir, encoder=HashingEncoder(256), reranker="some/bilinear")
    assert isinstance(r.similarity, BilinearSimilarity) and r.reranker is None
    assert load_retriever(small_index_dir, encoder=HashingEncoder(256), reranker="none").reranker is None


# --- the commands --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sparse_index(tmp_path_factory: pytest.TempPathFactory, small_passages: list[Passage]) -> Path:
    """The small passages in a BM25-only index (no encoder needed to open it)."""
    from effirag.retrieval.index import IndexConfig, build_index

    folder = tmp_path_factory.mktemp("sparse-index")
    build_index(small_passages, folder, config=IndexConfig(dense=False), corpus_path="mem")
    return folder


def _bm25_vs_reranked(sparse_index: Path, ce: Path, q: str) -> tuple[list[str], list[str]]:
    plain = load_retriever(sparse_index).retrieve(q, "sparse", 6).items
    scores = CrossEncoderSimilarity(ce).score(q, [f"{it.title}\n{it.text}" for it in plain])
    return [it.id for it in plain], [plain[i].id for i in sorted(range(len(plain)), key=lambda i: (-scores[i], i))]


def test_search_command_takes_the_reranker(sparse_index: Path, trained: tuple[Path, dict[str, Any]]) -> None:
    from typer.testing import CliRunner

    from effirag.cli.main import app

    q = SMALL_QUESTIONS[1][1]  # BM25 ranks Europe's passage (two query words) before Rotterdam's
    plain, want = _bm25_vs_reranked(sparse_index, trained[0], q)
    assert plain != want
    args = ["search", q, "--index", str(sparse_index), "--mode", "sparse", "--k", "3", "--json"]
    out = CliRunner().invoke(app, [*args, "--reranker", f"cross-encoder:{trained[0]}"])
    assert out.exit_code == 0, out.output
    assert [it["id"] for it in json.loads(out.stdout)["items"]] == want[:3]
    out = CliRunner().invoke(app, args)
    assert [it["id"] for it in json.loads(out.stdout)["items"]] == plain[:3]


def test_serve_retrieval_takes_the_reranker(
    sparse_index: Path, trained: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app ``serve retrieval --reranker`` builds answers /retrieve in the reranked order (served in-process)."""
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    import effirag.serve.safety as safety
    from effirag.cli.main import app

    served: list[Any] = []
    monkeypatch.setattr(safety, "run_server", lambda app_, *a, **kw: served.append(app_))
    args = ["serve", "retrieval", "--index", str(sparse_index), "--mode", "sparse"]
    out = CliRunner().invoke(app, [*args, "--reranker", f"cross-encoder:{trained[0]}", "--rerank-depth", "6"])
    assert out.exit_code == 0, out.output
    q = SMALL_QUESTIONS[1][1]  # BM25 ranks Europe's passage (two query words) before Rotterdam's
    _, want = _bm25_vs_reranked(sparse_index, trained[0], q)
    with TestClient(served[0]) as client:
        r = client.post("/retrieve", json={"queries": [q], "topk": 2, "return_scores": True})
    assert r.status_code == 200, r.text
    docs = r.json()["result"][0]
    assert [d["document"]["id"] for d in docs] == want[:2]


def test_eval_retrieval_takes_the_reranker(
    tmp_path: Path, small_passages: list[Passage], trained: tuple[Path, dict[str, Any]]
) -> None:
    """Recall@1 of BM25 on the six questions, then with the cross-encoder over its top 6: every gold first."""
    from typer.testing import CliRunner

    from effirag.cli.main import app

    questions, corpus = write_small_data(tmp_path / "data", small_passages)
    args = ["eval", "retrieval", "-q", str(questions), "-c", str(corpus), "-r", "bm25", "--k", "1", "--json"]
    args += ["--index", str(tmp_path / "idx")]
    plain = CliRunner().invoke(app, args)
    assert plain.exit_code == 0, plain.output
    out = CliRunner().invoke(app, [*args, "--reranker", f"cross-encoder:{trained[0]}", "--rerank-depth", "6"])
    assert out.exit_code == 0, out.output
    assert json.loads(plain.stdout)["recall"]["1"] < 100.0 == json.loads(out.stdout)["recall"]["1"]
