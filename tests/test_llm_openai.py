"""OpenAIGenerator against real local servers: effirag's own server over a tiny HF model, and a flaky FastAPI app
(503/429 then 200, counting requests) for the retry policy. Plus the backend-spec factory. No mocks, no network."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from effirag.errors import BackendError
from effirag.llm.base import GenerationConfig, Generator
from effirag.llm.factory import make_generator
from effirag.llm.hf import HFGenerator
from effirag.llm.openai_http import OpenAIGenerator
from effirag.serve.background import BackgroundServer
from effirag.serve.llm import create_app, render_chat
from tiny_models import make_tiny_model

PROMPTS = ["Who directed the film?", "The river", "<search> director </search>", "a", "EffiRAG answers questions"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("oai"), arch="qwen2", seed=2)


@pytest.fixture(scope="module")
def gen(model_dir: Path) -> HFGenerator:
    return HFGenerator(model_dir, device="cpu").load()


@pytest.fixture(scope="module")
def url(gen: HFGenerator) -> Iterator[str]:
    with BackgroundServer(create_app(gen, "tiny")) as srv:
        yield srv.url + "/v1"


def client(url: str, **kw: Any) -> OpenAIGenerator:
    kw.setdefault("backoff_s", 0.01)
    return OpenAIGenerator(url, "tiny", **kw)


def test_completions_equal_the_local_backend_with_stop_restored(url: str, gen: HFGenerator) -> None:
    full = gen.generate(PROMPTS, GenerationConfig(max_new_tokens=10))
    stops = (full[0][0].text[5:7], full[1][0].text[3:5])
    cfg = GenerationConfig(max_new_tokens=10, stop=stops)
    direct = gen.generate(PROMPTS, cfg)
    assert any(cs[0].stop_string for cs in direct)
    with client(url, concurrency=3) as remote:
        assert isinstance(remote, Generator) and remote.name == f"openai:{url}#tiny"
        got = remote.generate(PROMPTS, cfg)
    assert got == direct  # text with its stop string, token ids, finish reason, stop string — all identical


def test_several_prompts_per_request(url: str, gen: HFGenerator) -> None:
    cfg = GenerationConfig(max_new_tokens=6, n=2)
    with client(url, prompts_per_request=2) as remote:
        assert remote.generate(PROMPTS, cfg) == gen.generate(PROMPTS, cfg)


def test_frequency_and_presence_penalties_travel_to_the_server(url: str, gen: HFGenerator) -> None:
    """The request carries both penalties and the server applies them: remote equals local with penalties, and
    penalised text differs from plain text (the random tiny model repeats tokens at greedy)."""
    pen = GenerationConfig(max_new_tokens=16, frequency_penalty=1.5, presence_penalty=0.5)
    with client(url) as remote:
        got = remote.generate(PROMPTS[:2], pen)
    assert got == gen.generate(PROMPTS[:2], pen)
    assert got != gen.generate(PROMPTS[:2], GenerationConfig(max_new_tokens=16))


def test_chat_endpoint(url: str, gen: HFGenerator) -> None:
    cfg = GenerationConfig(max_new_tokens=6, logprobs=True)
    with client(url, endpoint="chat") as remote:
        (cs,) = remote.generate([PROMPTS[0]], cfg)
    prompt = render_chat(gen.tokenizer, [{"role": "user", "content": PROMPTS[0]}])
    (direct,) = gen.generate([prompt], cfg)[0]
    assert cs[0].text == direct.text and cs[0].token_ids == direct.token_ids
    assert cs[0].logprobs == pytest.approx(direct.logprobs, abs=1e-5)


def test_seeded_samples_n_and_logprobs(url: str, gen: HFGenerator) -> None:
    cfg = GenerationConfig(max_new_tokens=6, temperature=1.0, top_p=0.95, n=3, seed=7, logprobs=True)
    with client(url) as remote:
        a = remote.generate(PROMPTS[:2], cfg)
        b = remote.generate(PROMPTS[:2], cfg)
    assert [len(cs) for cs in a] == [3, 3]
    assert [[c.token_ids for c in cs] for cs in a] == [[c.token_ids for c in cs] for cs in b]
    assert len({c.token_ids for c in a[0]}) > 1
    direct = gen.generate(PROMPTS[:1], cfg)[0]  # the server ran each seeded prompt alone, as here
    assert [c.token_ids for c in a[0]] == [c.token_ids for c in direct]
    for c in a[0]:
        assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids)


def test_token_counts_from_tokenizer_path_or_server(url: str, gen: HFGenerator, model_dir: Path) -> None:
    text = "Who directed the film that won the award?"
    expected = gen.count_tokens(text)
    with client(url, tokenizer_path=model_dir) as local, client(url) as remote:
        assert local.count_tokens(text) == remote.count_tokens(text) == expected


def test_http_4xx_is_raised_at_once_naming_the_server(url: str) -> None:
    with OpenAIGenerator(url, "no-such-model", backoff_s=0.01) as remote, pytest.raises(BackendError) as e:
        remote.generate(["x"], GenerationConfig(max_new_tokens=2))
    msg = str(e.value)
    assert url in msg and "HTTP 404" in msg and "no-such-model" in msg and "serves 'tiny'" in msg
    with client(url, extra_body={"top_p": 5.0}) as bad, pytest.raises(BackendError, match=r"HTTP 400.*top_p"):
        bad.generate(["x"], GenerationConfig(max_new_tokens=2))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_one_clear_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with client(url, max_retries=1) as remote, pytest.raises(BackendError) as e:
        remote.generate(PROMPTS, GenerationConfig(max_new_tokens=2))
    msg = str(e.value)
    assert f"POST {url}/completions failed after 2 attempt(s): cannot reach the server (ConnectError" in msg
    with client(url, max_retries=0) as remote, pytest.raises(BackendError, match="tokenizer_path"):
        remote.count_tokens("x")


def _flaky_app(failures: list[int], log: list[str]) -> FastAPI:
    """A real server whose /v1/completions answers the given HTTP statuses first, then a valid completion."""
    app = FastAPI()

    @app.post("/v1/completions")
    async def completions(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        log.append(body["prompt"])
        if len(log) <= len(failures):
            status = failures[len(log) - 1]
            return JSONResponse(
                {"error": {"message": f"busy #{len(log)}"}}, status_code=status, headers={"Retry-After": "0"}
            )
        # SGLang's convention for the stop that matched; stop string not in the text (OpenAI convention)
        choice = {"index": 0, "text": "hi ", "finish_reason": "stop", "matched_stop": "</a>", "logprobs": None}
        return JSONResponse({"choices": [choice]})

    return app


def test_retries_on_5xx_and_429_then_succeeds(model_dir: Path) -> None:
    log: list[str] = []
    with BackgroundServer(_flaky_app([503, 429], log)) as srv:
        remote = client(srv.url + "/v1", max_retries=3, tokenizer_path=model_dir)
        (cs,) = remote.generate(["q"], GenerationConfig(max_new_tokens=4, stop=("</a>",)))
    assert log == ["q", "q", "q"]
    assert cs[0].text == "hi </a>" and cs[0].stop_string == "</a>" and cs[0].finish_reason == "stop"
    assert cs[0].token_ids == tuple(remote.tokenizer.encode("hi </a>", add_special_tokens=False))


def test_gives_up_after_max_retries_and_never_retries_4xx(model_dir: Path) -> None:
    log: list[str] = []
    with BackgroundServer(_flaky_app([503, 503, 503], log)) as srv:
        remote = client(srv.url + "/v1", max_retries=1, tokenizer_path=model_dir)
        with pytest.raises(BackendError, match=r"failed after 2 attempt\(s\): HTTP 503: .*busy #2"):
            remote.generate(["q"], GenerationConfig(max_new_tokens=4))
    assert len(log) == 2
    log.clear()
    with BackgroundServer(_flaky_app([422], log)) as srv:
        remote = client(srv.url + "/v1", max_retries=3, tokenizer_path=model_dir)
        with pytest.raises(BackendError, match=r"HTTP 422: .*busy #1"):
            remote.generate(["q"], GenerationConfig(max_new_tokens=4))
    assert len(log) == 1


# ---------------------------------------------------------------- factory


def test_factory_parses_every_backend(model_dir: Path, tmp_path: Path) -> None:
    hf = make_generator(f"hf:{model_dir}?device=cpu&max_batch_size=4", load=False)
    assert isinstance(hf, HFGenerator) and hf.max_batch_size == 4 and hf.device_request == "cpu"
    oa = make_generator(f"openai:http://127.0.0.1:9/v1#qwen?tokenizer={model_dir}&concurrency=3")
    assert isinstance(oa, OpenAIGenerator)
    assert (oa.base_url, oa.model, oa.endpoint, oa.concurrency) == ("http://127.0.0.1:9/v1", "qwen", "completions", 3)
    assert oa.tokenizer_path == model_dir
    chat = make_generator("openai-chat:https://h.example/v1#m")
    assert isinstance(chat, OpenAIGenerator) and chat.endpoint == "chat"
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["<answer> x </answer>"]), encoding="utf-8")
    scripted = make_generator(f"scripted:{script}")
    assert scripted.name.startswith("scripted:")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("vlm:/models/qwen", "expected one of hf:DIR, vllm:DIR, openai:URL#MODEL"),
        ("no-colon", "unknown backend spec 'no-colon'"),
        ("openai:http://h:8000/v1", "expected openai:URL#MODEL"),
        ("openai:h:8000/v1#m", "must start with http://"),
        ("hf:/x?devcie=cpu", "unknown option 'devcie'"),
        ("openai:http://h/v1#m?concurrency=many", "concurrency='many' must be of type int"),
    ],
)
def test_factory_rejects_bad_specs(spec: str, needle: str) -> None:
    with pytest.raises(BackendError) as e:
        make_generator(spec, load=False)
    assert needle in str(e.value)
