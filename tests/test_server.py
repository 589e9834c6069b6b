"""The OpenAI-compatible FastAPI server, exercised over real HTTP (uvicorn on 127.0.0.1, a tiny random-init model)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.hf import HFGenerator
from effirag.serve.background import BackgroundServer
from effirag.serve.batcher import MicroBatcher
from effirag.serve.llm import create_app, render_chat
from tiny_models import make_tiny_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("srv"), arch="qwen2", seed=1)


@pytest.fixture(scope="module")
def gen(model_dir: Path) -> HFGenerator:
    return HFGenerator(model_dir, device="cpu").load()


@pytest.fixture(scope="module")
def client(gen: HFGenerator) -> Iterator[httpx.Client]:
    with BackgroundServer(create_app(gen, "tiny", default_max_tokens=8)) as srv, httpx.Client(base_url=srv.url) as c:
        yield c


def test_health_models_tokenize(client: httpx.Client, gen: HFGenerator) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["tiny"]
    r = client.post("/tokenize", json={"model": "tiny", "prompt": "The river", "add_special_tokens": False}).json()
    assert r["tokens"] == gen.tokenizer.encode("The river", add_special_tokens=False)
    assert r["count"] == len(r["tokens"])


def test_completions_match_the_backend_and_follow_the_openai_stop_convention(
    client: httpx.Client, gen: HFGenerator
) -> None:
    full = gen.generate(["The river"], GenerationConfig(max_new_tokens=12))[0][0]
    stop = full.text[4:6]
    expected = gen.generate(["The river"], GenerationConfig(max_new_tokens=12, stop=(stop,)))[0][0]
    assert expected.stop_string == stop
    body = {"model": "tiny", "prompt": "The river", "max_tokens": 12, "temperature": 0, "stop": stop}
    data = client.post("/v1/completions", json=body).json()
    (choice,) = data["choices"]
    assert choice["text"] == expected.text[: -len(stop)]  # OpenAI: the stop string is not returned ...
    assert choice["stop_reason"] == stop  # ... but, as in vLLM, which one matched is
    assert choice["finish_reason"] == "stop"
    assert choice["token_ids"] == list(expected.token_ids)
    assert data["object"] == "text_completion"
    assert data["usage"]["completion_tokens"] == len(expected.token_ids)
    assert data["usage"]["prompt_tokens"] == len(gen.tokenizer.encode("The river"))
    kept = client.post("/v1/completions", json={**body, "include_stop_str_in_output": True}).json()
    assert kept["choices"][0]["text"] == expected.text


def test_list_prompt_with_n_orders_choices_prompt_major(client: httpx.Client, gen: HFGenerator) -> None:
    prompts = ["Who directed the film?", "The river"]
    body = {"model": "tiny", "prompt": prompts, "max_tokens": 5, "temperature": 0, "n": 2, "logprobs": 0}
    choices = client.post("/v1/completions", json=body).json()["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2, 3]
    direct = gen.generate(prompts, GenerationConfig(max_new_tokens=5, n=2, logprobs=True))
    for c, d in zip(choices, [x for cs in direct for x in cs], strict=True):
        assert c["text"] == d.text and c["finish_reason"] == "length"
        assert c["logprobs"]["token_logprobs"] == pytest.approx(list(d.logprobs or ()), abs=1e-5)
        assert len(c["logprobs"]["tokens"]) == 5


def test_chat_applies_the_models_chat_template(client: httpx.Client, gen: HFGenerator) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who directed the film?"}]
    prompt = render_chat(gen.tokenizer, messages)
    assert prompt.endswith("<|assistant|>\n") and "<|system|>\nBe brief." in prompt
    body = {"model": "tiny", "messages": messages, "max_tokens": 6, "temperature": 0, "logprobs": True}
    data = client.post("/v1/chat/completions", json=body).json()
    assert data["object"] == "chat.completion"
    (choice,) = data["choices"]
    direct = gen.generate([prompt], GenerationConfig(max_new_tokens=6, logprobs=True))[0][0]
    assert choice["message"] == {"role": "assistant", "content": direct.text}
    assert [t["logprob"] for t in choice["logprobs"]["content"]] == pytest.approx(list(direct.logprobs or ()), abs=1e-5)


def test_render_chat_without_a_template() -> None:
    class NoTemplate:
        chat_template = None

    assert render_chat(NoTemplate(), [{"role": "user", "content": "hi"}]) == "user: hi\nassistant:"


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"model": "other", "prompt": "x"}, 404, "model 'other' not found; this server serves 'tiny'"),
        ({"model": "tiny", "prompt": "x", "temperature": -1}, 400, "temperature"),
        ({"model": "tiny", "prompt": "x", "n": 0}, 400, "n=0"),
        ({"model": "tiny"}, 400, "prompt"),
        ({"model": "tiny", "prompt": []}, 400, "prompt"),
        ({"model": "tiny", "prompt": "x", "stream": True}, 400, "stream"),
    ],
)
def test_errors_are_openai_shaped(client: httpx.Client, body: dict[str, object], status: int, needle: str) -> None:
    r = client.post("/v1/completions", json=body)
    assert r.status_code == status
    err = r.json()["error"]
    assert needle in err["message"] and err["code"] == status


class _GatedGenerator(HFGenerator):
    """A real HFGenerator that records its batches and can hold the worker until released."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, device="cpu")
        self.calls: list[int] = []
        self.gate = threading.Event()
        self.entered = threading.Event()

    def generate(self, prompts: Sequence[str], config: GenerationConfig, **kw: Any) -> list[list[Completion]]:
        self.entered.set()
        self.gate.wait(timeout=30)
        self.calls.append(len(prompts))
        return super().generate(prompts, config, **kw)


def test_micro_batcher_merges_queued_requests_with_the_same_config(model_dir: Path, gen: HFGenerator) -> None:
    g = _GatedGenerator(model_dir).load()
    batcher = MicroBatcher(g, max_wait_ms=0.0, workers=1)  # one worker: the later jobs queue behind job 0
    cfg = GenerationConfig(max_new_tokens=4)
    seeded = GenerationConfig(max_new_tokens=4, temperature=1.0, seed=3)
    prompts = ["a", "The river", "Who directed the film?", "b"]
    out: dict[int, list[list[Completion]]] = {}

    def submit(i: int, c: GenerationConfig) -> None:
        out[i] = batcher.submit([prompts[i]], c)

    first = threading.Thread(target=submit, args=(0, cfg))
    first.start()
    assert g.entered.wait(timeout=30)  # the worker now holds job 0; the next ones queue up behind it
    rest = [threading.Thread(target=submit, args=(i, c)) for i, c in ((1, cfg), (2, seeded), (3, cfg))]
    for n, t in enumerate(rest, start=1):
        t.start()
        while batcher._queue.qsize() < n:  # queue them in a known order
            threading.Event().wait(0.01)
    g.gate.set()
    for t in [first, *rest]:
        t.join(timeout=60)
    # job 0 alone, then jobs 1 and 3 (same seedless config) merged, then the seeded job 2 alone
    assert g.calls == [1, 2, 1]
    for i in (0, 1, 3):
        assert out[i] == gen.generate([prompts[i]], cfg)
    assert out[2] == gen.generate([prompts[2]], seeded)
