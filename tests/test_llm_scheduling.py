"""No head-of-line blocking on the LLM server: a request with other settings runs beside a long unrelated batch
(tiny random-init model from a config, real server on 127.0.0.1), and a seeded request still owns torch's RNG for
its whole run, so its samples stay reproducible while other sampling batches come and go."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import pytest

from effirag.llm.base import GenerationConfig
from effirag.llm.hf import GenerationCancelled, HFGenerator
from effirag.serve.background import BackgroundServer
from effirag.serve.batcher import MicroBatcher, RNGGate
from effirag.serve.guard import CancelToken
from effirag.serve.llm import create_app
from tiny_models import make_tiny_model


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> HFGenerator:
    # seed 4 writes no end-of-sequence token in its first 6,000 greedy tokens after "The river"
    model = make_tiny_model(tmp_path_factory.mktemp("hol"), arch="qwen2", seed=4, max_positions=16384)
    return HFGenerator(model, device="cpu").load()


def test_a_2_token_request_is_not_held_behind_a_6000_token_one(gen: HFGenerator) -> None:
    with BackgroundServer(create_app(gen, "tiny")) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        host, port = srv.url.removeprefix("http://").split(":")
        # long enough to be still running on a fast, quiet machine (the KV cache writes 600 tokens within a second)
        body = json.dumps({"model": "tiny", "prompt": "The river", "max_tokens": 6000, "temperature": 0}).encode()
        head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
        with socket.create_connection((host, int(port))) as long:
            long.sendall(f"{head}{len(body)}\r\n\r\n".encode() + body)
            time.sleep(1.0)
            t0 = time.perf_counter()
            short = c.post(
                "/v1/completions", json={"model": "tiny", "prompt": "Who", "max_tokens": 2, "temperature": 0.7}
            )
            took = time.perf_counter() - t0
            long.setblocking(False)
            try:
                early = long.recv(1)  # the 6,000-token answer, had it come first
            except BlockingIOError:
                early = b""
        # closing the long request's socket cancels its generation
    assert short.status_code == 200, short.text
    assert len(short.json()["choices"][0]["token_ids"]) == 2
    assert took < 2.0, f"the 2-token request took {took:.1f} s"
    assert early == b"", "the 6,000-token request had already finished: the test proved nothing"


def test_a_seeded_request_samples_as_if_alone_beside_other_sampling(gen: HFGenerator) -> None:
    seeded = GenerationConfig(max_new_tokens=8, temperature=1.0, seed=3)
    alone = gen.generate(["Who directed the film?"], seeded)
    batcher = MicroBatcher(gen, max_wait_ms=0.0, workers=2)
    sampling = GenerationConfig(max_new_tokens=600, temperature=1.0)
    stop = threading.Event()
    noise_runs: list[int] = []
    current = CancelToken()

    def noise() -> None:  # unseeded sampling batches back to back (each ends at a sampled EOS), until told to stop
        nonlocal current
        for _ in range(200):
            if stop.is_set():
                return
            current = CancelToken()
            try:
                batcher.submit(["The river"], sampling, current)
                noise_runs.append(1)
            except GenerationCancelled:
                return

    noisy = threading.Thread(target=noise)
    noisy.start()
    time.sleep(0.5)  # sampling batches are drawing from the RNG
    got = batcher.submit(["Who directed the film?"], seeded)
    stop.set()
    current.cancel("test over")
    noisy.join(30)
    assert not noisy.is_alive()
    assert got == alone


def test_rng_gate_lets_greedy_run_beside_a_seeded_batch_and_seeded_batches_alone() -> None:
    gate = RNGGate()
    entered: list[str] = []

    def enter(name: str, cfg: GenerationConfig) -> threading.Thread:
        def body() -> None:
            with gate.hold(cfg):
                entered.append(name)

        t = threading.Thread(target=body)
        t.start()
        return t

    with gate.hold(GenerationConfig(temperature=1.0)):  # an unseeded sampling batch runs
        seeded = enter("seeded", GenerationConfig(temperature=1.0, seed=1))
        time.sleep(0.2)
        assert entered == []  # waits for the sampling batch
        enter("greedy", GenerationConfig(temperature=0.0)).join(5)
        assert entered == ["greedy"]
    seeded.join(5)
    assert entered == ["greedy", "seeded"]
