"""Chat prompts for instruct models (``hf:DIR?chat=1``, ``vllm:DIR?chat=1``): the protocol's prompt becomes the user
message of the model's chat template, the episode continues inside the opened assistant turn, prompts get no extra
special tokens, and a protocol that rebuilds its prompt is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.env import EnvConfig
from effirag.errors import BackendError, ConfigError
from effirag.llm.chat import as_chat, chat_prompt
from effirag.llm.factory import backend_options, make_generator
from effirag.llm.hf import HFGenerator
from test_engine_support import LexicalRetriever
from tiny_models import make_tiny_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("chat_tiny"), arch="llama", seed=5)


def test_chat_prompt_renders_the_user_message_and_opens_the_assistant_turn(model_dir: Path) -> None:
    """tiny_models' template: ``<|user|>\\n{content}\\n`` then ``<|assistant|>\\n`` for the generation prompt."""
    gen = HFGenerator(model_dir, chat=True)
    assert gen.format_prompt("Question: Q?\n") == "<|user|>\nQuestion: Q?\n\n<|assistant|>\n"
    assert HFGenerator(model_dir).format_prompt("Question: Q?\n") == "Question: Q?\n"  # chat off: unchanged
    assert as_chat(object(), "text") == "text"  # a backend without format_prompt (scripted, HTTP): unchanged


def test_a_tokenizer_without_template_is_refused(model_dir: Path) -> None:
    tok = HFGenerator(model_dir).tokenizer
    tok.chat_template = None
    with pytest.raises(BackendError, match=r"hf:X: chat=1 needs a tokenizer with a chat template"):
        chat_prompt(tok, "Q", "hf:X")


def test_backend_specs_take_chat(model_dir: Path) -> None:
    hf = make_generator(f"hf:{model_dir}?chat=1", load=False)
    assert hf.chat and not hf.add_special_tokens  # type: ignore[attr-defined]
    assert hf.name == f"hf:{model_dir}?chat=1"  # what run records (eval qa's run.json) name the backend by
    assert not make_generator(f"hf:{model_dir}", load=False).chat  # type: ignore[attr-defined]
    vllm = make_generator(f"vllm:{model_dir}?chat=1", load=False)  # not started: no vLLM needed
    assert vllm.chat and vllm.format_prompt("Q") == "<|user|>\nQ\n<|assistant|>\n"  # type: ignore[attr-defined]
    with pytest.raises(BackendError, match=r"option chat='maybe' must be a flag"):
        make_generator(f"hf:{model_dir}?chat=maybe", load=False)


def test_env_chat_reads_the_spec_as_the_backend_does() -> None:
    """EnvConfig.chat (whether RL rollouts use the chat template) parses the model spec's options with the backend
    factory's own parser: the same flag words, and a malformed value fails the same way instead of reading as off."""
    assert backend_options("hf:D?chat=yes&dtype=bf16") == {"chat": True, "dtype": "bf16"}
    assert backend_options("openai:http://h:1/v1#m?tokenizer=T&concurrency=4") == {"tokenizer": "T", "concurrency": 4}
    assert backend_options("D") == {} and backend_options("scripted:F") == {}
    assert EnvConfig(model="vllm:D?eager=1&chat=true").chat
    assert not EnvConfig(model="hf:D?chat=0").chat and not EnvConfig(model="hf:D").chat
    with pytest.raises(ConfigError, match=r"EnvConfig.model.*option chat='maybe' must be a flag"):
        EnvConfig(model="hf:D?chat=maybe")  # at construction, before any property is read
    with pytest.raises(ConfigError, match=r"unknown option 'chta'"):
        EnvConfig(model="hf:D?chta=1")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["searchr1", "hiprag", "naive"])
def test_the_episode_runs_inside_the_chat_turn(model_dir: Path, name: str) -> None:
    """The trajectory's prompt is the chat-wrapped protocol prompt followed by the episode's turns; its token count
    is the wrapped prompt's; the token path encodes the wrapped prompt without added special tokens."""
    gen = HFGenerator(model_dir, device="cpu", chat=True).load()
    protocol = get_protocol(name)
    cfg = EngineConfig(max_steps=2, max_new_tokens=6, max_inserted_tokens=32, k=1)
    for token_ids in (False, True):
        cfg = EngineConfig(**{**cfg.__dict__, "token_ids": token_ids})
        (t,) = run_episodes(gen, LexicalRetriever(), protocol, ["Who directed Blue River?"], cfg)
        head = t.prompt[: t.extras["prompt_chars"]]
        assert head.startswith("<|user|>\n") and head.endswith("\n<|assistant|>\n")
        assert head[len("<|user|>\n") : -len("\n<|assistant|>\n")].startswith(protocol.build_prompt("Who")[:40])
        assert t.extras["prompt_tokens"] == gen.count_tokens(head)
        if token_ids:
            first = t.tokens[0]
            assert first.kind == "prompt" and list(first.ids) == gen.tokenizer.encode(head, add_special_tokens=False)


def test_a_rebuilt_prompt_protocol_is_refused_with_chat(model_dir: Path) -> None:
    gen = HFGenerator(model_dir, device="cpu", chat=True)
    with pytest.raises(BackendError, match="chat=1 wraps an append-only prompt; reasonrag rebuilds its own"):
        run_episodes(gen, LexicalRetriever(), get_protocol("reasonrag"), ["Q?"], EngineConfig(max_steps=1))
