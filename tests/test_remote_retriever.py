"""Remote retrieval: the engine searching through ``effirag serve retrieval`` (a real server on 127.0.0.1) gets the
same results, and so the same trajectories, as with the in-process retriever over the same index; errors the server
answers are raised with its message, and an unreachable server fails after its retries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.errors import BackendError, ConfigError
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.base import Retriever
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import load_retriever
from effirag.retrieval.remote import RemoteRetriever
from effirag.serve.background import BackgroundServer
from effirag.serve.retrieval import create_app


@pytest.fixture(scope="module")
def local(small_index_dir: Path) -> Any:
    return load_retriever(small_index_dir, encoder=HashingEncoder(256))


@pytest.fixture(scope="module")
def remote(small_index_dir: Path) -> Iterator[RemoteRetriever]:
    app = create_app(load_retriever(small_index_dir, encoder=HashingEncoder(256)), token="t0k")
    with BackgroundServer(app) as srv:
        client = RemoteRetriever(srv.url, token="t0k")
        yield client
        client.close()


def _items(res: Any) -> list[tuple[str, str, str, str, float, int | None]]:
    return [(it.kind.value, it.id, it.title, it.text, it.score, it.tokens) for it in res.items]


CALLS = [
    ("founded in Amsterdam", "passage", 3, None, 0),
    ("largest port Europe", "sparse", 2, None, 1),
    ("Night Watch Amsterdam", "graph", 3, None, 0),
    ("Amsterdam company", "hybrid", 4, None, 0),
    ("Who painted The Night Watch?", "kag", 3, ["Rembrandt", "The Night Watch"], 0),
    ("Amsterdam ports", "chunks_triplets", 2, None, 0),
]


@pytest.mark.parametrize(("query", "mode", "k", "entities", "offset"), CALLS)
def test_remote_results_equal_in_process(
    local: Any, remote: RemoteRetriever, query: str, mode: str, k: int, entities: Any, offset: int
) -> None:
    assert isinstance(remote, Retriever)
    want = local.retrieve(query, mode, k, entities=entities, offset=offset)
    got = remote.retrieve(query, mode, k, entities=entities, offset=offset)
    assert want.items and _items(got) == _items(want)
    assert set(want.timings) <= set(got.timings)


def _trajectory(t: Any) -> tuple[Any, ...]:
    steps = [(s.action, s.query, s.mode, [(i.kind, i.id, i.text, i.score) for i in s.items]) for s in t.steps]
    return t.prompt, t.prediction, t.format_ok, steps


def test_one_scripted_episode_is_the_same_through_the_server(local: Any, remote: RemoteRetriever) -> None:
    script = [
        "<search> Dutch East India Company founded </search>",
        "<search> Rembrandt painting Amsterdam </search>",
        "<answer> 1602 </answer>",
    ]
    q = "When was the company founded in Rembrandt's city?"
    runs = []
    for retriever in (local, remote):
        [t] = run_episodes(ScriptedGenerator(script), retriever, get_protocol("searchr1"), [q], EngineConfig(k=2))
        runs.append(_trajectory(t))
    assert runs[0] == runs[1]
    assert [len(s[3]) for s in runs[0][3]] == [2, 2, 0]  # two real searches, two items each


def test_server_errors_are_raised_with_the_message_and_unreachable_fails_after_retries(
    remote: RemoteRetriever,
) -> None:
    with pytest.raises(BackendError, match=r"HTTP 422: offset: -1 must be >= 0"):
        remote.retrieve("Amsterdam", "sparse", 2, offset=-1)
    with pytest.raises(BackendError, match="HTTP 401"):
        RemoteRetriever(remote.url, max_retries=0).retrieve("Amsterdam", "sparse", 2)
    gone = RemoteRetriever("http://127.0.0.1:9", max_retries=1, backoff_s=0.01)
    with pytest.raises(BackendError, match="after 2 attempt"):
        gone.retrieve("Amsterdam", "sparse", 2)
    with pytest.raises(ConfigError, match="url"):
        RemoteRetriever("127.0.0.1:8000")


def test_cli_ask_with_retriever_url_equals_with_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from effirag.cli.main import app

    corpus = [
        {"title": "Lyon", "text": "Lyon is a city in France on the Rhone river."},
        {"title": "Ana Lopez", "text": "Ana Lopez directed the film Blue River in 1999."},
        {"title": "Blue River", "text": "Blue River is a film shot in Lyon."},
    ]
    (tmp_path / "corpus.json").write_text(json.dumps(corpus))
    runner = CliRunner()
    build = ["index", "build", "--corpus", str(tmp_path / "corpus.json"), "--out", str(tmp_path / "idx"), "--no-dense"]
    assert runner.invoke(app, build).exit_code == 0
    (tmp_path / "s.json").write_text(json.dumps(["<search> who directed Blue River </search>", "<answer> x </answer>"]))
    args = ["ask", "Who directed Blue River?", "--backend", f"scripted:{tmp_path / 's.json'}", "--json"]
    args += ["--set", "passage_mode=sparse", "--set", "k=2"]
    monkeypatch.delenv("EFFIRAG_TOKEN", raising=False)
    with BackgroundServer(create_app(load_retriever(tmp_path / "idx"))) as srv:
        via_server = runner.invoke(app, [*args, "--retriever", srv.url])
    in_process = runner.invoke(app, [*args, "--index", str(tmp_path / "idx")])
    assert via_server.exit_code == 0 and in_process.exit_code == 0, via_server.output + in_process.output
    a, b = json.loads(via_server.stdout), json.loads(in_process.stdout)
    a["totals"].pop("retrieval_s"), b["totals"].pop("retrieval_s")
    a["totals"].pop("generation_s"), b["totals"].pop("generation_s")
    assert a == b and a["steps"][0]["items"][0]["text"].startswith("Ana Lopez directed")
