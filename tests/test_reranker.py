"""Training the KAG's bilinear reranker: its loss by hand, a fit that learns what cosine cannot, candidate lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from effirag.errors import ConfigError
from effirag.retrieval.bilinear import BilinearParams
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import load_retriever
from effirag.retrieval.index import build_index
from effirag.train.gold_paths import GoldHop
from effirag.train.reranker import (
    RerankerConfig,
    RerankGroup,
    build_groups,
    fit_bilinear,
    relevance_loss,
    top1_accuracy,
)
from effirag.types import Passage, Triplet


def test_relevance_loss_by_hand() -> None:
    """Scores (0, 0), labels (1, 0): each BCE term is log 2, so the pointwise mean is log 2 = 0.6931; the listwise
    target is (1, 0) and softmax(0, 0) = (½, ½), so −log ½ = 0.6931. Total 2·log 2 = 1.3863.

    A third, padded candidate with score 5 (mask 0) changes nothing. Scores (2, −2): BCE = (log(1 + e^−2) +
    log(1 + e^−2)) / 2 = 0.1269, listwise = log(1 + e^−4) = 0.0181; total 0.1450.
    """
    s = torch.tensor([[0.0, 0.0, 5.0], [2.0, -2.0, 0.0]])
    y = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    assert float(relevance_loss(s[:1], y[:1], m[:1])) == pytest.approx(1.3863, abs=1e-4)
    assert float(relevance_loss(s[1:], y[1:], m[1:])) == pytest.approx(0.1450, abs=1e-4)
    assert float(relevance_loss(s, y, m)) == pytest.approx((1.3863 + 0.1450) / 2, abs=1e-4)


def _groups(n: int, rng: np.random.Generator, u: np.ndarray, v: np.ndarray) -> list[RerankGroup]:
    """Lists of 4 candidates about one random entity e: the query is e + u_k (how a question asks relation k), the
    candidates e + v_j (how a triplet states relation j), the gold one j = k. u and v are unrelated directions, so
    cosine cannot tell the candidates apart; a bilinear W can learn u_k → v_k."""
    out = []
    for _ in range(n):
        e = rng.normal(size=u.shape[1])
        k = int(rng.integers(len(u)))
        q = e + 2.0 * u[k]
        x = np.stack([e + 2.0 * v[j] for j in range(len(v))])
        q, x = q / np.linalg.norm(q), x / np.linalg.norm(x, axis=1, keepdims=True)
        out.append(RerankGroup("triplet", q.astype(np.float32), x.astype(np.float32), np.eye(len(v))[k]))
    return out


def test_fit_learns_the_relation_that_cosine_misses() -> None:
    rng = np.random.default_rng(0)
    dim = 16
    u, v = rng.normal(size=(4, dim)), rng.normal(size=(4, dim))
    train, held_out = _groups(400, rng, u, v), _groups(200, rng, u, v)
    config = RerankerConfig(epochs=30, batch_size=32, learning_rate=3e-2, init_scale=1.0)
    params, losses = fit_bilinear(train, "synthetic", config)
    cosine = top1_accuracy(held_out, BilinearParams.identity(dim, "synthetic"))["triplet"]
    trained = top1_accuracy(held_out, params)["triplet"]
    assert losses[-1] < 0.5 * losses[0]
    assert cosine < 0.6 and trained > 0.95, (cosine, trained)
    assert np.isnan(top1_accuracy(held_out, params)["chunk"])


def test_config_names_the_bad_value() -> None:
    with pytest.raises(ConfigError, match="eval_split"):
        RerankerConfig(eval_split="validation")
    with pytest.raises(ConfigError, match="epochs"):
        RerankerConfig(epochs=0)


def test_build_groups_labels_the_gold_passage_and_triplet(tmp_path: Path) -> None:
    passages = [
        Passage("p0", "Amsterdam", "Amsterdam is the capital of the Netherlands."),
        Passage("p1", "Dutch East India Company", "The company was founded in 1602 in Amsterdam."),
        Passage("p2", "Rembrandt", "Rembrandt painted The Night Watch in Amsterdam."),
    ]
    gold = Triplet("Dutch East India Company", "founded in", "1602", "p1")
    triplets = [
        Triplet("Amsterdam", "capital of", "Netherlands", "p0"),
        gold,
        Triplet("Dutch East India Company", "based in", "Amsterdam", "p1"),
        Triplet("Rembrandt", "painted", "The Night Watch", "p2"),
    ]
    build_index(passages, tmp_path, encoder=HashingEncoder(64), triplets=triplets, corpus_path="mem")
    retriever = load_retriever(tmp_path, encoder=HashingEncoder(64)).load()
    hop = GoldHop("When was the Dutch East India Company founded?", "1602", passages[1], (gold,),
                  ("Dutch East India Company",))  # fmt: skip
    no_gold = GoldHop("Who painted it?", "x", None, (), ("Rembrandt",))
    groups, dropped = build_groups(retriever, [hop, no_gold], 3)
    assert dropped == 2  # the second hop has neither a gold passage nor a gold triplet
    kinds = {g.kind: g for g in groups}
    assert set(kinds) == {"triplet", "chunk"}
    kg = retriever.index.kg
    assert kg is not None and kg.triplet_embeddings is not None
    t = kinds["triplet"]
    gold_row = next(i for i, x in enumerate(kg.triplets) if x.relation == "founded in")
    assert t.labels.sum() == 1
    assert np.allclose(t.items[int(np.argmax(t.labels))], kg.triplet_embeddings[gold_row])
    c = kinds["chunk"]
    emb = retriever.index.dense_embeddings()
    assert emb is not None and c.labels.sum() == 1
    assert np.allclose(c.items[int(np.argmax(c.labels))], emb[1])


def test_demo_reranker_config_loads() -> None:
    """recipes/demo_policy/reranker.yaml parses into RerankerConfig and writes the committed reranker's folder."""
    from effirag.config import load_config

    path = Path(__file__).resolve().parents[1] / "recipes" / "demo_policy" / "reranker.yaml"
    cfg = load_config(RerankerConfig, path)
    assert cfg.output_dir == Path("checkpoints/demo-reranker") and cfg.eval_split == "dev"
