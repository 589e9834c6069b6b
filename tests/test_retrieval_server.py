"""The retrieval server, started on 127.0.0.1 by the tests and called by an independent client: plain httpx and
dict checks written from the published ``/retrieve`` contract (Search-R1's retrieval server, as verl's search tool
calls it), never EffiRAG's own client. Real MuSiQue sub-questions must find their gold passage in the top 5 over a
BM25 index of the real MuSiQue slice; every validation case answers 422 naming the field; auth answers 401; a full
queue 503 with Retry-After; concurrent queries are merged into one search call."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from effirag.data.corpus import load_corpus
from effirag.retrieval.base import RetrievalMode, RetrievalResult
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import EffiRetriever, load_retriever
from effirag.retrieval.index import IndexConfig, build_index
from effirag.serve.background import BackgroundServer
from effirag.serve.limits import ServeLimits
from effirag.serve.retrieval import create_app
from effirag.serve.retrieval_schema import RetrievalServeLimits


@pytest.fixture(scope="module")
def musique_index(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = load_corpus(shared_data / "musique_mini" / "corpus.json")
    folder = tmp_path_factory.mktemp("musique-bm25")
    build_index(list(corpus), folder, config=IndexConfig(dense=False), corpus_path="musique_mini/corpus.json")
    return folder


@pytest.fixture(scope="module")
def server(musique_index: Path) -> Iterator[str]:
    app = create_app(
        load_retriever(musique_index), limits=RetrievalServeLimits(max_queries=100, max_rows=400, max_topk=20)
    )
    with BackgroundServer(app) as srv:
        yield srv.url


def _sub_questions(shared_data: Path) -> list[tuple[str, str]]:
    """(sub-question, gold "title\\ntext") for every self-contained first-hop sub-question of the slice."""
    out = []
    for q in json.loads((shared_data / "musique_mini" / "questions.json").read_text(encoding="utf-8")):
        for sq in q["question_decomposition"]:
            if "#" not in sq["question"]:
                gold = q["paragraphs"][sq["paragraph_support_idx"]]
                out.append((sq["question"], f"{gold['title']}\n{gold['paragraph_text']}"))
    return out


def _check_document(doc: Any) -> None:
    assert isinstance(doc, dict) and isinstance(doc["id"], str) and doc["id"]
    assert isinstance(doc["contents"], str) and "\n" in doc["contents"]  # "Title\ntext": verl splits line one off


def test_retrieve_contract_and_gold_passages_on_real_musique(server: str, shared_data: Path) -> None:
    subs = _sub_questions(shared_data)
    assert len(subs) == 75
    r = httpx.post(f"{server}/retrieve", json={"queries": [q for q, _ in subs], "topk": 5, "return_scores": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"result"} and len(body["result"]) == len(subs)
    hits = 0
    for (_, gold), ranked in zip(subs, body["result"], strict=True):
        assert len(ranked) == 5
        for entry in ranked:
            assert set(entry) == {"document", "score"} and isinstance(entry["score"], float)
            _check_document(entry["document"])
        scores = [e["score"] for e in ranked]
        assert scores == sorted(scores, reverse=True)
        hits += any(e["document"]["contents"] == gold for e in ranked)
    assert hits >= 68, f"gold passage in the top 5 for only {hits} of {len(subs)} sub-questions"

    # one query per call, as verl's search tool sends them; without scores each item is the document itself
    q, gold = subs[0]
    r = httpx.post(f"{server}/retrieve", json={"queries": [q], "topk": 3, "return_scores": False})
    ranked = r.json()["result"][0]
    assert len(ranked) == 3 and all("score" not in d for d in ranked)
    for d in ranked:
        _check_document(d)
    assert [d["contents"] for d in ranked] == [e["document"]["contents"] for e in body["result"][0][:3]]
    r = httpx.post(f"{server}/retrieve", json={"queries": [q]})  # Search-R1: topk defaults to the server's (3)
    assert r.status_code == 200 and len(r.json()["result"][0]) == 3


def test_search_returns_typed_items_with_tokens_and_timings(server: str, musique_index: Path) -> None:
    q = "Who published the Journal of Psychotherapy Integration?"
    r = httpx.post(f"{server}/search", json={"query": q, "mode": "sparse", "k": 4, "offset": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    local = load_retriever(musique_index).retrieve(q, RetrievalMode.SPARSE, 4, offset=2)
    assert [it["id"] for it in body["items"]] == [it.id for it in local.items]
    assert [it["tokens"] for it in body["items"]] == [it.tokens for it in local.items]
    assert all(it["kind"] == "chunk" and it["tokens"] > 0 for it in body["items"])
    assert body["timings"]["total"] > 0 and "sparse" in body["timings"]
    assert body["extras"]["offset"] == 2 and body["extras"]["mode"] == "sparse"


BAD_RETRIEVE = [
    ({"queries": ["q"] * 101, "topk": 3}, "queries", "limit of 100"),
    ({"queries": ["q"] * 50, "topk": 20}, "queries", "50 queries x topk 20 = 1000 exceed the limit of 400"),
    ({"queries": ["q"], "topk": -2}, "topk", "must be >= 0"),
    ({"queries": ["q"], "topk": 21}, "topk", "limit of 20"),
    ({"queries": ["q"], "topk": True}, "topk", "not a boolean"),
    ({"query": "q", "top_k": 21}, "top_k", "limit of 20"),
    ({"query": "q", "top_k": 2, "topk": 2}, "top_k", "not both"),
    ({"query": "q", "queries": ["q"]}, "query", "not both"),
    ({"queries": "not a list", "topk": 3}, "queries", "list"),
    ({"queries": ["ok", 5], "topk": 3}, "queries[1]", "string"),
    ({"topk": 3}, "queries", "required"),
]
BAD_SEARCH = [
    ({"query": "q", "mode": "psychic"}, "mode", "unknown mode 'psychic'"),
    ({"query": "q", "mode": "sparse", "offset": -1}, "offset", "must be >= 0"),
    ({"query": "q", "mode": "sparse", "k": 0}, "k", "must be >= 1"),
    ({"query": "q", "mode": "sparse", "k": 15, "offset": 10}, "offset", "limit of 20"),
    ({"query": "", "mode": "sparse"}, "query", "must not be empty"),
    ({"query": "\x00\u200b\ufeff", "mode": "sparse"}, "query", "must not be empty"),
    ({"query": "x" * 2049, "mode": "sparse"}, "query", "limit of 2048"),
    ({"query": "q", "mode": "sparse", "k": True}, "k", "not a boolean"),
    ({"query": "q", "mode": "sparse", "entities": ["\u200c"]}, "entities[0]", "must not be empty"),
    ({"query": "q", "mode": "graph"}, "mode", "knowledge graph"),  # the index has none
    ({"query": "q", "mode": "passage"}, "mode", "dense index"),  # BM25 only
]


@pytest.mark.parametrize(
    ("route", "payload", "param", "words"),
    [("/retrieve", *c) for c in BAD_RETRIEVE] + [("/search", *c) for c in BAD_SEARCH],
)
def test_validation_answers_422_naming_the_field_and_limit(
    server: str, route: str, payload: dict[str, Any], param: str, words: str
) -> None:
    r = httpx.post(server + route, json=payload)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err


def test_token_guards_every_route_but_health(musique_index: Path) -> None:
    app = create_app(load_retriever(musique_index), token="s3cret")
    with BackgroundServer(app) as srv:
        ok = {"queries": ["Dutch East India Company"], "topk": 2, "return_scores": True}
        assert httpx.post(f"{srv.url}/retrieve", json=ok).status_code == 401
        bad = httpx.post(f"{srv.url}/retrieve", json=ok, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.headers["www-authenticate"] == "Bearer"
        assert httpx.get(f"{srv.url}/metrics").status_code == 401
        assert httpx.get(f"{srv.url}/health").status_code == 200
        good = httpx.post(f"{srv.url}/retrieve", json=ok, headers={"Authorization": "Bearer s3cret"})
        assert good.status_code == 200 and len(good.json()["result"][0]) == 2


class GatedRetriever(EffiRetriever):
    """A real retriever whose batched searches wait for ``gate`` and record their sizes."""

    def __init__(self, base: EffiRetriever) -> None:
        super().__init__(base.index, base.encoder, config=base.config)
        self.gate = threading.Event()
        self.started = threading.Event()
        self.calls: list[int] = []

    def retrieve_batch(
        self, queries: Sequence[str], mode: RetrievalMode | str = "passage", k: int = 5
    ) -> list[RetrievalResult]:
        self.calls.append(len(queries))
        self.started.set()
        self.gate.wait(10)
        return super().retrieve_batch(queries, mode, k)


def _post_async(pool: ThreadPoolExecutor, url: str, query: str) -> Any:
    return pool.submit(httpx.post, url, json={"queries": [query], "topk": 2}, timeout=20)


def test_full_queue_answers_503_with_retry_after_and_batches_waiting_queries(musique_index: Path) -> None:
    gated = GatedRetriever(load_retriever(musique_index))
    limits = RetrievalServeLimits(http=ServeLimits(max_queue=9, retry_after_s=2), max_wait_ms=200, workers=1)
    with BackgroundServer(create_app(gated, limits=limits)) as srv, ThreadPoolExecutor(9) as pool:
        first = _post_async(pool, f"{srv.url}/retrieve", "Amsterdam")
        assert gated.started.wait(10)  # the worker is busy with the first query
        waiting = [_post_async(pool, f"{srv.url}/retrieve", f"Rotterdam port {i}") for i in range(8)]
        deadline = time.monotonic() + 10
        while httpx.get(f"{srv.url}/health").status_code != 503:
            assert time.monotonic() < deadline, "the queue never filled"
            time.sleep(0.02)
        r = httpx.post(f"{srv.url}/retrieve", json={"queries": ["one too many"], "topk": 2})
        assert r.status_code == 503 and r.headers["retry-after"] == "2"
        assert r.json()["error"]["type"] == "overloaded_error"
        gated.gate.set()
        assert first.result().status_code == 200
        assert all(f.result().status_code == 200 for f in waiting)
        assert gated.calls == [1, 8]  # the eight queued queries went through one search call
        metrics = httpx.get(f"{srv.url}/metrics").text
    assert 'effirag_requests_total{route="/retrieve",status="200"} 9' in metrics
    assert 'effirag_requests_total{route="/retrieve",status="503"} 1' in metrics
    assert "effirag_refused_total 1" in metrics
    assert 'effirag_batch_queries_bucket{le="8"} 2' in metrics and "effirag_batch_queries_count 2" in metrics
    assert 'effirag_request_seconds_count{route="/retrieve"} 10' in metrics
    assert "effirag_queue_depth 0" in metrics


def test_a_request_past_its_deadline_gets_504(musique_index: Path) -> None:
    gated = GatedRetriever(load_retriever(musique_index))
    limits = RetrievalServeLimits(http=ServeLimits(request_timeout_s=0.5))
    with BackgroundServer(create_app(gated, limits=limits)) as srv:
        t0 = time.monotonic()
        r = httpx.post(f"{srv.url}/retrieve", json={"queries": ["Amsterdam"], "topk": 2}, timeout=20)
        assert r.status_code == 504 and time.monotonic() - t0 < 5, (r.status_code, r.text, time.monotonic() - t0)
        gated.gate.set()
        again = httpx.post(f"{srv.url}/retrieve", json={"queries": ["Amsterdam"], "topk": 2}, timeout=20)
        assert again.status_code == 200, again.text


def test_batched_dense_search_equals_one_query_at_a_time(small_index_dir: Path) -> None:
    r = load_retriever(small_index_dir, encoder=HashingEncoder(256))
    queries = ["capital of the Netherlands", "largest port", "The Night Watch painter", "tulips in spring"]
    batched = r.retrieve_batch(queries, "passage", 3)
    for q, got in zip(queries, batched, strict=True):
        one = r.retrieve(q, "passage", 3)
        assert [it.id for it in got.items] == [it.id for it in one.items]
        assert [it.score for it in got.items] == pytest.approx([it.score for it in one.items], abs=1e-6)
        assert [it.tokens for it in got.items] == [it.tokens for it in one.items]
    sparse = r.retrieve_batch(queries, "sparse", 2)
    assert [[it.id for it in x.items] for x in sparse] == [
        [it.id for it in r.retrieve(q, "sparse", 2).items] for q in queries
    ]
    assert r.retrieve_batch([], "passage", 3) == []


def test_cli_refuses_non_loopback_without_token_and_a_corrupt_index(
    musique_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from typer.testing import CliRunner

    from effirag.cli.main import app

    monkeypatch.delenv("EFFIRAG_TOKEN", raising=False)
    r = CliRunner().invoke(app, ["serve", "retrieval", "--index", str(musique_index), "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "0.0.0.0" in r.output and "--token" in r.output and "--insecure" in r.output
    broken = tmp_path / "idx"
    shutil.copytree(musique_index, broken)
    with (broken / "passages.jsonl").open("a", encoding="utf-8") as f:
        f.write("\n")
    r = CliRunner().invoke(app, ["serve", "retrieval", "--index", str(broken)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.output.startswith("error: ") and "passages.jsonl" in r.output and r.output.count("\n") <= 2, r.output


def test_concurrent_requests_get_each_their_own_ranking(server: str, musique_index: Path, shared_data: Path) -> None:
    """48 single-query calls in flight at once (batched, on two workers) each answer exactly the in-process ranking of
    their own query: no batch mixes up whose results are whose."""
    local = load_retriever(musique_index)
    subs = [q for q, _ in _sub_questions(shared_data)][:48]
    with ThreadPoolExecutor(48) as pool:
        answers = list(pool.map(lambda q: httpx.post(f"{server}/retrieve", json={"queries": [q], "topk": 4}), subs))
    for q, r in zip(subs, answers, strict=True):
        assert r.status_code == 200, r.text
        want = [f"{it.title}\n{it.text}" for it in local.retrieve(q, "sparse", 4).items]
        assert [d["contents"] for d in r.json()["result"][0]] == want


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"queries": ["q"], "topk": 3', "body: invalid JSON at character 28"),
        (b"not json", "body: invalid JSON at character 0"),
        (b'{"queries": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body: JSON nested too deeply"),
        # a lone-surrogate escape makes the guard parse the body first: deep nesting must still answer 422, not 500
        (b'{"queries": ["\\ud83d", ' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "body: JSON nested too deeply"),
    ],
)
def test_a_body_that_is_not_json_answers_422_with_no_byte_offset_as_param(server: str, raw: bytes, words: str) -> None:
    for route in ("/retrieve", "/search"):
        r = httpx.post(server + route, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["param"] is None and words in err["message"] and err["type"] == "invalid_request_error", err
