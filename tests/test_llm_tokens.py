"""The token-level interface without vLLM: the grouping adapter over one-config backends, the shared finishing rule,
the vLLM backend's spec, config overrides and sampling settings (the engine itself is tested in tests/on_vllm/)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import pytest

from effirag.errors import BackendError
from effirag.llm.base import Completion, GenerationConfig
from effirag.llm.factory import make_generator
from effirag.llm.scripted import ScriptedGenerator
from effirag.llm.tokens import GroupedTokenGenerator, TokenRequest, as_token_level, finish_ids
from effirag.llm.vllm_engine import VLLMGenerator, config_overrides

DEMO_POLICY = Path(__file__).resolve().parents[1] / "checkpoints" / "demo-policy"


class _Recorder:
    """A one-config-per-call token generator: completion i of a call is the prompt ids + [config.max_new_tokens]."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple[list[tuple[int, ...]], GenerationConfig]] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        raise AssertionError("the token path must not generate from text")

    def encode(self, text: str, *, prompt: bool = False) -> list[int]:
        return [len(w) for w in text.split()]

    def generate_ids(self, prompts: Sequence[Sequence[int]], config: GenerationConfig) -> list[list[Completion]]:
        self.calls.append(([tuple(p) for p in prompts], config))
        ids = [(*p, config.max_new_tokens) for p in prompts]
        return [[Completion(text=str(i), token_ids=i)] * config.n for i in ids]


def test_grouped_adapter_one_call_per_config_results_in_request_order() -> None:
    inner = _Recorder()
    a, b = GenerationConfig(max_new_tokens=3), GenerationConfig(max_new_tokens=5, temperature=1.0, n=2)
    reqs = [TokenRequest((1,), a), TokenRequest((2,), b), TokenRequest((3,), a), TokenRequest((4, 4), b)]
    out = GroupedTokenGenerator(inner).generate_tokens(reqs)
    assert [[c.token_ids for c in cs] for cs in out] == [[(1, 3)], [(2, 5)] * 2, [(3, 3)], [(4, 4, 5)] * 2]
    assert inner.calls == [([(1,), (3,)], a), ([(2,), (4, 4)], b)]


def test_as_token_level_adapts_token_generators_and_rejects_text_only() -> None:
    adapted = as_token_level(ScriptedGenerator(["x"]))
    assert isinstance(adapted, GroupedTokenGenerator) and adapted.name.startswith("scripted:")
    vllm = VLLMGenerator(DEMO_POLICY)
    assert as_token_level(vllm) is vllm  # per-request natively

    class TextOnly:
        name = "text-only"

    with pytest.raises(BackendError, match="text-only: token-level generation needs"):
        as_token_level(TextOnly())


def _decode(ids: Sequence[int]) -> str:
    """Toy vocabulary: id i is the i-th character of the table below (id 0 is end-of-sequence, decoded as "")."""
    return "".join("_ab</>x"[i] for i in ids if i)


def test_finish_ids_cuts_at_eos_then_at_the_first_stop_string() -> None:
    # "ab" then EOS then more: cut before EOS (excluded), finish "stop", logprobs cut alongside.
    c = finish_ids([1, 2, 0, 1], [-0.1, -0.2, -0.3, -0.4], ("</x>",), frozenset({0}), _decode)
    assert (c.token_ids, c.text, c.finish_reason, c.logprobs, c.stop_string) == (
        (1, 2),
        "ab",
        "stop",
        (-0.1, -0.2),
        None,
    )
    # "a</x>ab": the stop string is completed by the 5th token; the text ends with it (kept).
    c = finish_ids([1, 3, 4, 6, 5, 1, 2], None, ("</x>",), frozenset({0}), _decode)
    assert (c.token_ids, c.text, c.stop_string, c.finish_reason) == ((1, 3, 4, 6, 5), "a</x>", "</x>", "stop")
    # Neither: the backend's reason stays.
    c = finish_ids([1, 2], None, ("</x>",), frozenset({0}), _decode, finish="length")
    assert (c.token_ids, c.finish_reason) == ((1, 2), "length")


def test_config_overrides_supply_lfm2_names_only() -> None:
    assert config_overrides({"model_type": "lfm2", "hidden_size": 256}) == {"block_dim": 256, "conv_dim": 256}
    assert config_overrides({"model_type": "lfm2", "hidden_size": 256, "block_dim": 64}) == {
        "block_dim": 64,
        "conv_dim": 256,
    }
    assert config_overrides({"model_type": "qwen2", "hidden_size": 64}) == {}
    with pytest.raises(BackendError, match="hidden_size=None"):
        config_overrides({"model_type": "lfm2"})


def test_vllm_spec_options_and_errors() -> None:
    gen = make_generator(f"vllm:{DEMO_POLICY}?dtype=float32&kv_cache_gb=0.5&eager=1&max_model_len=512", load=False)
    assert isinstance(gen, VLLMGenerator)
    assert (gen.name, gen.dtype, gen.kv_cache_gb, gen.eager, gen.max_model_len, gen.in_process) == (
        f"vllm:{DEMO_POLICY}",
        "float32",
        0.5,
        True,
        512,
        True,
    )
    assert gen.encode("Who", prompt=False) == list(gen.tokenizer.encode("Who", add_special_tokens=False))
    with pytest.raises(BackendError, match="unknown option 'device'"):
        make_generator(f"vllm:{DEMO_POLICY}?device=cpu", load=False)
    with pytest.raises(BackendError, match="dtype='int8'"):
        VLLMGenerator(DEMO_POLICY, dtype="int8")
    with pytest.raises(BackendError, match="kv_cache_gb=0"):
        VLLMGenerator(DEMO_POLICY, kv_cache_gb=0)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed: tests/on_vllm/ start it")
def test_vllm_missing_says_how_to_install() -> None:
    with pytest.raises(BackendError, match="make vllm-venv"):
        VLLMGenerator(DEMO_POLICY).load()
