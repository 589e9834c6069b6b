"""The ecosystem's retrieval clients against ``effirag serve retrieval`` at its default settings, each request sent
exactly as the upstream project sends it and each answer parsed as it parses it (written from their public contracts,
with their HTTP library: ``requests`` for Search-R1, verl and SkyRL, ``httpx`` for rLLM):

- Search-R1's trainer (``search_r1/llm_agent/generation.py``): every active rollout's ``<search>`` content in one
  ``POST /retrieve`` ``{"queries", "topk": 3, "return_scores": true}`` (2,560 at its GRPO batch of 512 x 5, an empty
  list when no rollout searched), ``.json()["result"]``, each document's ``contents`` split into title and text.
- verl's ``search_r1_like_utils``: the same body from a tool call's ``query_list``; ``raise_for_status``, then
  ``.get("result", [])``; title / text split the same way.
- SkyRL's ``SearchToolGroup.search(query)``: ``query.strip()`` sent as a one-query batch with JSON content-type and
  accept headers; ``raise_for_status`` (4xx are retried ten times); ``contents.strip()`` per document.
- rLLM's ``LocalRetrievalTool``: ``GET /health``, then ``POST /retrieve`` ``{"query", "top_k": min(top_k, 50)}``;
  ``is_success``, ``.json().get("results", [])``, each result's ``document.id``, ``document.contents`` and ``score``
  (formatted ``:.3f``).

A real server on 127.0.0.1 over a BM25 index of the real MuSiQue slice; answers are checked against the in-process
ranking of the same query."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from effirag.data.corpus import load_corpus
from effirag.retrieval.base import RetrievalMode, RetrievalResult
from effirag.retrieval.facade import EffiRetriever, load_retriever
from effirag.retrieval.index import IndexConfig, build_index
from effirag.serve.background import BackgroundServer
from effirag.serve.retrieval import create_app
from effirag.serve.retrieval_schema import RetrievalServeLimits

GRPO_QUERIES = 512 * 5  # Search-R1's GRPO step: batch 512 x 5 rollouts, every one searching at once
DEFAULTS = RetrievalServeLimits()


class RecordingRetriever(EffiRetriever):
    """A real retriever recording how many queries each batched search call got."""

    def __init__(self, base: EffiRetriever) -> None:
        super().__init__(base.index, base.encoder, config=base.config)
        self.calls: list[int] = []

    def retrieve_batch(
        self, queries: Sequence[str], mode: RetrievalMode | str = "passage", k: int = 5
    ) -> list[RetrievalResult]:
        self.calls.append(len(queries))
        return super().retrieve_batch(queries, mode, k)


@pytest.fixture(scope="module")
def musique_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = load_corpus(shared_data / "musique_mini" / "corpus.json")
    folder = tmp_path_factory.mktemp("musique-bm25-clients")
    build_index(list(corpus), folder, config=IndexConfig(dense=False), corpus_path="musique_mini/corpus.json")
    return folder


@pytest.fixture(scope="module")
def local(musique_index: Path) -> EffiRetriever:
    return load_retriever(musique_index)


@pytest.fixture(scope="module")
def served(musique_index: Path) -> Iterator[tuple[str, RecordingRetriever]]:
    recording = RecordingRetriever(load_retriever(musique_index))
    with BackgroundServer(create_app(recording)) as srv:  # default limits, as `effirag serve retrieval` starts
        yield srv.url, recording


@pytest.fixture(scope="module")
def sub_questions(shared_data: Path) -> list[str]:
    out = []
    for q in json.loads((shared_data / "musique_mini" / "questions.json").read_text(encoding="utf-8")):
        out += [sq["question"] for sq in q["question_decomposition"] if "#" not in sq["question"]]
    return out


def _want(local: EffiRetriever, query: str, k: int) -> list[str]:
    return [f"{it.title}\n{it.text}" for it in local.retrieve(query, "sparse", k).items]


def _title_and_text(doc_item: dict[str, Any]) -> tuple[str, str]:
    """Search-R1's and verl's reading of one result: line one of ``contents`` is the title, the rest the text."""
    content = doc_item["document"]["contents"]
    return content.split("\n")[0], "\n".join(content.split("\n")[1:])


@pytest.mark.slow
def test_search_r1_grpo_batch_of_2560_with_blank_and_overlong_queries(
    served: tuple[str, RecordingRetriever], local: EffiRetriever, sub_questions: list[str]
) -> None:
    url, recording = served
    long_query = sub_questions[0] + " " + "x" * 3000  # a runaway <search> block, over max_query_chars
    blanks = ["", "   ", "\x00", "\u200b\u200d", "\ufeff\t\n"]  # e.g. <search></search>, NUL, zero-width only
    queries = [sub_questions[i % len(sub_questions)] for i in range(GRPO_QUERIES - len(blanks) - 1)]
    queries[7:7] = blanks
    queries.insert(1000, long_query)
    assert len(queries) == GRPO_QUERIES > DEFAULTS.max_batch
    recording.calls.clear()

    # Search-R1's _batch_search: the trainer's config topk (3), scores on, no status check before .json()['result']
    payload = {"queries": queries, "topk": 3, "return_scores": True}
    results = requests.post(f"{url}/retrieve", json=payload, timeout=120).json()["result"]

    assert len(results) == GRPO_QUERIES
    for i in range(7, 7 + len(blanks)):
        assert results[i] == [], (i, results[i])  # a blank query gets its own empty result, the batch still answers
    truncated = long_query[: DEFAULTS.max_query_chars]
    assert [e["document"]["contents"] for e in results[1000]] == _want(local, truncated, 3)
    for i in (0, 6, 12, 500, 1001, GRPO_QUERIES - 1):
        assert [e["document"]["contents"] for e in results[i]] == _want(local, queries[i], 3), i
        assert all(isinstance(e["score"], float) for e in results[i])
    title, text = _title_and_text(results[0][0])
    assert title and text and "\n" not in title
    # bounded memory: the batch went through the batcher in chunks of at most max_batch queries
    assert max(recording.calls) <= DEFAULTS.max_batch
    assert sum(recording.calls) == GRPO_QUERIES - len(blanks)


def test_search_r1_turn_where_no_rollout_searched_gets_an_empty_result(served: tuple[str, RecordingRetriever]) -> None:
    # every active rollout answered this turn: Search-R1 still calls _batch_search with an empty query list
    body = requests.post(f"{served[0]}/retrieve", json={"queries": [], "topk": 3, "return_scores": True}).json()
    assert body["result"] == []


def test_search_r1_ppo_batch_of_512_with_topk_0_means_the_default(
    served: tuple[str, RecordingRetriever], local: EffiRetriever, sub_questions: list[str]
) -> None:
    queries = [sub_questions[i % len(sub_questions)] for i in range(512)]
    r = requests.post(f"{served[0]}/retrieve", json={"queries": queries, "topk": 0, "return_scores": True})
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    assert [len(x) for x in result] == [DEFAULTS.default_topk] * 512
    assert [e["document"]["contents"] for e in result[3]] == _want(local, queries[3], DEFAULTS.default_topk)


def test_verl_search_r1_like_batch_from_a_tool_call(
    served: tuple[str, RecordingRetriever], local: EffiRetriever, sub_questions: list[str]
) -> None:
    query_list = [sub_questions[1], "  ", sub_questions[2]]  # a tool call's query list, one left blank
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    payload = {"queries": query_list, "topk": 3, "return_scores": True}
    response = requests.post(f"{served[0]}/retrieve", headers=headers, json=payload, timeout=30)
    response.raise_for_status()
    raw_results = response.json().get("result", [])
    assert len(raw_results) == 3 and raw_results[1] == []
    for query, retrieval in zip(query_list[::2], raw_results[::2], strict=True):
        titles = [_title_and_text(doc_item)[0] for doc_item in retrieval]
        assert titles == [w.split("\n")[0] for w in _want(local, query, 3)]


def test_skyrl_search_tool_one_stripped_query(
    served: tuple[str, RecordingRetriever], local: EffiRetriever, sub_questions: list[str]
) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    with requests.Session() as session:
        for query, want in ((f"  {sub_questions[4]}\n", _want(local, sub_questions[4], 3)), ("   ", [])):
            payload = {"queries": [query.strip()], "topk": 3, "return_scores": True}
            response = session.post(f"{served[0]}/retrieve", headers=headers, json=payload, timeout=30)
            response.raise_for_status()  # a 4xx here would be retried ten times, then reported as a search error
            raw_results = response.json().get("result", [])
            assert len(raw_results) == 1
            assert [doc_item["document"]["contents"].strip() for doc_item in raw_results[0]] == [
                w.strip() for w in want
            ]


def test_rllm_local_retrieval_tool_one_query_with_top_k(
    served: tuple[str, RecordingRetriever], local: EffiRetriever, sub_questions: list[str]
) -> None:
    with httpx.Client(timeout=30.0) as client:
        assert client.get(f"{served[0]}/health").status_code == 200
        max_results = 10  # the tool's default: top_k = top_k or max_results, capped at 50
        for query, top_k in ((sub_questions[5], None), (sub_questions[6], 4)):
            payload = {"query": query, "top_k": min(top_k or max_results, 50)}
            response = client.post(f"{served[0]}/retrieve", json=payload)
            assert response.is_success, response.text
            results = response.json().get("results", [])
            assert [r.get("document", {}).get("contents", "") for r in results] == _want(
                local, query, top_k or max_results
            )
            for r in results:
                assert r.get("document", {}).get("id") and f"{r.get('score', 0.0):.3f}"
                assert isinstance(r["score"], float)
        blank = client.post(f"{served[0]}/retrieve", json={"query": "\u200b", "top_k": 10})
        assert blank.is_success and blank.json().get("results", []) == []  # "No relevant documents found"
