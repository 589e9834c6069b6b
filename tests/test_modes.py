"""Retrieval modes as components: the registry, composition (hybrid, kag), a mode added without touching the others,
and the triplet stage's settings as one dataclass."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from effirag.agent import EngineConfig
from effirag.errors import ConfigError
from effirag.retrieval.base import RetrievalMode, Retriever
from effirag.retrieval.facade import EffiRetriever
from effirag.retrieval.fusion import rrf
from effirag.retrieval.kag import KAGConfig
from effirag.retrieval.modes import REGISTRY, mode_class, mode_names
from effirag.retrieval.modes.base import ModeComponent
from effirag.retrieval.triplets import TripletStage
from effirag.types import RetrievedItem

Q = "Which company was founded in Amsterdam?"


class EchoMode(ModeComponent):
    """A mode defined only here: the passages whose title is a word of the query, in corpus order."""

    name: ClassVar[str] = "echo"

    def rank(
        self, query: str, depth: int, entities: list[str], timings: dict[str, float], extras: dict[str, Any]
    ) -> list[RetrievedItem]:
        words = set(query.split())
        rows = [i for i, p in enumerate(self.ctx.index.passages) if p.title in words]
        timings["echo"] = 0.0
        return [self.ctx.chunk(i, 1.0) for i in rows][:depth]


@pytest.fixture(scope="module")
def retriever(small_retriever: EffiRetriever) -> EffiRetriever:
    return small_retriever


def test_every_mode_is_registered_and_a_retriever(retriever: EffiRetriever) -> None:
    assert mode_names() == tuple(m.value for m in RetrievalMode)
    for name in mode_names():
        component = retriever.modes.component(name)
        assert type(component) is mode_class(name) and component.name == name
        assert isinstance(component, Retriever)
        assert retriever.modes.component(name) is component  # built once per index


def test_a_component_answers_only_its_own_mode(retriever: EffiRetriever) -> None:
    passage = retriever.modes.component("passage")
    assert [it.id for it in passage.retrieve(Q, k=3).items] == [
        it.id for it in retriever.retrieve(Q, "passage", 3).items
    ]
    with pytest.raises(ConfigError, match="serves mode 'passage'"):
        passage.retrieve(Q, "sparse", 3)


def test_hybrid_is_rrf_of_the_passage_and_graph_components(retriever: EffiRetriever) -> None:
    n = retriever.max_k  # fusion_depth (50) capped by the 6-passage corpus
    dense = [it.id for it in retriever.retrieve(Q, "passage", n).items]
    graph = [it.id for it in retriever.retrieve(Q, "graph", n).items]
    fused = rrf([dense, graph], k=retriever.config.rrf_k)
    hybrid = retriever.retrieve(Q, "hybrid", 4)
    assert [(it.id, it.score) for it in hybrid.items] == fused[:4]


def test_kag_composes_the_shared_passage_component(retriever: EffiRetriever) -> None:
    res = retriever.retrieve(Q, "kag", 3, entities=["Dutch East India Company"])
    kag_nodes = {n["id"] for n in res.extras["kag"]["graph"]["nodes"]}
    top = retriever.modes.component("passage").retrieve(Q, k=retriever.config.kag.k_d).items
    assert {f"c:{it.id}" for it in top} <= kag_nodes  # the reranked candidates are the passage component's
    assert {"semantic", "rerank", "triplets", "kag_ppr"} <= set(res.timings)


def test_a_new_mode_is_one_registry_line(retriever: EffiRetriever, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "echo", "test_modes:EchoMode")
    r = EffiRetriever(retriever.index, retriever.encoder)
    res = r.retrieve("Amsterdam or Rotterdam or Tulip", "echo", 2)
    assert [it.id for it in res.items] == ["p0", "p1"]
    assert [it.tokens for it in res.items] == [1 + 7, 1 + 7]  # title + text words, counted by the facade
    assert {"echo", "tokens", "total"} <= set(res.timings) and res.extras["mode"] == "echo"
    assert [it.id for it in r.retrieve("Amsterdam or Rotterdam or Tulip", "echo", 2, offset=1).items] == ["p1", "p3"]
    assert EngineConfig(mode="echo").mode == "echo"


def test_triplet_stage_is_one_dataclass(retriever: EffiRetriever) -> None:
    assert KAGConfig().triplet_stage == TripletStage()  # TeaRAG's §5.1 sizes: k_t 10, k_e 5, entities 10, triplets 20
    assert KAGConfig(k_t=3, n_triplets=4).triplet_stage == TripletStage(k_t=3, n_triplets=4)
    two = retriever.modes.two_stage()
    ents, q = ["Dutch East India Company"], "When was the company founded?"
    by_stage = two.search(ents, q, TripletStage(k_t=2, k_e=1, n_entities=2, n_triplets=3))
    by_args = two.retrieve_with_triplets(ents, q, 2, 1, 2, 3)
    assert [it.id for it, _ in by_stage] == [it.id for it, _ in by_args] and len(by_stage) == 2
    with pytest.raises(ConfigError, match=r"TripletStage\.k_e=0"):
        TripletStage(k_e=0)
