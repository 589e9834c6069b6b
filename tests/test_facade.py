"""EffiRetriever: every mode over a small persisted index, token counts, timings, offsets and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.errors import ConfigError, IndexMismatchError
from effirag.retrieval.base import Retriever
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import EffiRetriever, load_retriever
from effirag.retrieval.index import IndexConfig, build_index, load_index
from effirag.types import ItemKind, Passage


class CharTokenizer:
    """One token per character (a stand-in for the policy's tokenizer)."""

    name = "chars"

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]


@pytest.fixture(scope="module")
def index_dir(small_index_dir: Path) -> Path:
    return small_index_dir


@pytest.fixture(scope="module")
def retriever(index_dir: Path) -> EffiRetriever:
    return load_retriever(index_dir, encoder=HashingEncoder(256))


def test_is_a_retriever_and_counts_tokens(index_dir: Path) -> None:
    r = load_retriever(index_dir, CharTokenizer(), encoder=HashingEncoder(256))
    assert isinstance(r, Retriever)
    res = r.retrieve("Where is the capital of the Netherlands?", "sparse", 2)
    top = res.items[0]
    assert top.id == "p0" and top.kind is ItemKind.CHUNK and top.title == "Amsterdam"
    assert top.tokens == len("Amsterdam\nAmsterdam is the capital of the Netherlands.")  # title + "\n" + text
    assert res.extras["tokenizer"] == "chars"
    assert {"sparse", "tokens", "total"} <= set(res.timings)


def test_default_tokenizer_is_whitespace(retriever: EffiRetriever) -> None:
    it = retriever.retrieve("capital Netherlands", "passage", 1).items[0]
    assert it.tokens == 8  # "Amsterdam" + "Amsterdam is the capital of the Netherlands." = 1 + 7 words


@pytest.mark.parametrize("mode", ["passage", "sparse", "graph", "hybrid", "kag"])
def test_offset_pages_the_same_ranking(retriever: EffiRetriever, mode: str) -> None:
    q = "Which company was founded in Amsterdam?"
    full = [it.id for it in retriever.retrieve(q, mode, 4, entities=["Dutch East India Company"]).items]
    a = [it.id for it in retriever.retrieve(q, mode, 2, entities=["Dutch East India Company"]).items]
    b = [it.id for it in retriever.retrieve(q, mode, 2, entities=["Dutch East India Company"], offset=2).items]
    assert a + b == full[:4]


def test_graph_modes_return_items_and_stage_timings(retriever: EffiRetriever) -> None:
    q = "When was the Dutch East India Company founded?"
    g = retriever.retrieve(q, "graph", 3)
    assert len(g.items) == 3 and "graph" in g.timings
    h = retriever.retrieve(q, "hybrid", 3)
    assert {"semantic", "graph", "fusion"} <= set(h.timings)
    assert len({it.id for it in h.items}) == 3
    kag = retriever.retrieve(q, "kag", 3, entities=["Dutch East India Company"])
    assert 0 < len(kag.items) <= 3
    assert {"semantic", "rerank", "triplets", "kag_ppr"} <= set(kag.timings)
    assert "graph" in kag.extras["kag"] and kag.extras["kag"]["scores"]
    ct = retriever.retrieve(q, "chunks_triplets", 2, entities=["Dutch East India Company"])
    kinds = [it.kind for it in ct.items]
    assert kinds[:2] == [ItemKind.CHUNK, ItemKind.CHUNK] and ItemKind.TRIPLET in kinds[2:]
    assert all(it.tokens is not None and it.tokens > 0 for it in ct.items)


def test_query_matching_nothing_is_empty(retriever: EffiRetriever) -> None:
    assert retriever.retrieve("zyzzyva quokka", "sparse", 3).items == []


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"query": ""}, "query=''.*empty"),
        ({"query": "   "}, "empty"),
        ({"k": 0}, "k=0"),
        ({"k": -3}, "k=-3"),
        ({"k": 7}, "k=7.*holds 6 passages"),
        ({"k": 10_001}, "k=10001"),
        ({"mode": "telepathy"}, "mode='telepathy'.*known: passage, sparse"),
        ({"offset": -1}, "offset=-1"),
    ],
)
def test_bad_input_is_a_clear_error(retriever: EffiRetriever, kwargs: dict, pattern: str) -> None:
    args = {"query": "Amsterdam", "mode": "passage", "k": 2, **kwargs}
    with pytest.raises(ConfigError, match=pattern):
        retriever.retrieve(**args)


def test_modes_missing_from_the_index(tmp_path: Path, small_passages: list[Passage]) -> None:
    build_index(small_passages, tmp_path, config=IndexConfig(dense=False))
    r = EffiRetriever(load_index(tmp_path))
    assert r.retrieve("Amsterdam capital", "sparse", 1).items[0].id == "p0"
    with pytest.raises(IndexMismatchError, match="'passage' needs a dense index"):
        r.retrieve("Amsterdam", "passage", 2)
    with pytest.raises(IndexMismatchError, match="'graph' needs a knowledge graph"):
        EffiRetriever(load_index(tmp_path), HashingEncoder(256)).retrieve("Amsterdam", "graph", 2)


def test_missing_index_dir(tmp_path: Path) -> None:
    with pytest.raises(IndexMismatchError, match="does not exist"):
        load_retriever(tmp_path / "missing")


def test_encoder_mismatch_refused(index_dir: Path) -> None:
    with pytest.raises(IndexMismatchError, match="hashing-256"):
        load_retriever(index_dir, encoder=HashingEncoder(64))


def test_kag_reuses_index_scores_and_matches_rescoring(index_dir: Path) -> None:
    """With the index's own bi-encoder, KAG takes chunk and triplet similarities from the dense scores instead of
    encoding the texts again; a separate similarity object over an equal encoder forces the re-encoding path, and
    both must give the same items in the same order with the same KAG scores (up to float32 rounding)."""
    from effirag.retrieval.similarity import BiEncoderSimilarity

    enc = HashingEncoder(256)
    fast = load_retriever(index_dir, encoder=enc)
    slow = load_retriever(index_dir, encoder=enc, similarity=BiEncoderSimilarity(HashingEncoder(256)))
    for q, ents in [
        ("Where was the Dutch East India Company founded?", ["Dutch East India Company"]),
        ("What did Rembrandt paint?", ["Rembrandt"]),
        ("Which port is the largest in Europe?", []),
    ]:
        a, b = fast.retrieve(q, "kag", 4, entities=ents), slow.retrieve(q, "kag", 4, entities=ents)
        assert [it.id for it in a.items] == [it.id for it in b.items]
        sa, sb = a.extras["kag"]["scores"], b.extras["kag"]["scores"]
        assert sa.keys() == sb.keys()
        assert all(abs(sa[key] - sb[key]) < 1e-5 for key in sa)


def test_the_index_encoder_runs_on_torch_off_the_cpu(index_dir: Path) -> None:
    """ONNX Runtime runs on CPU only: another device gets the same model on sentence-transformers (not loaded here)."""
    from effirag.retrieval.encoders import SentenceTransformerEncoder

    cpu = load_retriever(index_dir).encoder
    gpu = load_retriever(index_dir, device="cuda:0").encoder
    assert isinstance(cpu, SentenceTransformerEncoder) and isinstance(gpu, SentenceTransformerEncoder)
    assert (cpu.config.backend, cpu.config.device) == ("onnx", "cpu")
    assert (gpu.config.backend, gpu.config.device) == ("torch", "cuda:0")
    assert gpu.name == cpu.name == "hashing-256"  # the index's encoder, whatever the engine
