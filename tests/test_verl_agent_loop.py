"""EffiRAG's verl agent loop (``effirag.integrations.verl_loop``) on CPU, without verl.

verl is not installed here, so a stand-in for verl's ``AsyncLLMServerManager`` implements the one method the loop
calls, ``async generate(request_id, *, prompt_ids, sampling_params)`` returning verl's ``TokenOutput`` fields
(``token_ids``, ``log_probs``), served by an EffiRAG token backend as verl's vLLM server serves it (``max_tokens``,
``stop``, ``logprobs``). Searches go to a real ``effirag serve retrieval`` on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.errors import ConfigError, DataError
from effirag.integrations.verl import compute_score
from effirag.integrations.verl_loop import EffiRAGAgentLoop, loop_output
from effirag.llm.base import GenerationConfig, TokenGenerator
from effirag.llm.scripted import ScriptedGenerator
from effirag.retrieval.encoders import HashingEncoder
from effirag.retrieval.facade import load_retriever
from effirag.serve.background import BackgroundServer
from effirag.serve.retrieval import create_app
from effirag.types import TokenKind, TokenSegment

Q1, Q2 = "Which city has the largest port in Europe?", "Where did Rembrandt paint The Night Watch?"
TURNS = {
    Q1: ["<think> I need the port. </think>\n<search> largest port Europe </search>",
         "<think> Found. </think>\n<answer> Rotterdam </answer>"],
    Q2: ["<think> Look it up. </think>\n<search> Rembrandt Night Watch </search>",
         "<think> Found. </think>\n<answer> Amsterdam </answer>"],
}  # fmt: skip
TRAINER = SimpleNamespace(config={"actor_rollout_ref": {"rollout": {"response_length": 512}}})
VERL_PARAMS = {"temperature": 1.0, "top_p": 1.0, "repetition_penalty": 1.0, "logprobs": True}


@dataclass
class TokenOutput:
    """verl's ``TokenOutput`` fields the loop reads."""

    token_ids: list[int]
    log_probs: list[float] | None = None


class StandInServerManager:
    """verl's server manager as the loop calls it, generating with ``backend`` (every request recorded)."""

    def __init__(self, backend: TokenGenerator) -> None:
        self.backend = backend
        self.requests: list[tuple[str, list[int], dict[str, Any]]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], image_data: Any = None
    ) -> TokenOutput:
        self.requests.append((request_id, list(prompt_ids), dict(sampling_params)))
        sp = sampling_params
        cfg = GenerationConfig(
            max_new_tokens=sp["max_tokens"],
            temperature=sp["temperature"],
            top_p=sp["top_p"],
            stop=tuple(sp["stop"]),
            logprobs=bool(sp.get("logprobs")),
        )
        await asyncio.sleep(0)  # a real server answers later: let other episodes run
        c = self.backend.generate_ids([prompt_ids], cfg)[0][0]
        return TokenOutput(list(c.token_ids), None if c.logprobs is None else list(c.logprobs))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_models import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def tok(tiny: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


@pytest.fixture(scope="module")
def server(small_index_dir: Path) -> Iterator[str]:
    with BackgroundServer(create_app(load_retriever(small_index_dir, encoder=HashingEncoder(256)))) as srv:
        yield srv.url


def _row(question: str, qid: str) -> dict[str, Any]:
    """A row of ``effirag export verl`` as verl hands it to ``run`` (the fields the loop reads, and others)."""
    return {
        "raw_prompt": [{"role": "user", "content": question}],
        "data_source": "effirag/searchr1/test",
        "extra_info": {"question": question, "question_id": qid, "protocol": "searchr1"},
        "index": 0,
    }


def _runs(out: Any, tok: Any) -> list[tuple[int, str]]:
    """The response as (mask, decoded text) runs of equal mask."""
    runs: list[tuple[int, list[int]]] = []
    for i, m in zip(out.response_ids, out.response_mask, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(i)
        else:
            runs.append((m, [i]))
    return [(m, tok.decode(ids)) for m, ids in runs]


@pytest.mark.slow
def test_multi_turn_episodes_search_the_retrieval_server_and_mask_what_it_inserted(
    tok: Any, server: str, small_index_dir: Path
) -> None:
    manager = StandInServerManager(ScriptedGenerator(TURNS, tokenizer=tok))
    engine = {"k": 2, "passage_mode": "sparse", "max_new_tokens": 64}

    async def both() -> list[Any]:
        loops = [
            EffiRAGAgentLoop(TRAINER, manager, tok, None, name="effirag", retriever=server, engine=engine)
            for _ in (Q1, Q2)
        ]
        return list(
            await asyncio.gather(
                *(lp.run(VERL_PARAMS, **_row(q, q[:5])) for lp, q in zip(loops, (Q1, Q2), strict=True))
            )
        )

    outs = asyncio.run(both())
    proto = get_protocol("searchr1")
    local = load_retriever(small_index_dir, encoder=HashingEncoder(256))
    for out, q, answer in zip(outs, (Q1, Q2), ("Rotterdam", "Amsterdam"), strict=True):
        assert tok.decode(out.prompt_ids) == f"<|user|>\n{proto.build_prompt(q)}\n<|assistant|>\n"  # chat template
        query = TURNS[q][0].split("<search> ")[1].split(" </search>")[0]
        obs = proto.wrap_observation(proto.render_items(local.retrieve(query, "sparse", 2).items))
        assert _runs(out, tok) == [(1, TURNS[q][0]), (0, obs), (1, TURNS[q][1])]
        assert out.response_logprobs is None  # a script has no distribution
        assert out.num_turns == 4  # user, assistant, tool, assistant
        assert out.extra_fields["effirag_searches"] == 1 and out.extra_fields["effirag_format_ok"] is True
        got = compute_score("effirag/searchr1/test", tok.decode(out.response_ids), answer, format_weight=0.5)
        assert (got["em"], got["format_ok"], got["searches"], got["score"]) == (1.0, 1.0, 1.0, 1.5)
    assert len(manager.requests) == 4
    by_episode: dict[str, list[tuple[list[int], dict[str, Any]]]] = {}
    for rid, ids, sp in manager.requests:
        by_episode.setdefault(rid, []).append((ids, sp))
        assert sp == {
            **VERL_PARAMS,
            "max_tokens": 64,
            "stop": ["</search>", "</answer>"],
            "include_stop_str_in_output": True,
        }
    assert sorted(len(v) for v in by_episode.values()) == [2, 2]  # one request id per episode, sticky
    for out in outs:  # the second turn continued the prompt, the first turn and the observation, as ids
        _, second = next(v for v in by_episode.values() if v[0][0] == out.prompt_ids)
        inserted_end = len(out.response_mask) - out.response_mask[::-1].index(0)
        assert second[0] == out.prompt_ids + out.response_ids[:inserted_end]


@pytest.mark.slow
def test_greedy_loop_equals_the_engine_on_the_same_hf_model(tiny: Path, tok: Any, server: str) -> None:
    """The tiny random model writes no tags: each turn is invalid and the engine's feedback follows it. Through the
    stand-in the loop's ids and log-probs are exactly the engine's own token segments on the HF backend."""
    from effirag.llm.hf import HFGenerator

    hf = HFGenerator(str(tiny))
    engine = {"max_steps": 2, "max_new_tokens": 12, "passage_mode": "sparse"}
    loop = EffiRAGAgentLoop(
        TRAINER, StandInServerManager(hf), tok, retriever=server, chat_template=False, engine=engine
    )
    out = asyncio.run(loop.run({"temperature": 0.0, "top_p": 1.0, "logprobs": True}, **_row(Q1, "q")))
    cfg = EngineConfig(token_ids=True, temperature=0.0, seed=None, **engine)
    ledger = run_episodes(hf, None, get_protocol("searchr1"), [Q1], cfg)[0].tokens
    want = [(s.kind.value, list(s.ids), None if s.logprobs is None else list(s.logprobs)) for s in ledger]
    assert [s[0] for s in want] == ["prompt", "generated", "feedback", "generated", "feedback"]
    assert out.prompt_ids == want[0][1]
    assert out.response_ids == [i for s in want[1:] for i in s[1]]
    assert out.response_mask == [int(s[0] == "generated") for s in want[1:] for _ in s[1]]
    expected = [lp for s in want[1:] for lp in (s[2] if s[0] == "generated" else [0.0] * len(s[1]))]
    assert out.response_logprobs == pytest.approx(expected, abs=1e-5)


def test_loop_output_masks_and_cuts_by_hand() -> None:
    """prompt [1, 2]; generated [3, 4] (lp −0.5, −0.25); inserted [5, 6, 7]; generated [8] (lp −1): mask
    1 1 0 0 0 1, log-probs −0.5 −0.25 0 0 0 −1; cut to 4 tokens: ids 3 4 5 6, mask 1 1 0 0."""
    segs = [TokenSegment(TokenKind.PROMPT, (1, 2)), TokenSegment(TokenKind.GENERATED, (3, 4), (-0.5, -0.25))]
    segs += [TokenSegment(TokenKind.INSERTED, (5, 6, 7)), TokenSegment(TokenKind.GENERATED, (8,), (-1.0,))]
    out = loop_output(segs, 100)
    assert (out.prompt_ids, out.response_ids) == ([1, 2], [3, 4, 5, 6, 7, 8])
    assert out.response_mask == [1, 1, 0, 0, 0, 1]
    assert out.response_logprobs == [-0.5, -0.25, 0.0, 0.0, 0.0, -1.0]
    cut = loop_output(segs, 4)
    assert (cut.response_ids, cut.response_mask, cut.response_logprobs) == (
        [3, 4, 5, 6],
        [1, 1, 0, 0],
        [-0.5, -0.25, 0.0, 0.0],
    )
    assert loop_output([segs[0], TokenSegment(TokenKind.GENERATED, (3,))], 9).response_logprobs is None
    with pytest.raises(DataError, match="second prompt"):
        loop_output([*segs, TokenSegment(TokenKind.PROMPT, (9,))], 9)


def test_bad_configs_and_rows_are_refused(tok: Any) -> None:
    manager = StandInServerManager(ScriptedGenerator([], tokenizer=tok))
    with pytest.raises(ConfigError, match=r"protocol.*rebuilt"):
        EffiRAGAgentLoop(TRAINER, manager, tok, protocol="reasonrag")
    with pytest.raises(ConfigError, match="retriver"):
        EffiRAGAgentLoop(TRAINER, manager, tok, retriver="http://x")
    with pytest.raises(ConfigError, match="response_length"):
        EffiRAGAgentLoop(SimpleNamespace(config={}), manager, tok)
    loop = EffiRAGAgentLoop(TRAINER, manager, tok)
    with pytest.raises(DataError, match=r"extra_info\.question"):
        asyncio.run(loop.run(VERL_PARAMS, raw_prompt=[], extra_info={"index": 0}))
