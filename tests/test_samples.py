"""Episode → training sample on the engine's token path: the ids fed back are the ids sampled, the mask marks exactly
the policy's tokens, and the behaviour logprobs are the model's own (re-scoring reproduces them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from effirag.agent import EngineConfig, get_protocol, run_episodes
from effirag.errors import BackendError, DataError
from effirag.llm.base import Completion, GenerationConfig, TokenGenerator
from effirag.llm.hf import HFGenerator
from effirag.llm.scripted import ScriptedGenerator
from effirag.train.samples import episode_samples, sample_record, samples_from_episodes
from effirag.types import Trajectory
from test_engine_support import LexicalRetriever
from tiny_models import make_tiny_model

SEARCH = "<search> Blue River director </search>"
ANSWER = "<answer> Ana Lopez </answer>"
Q = "Who directed Blue River?"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("samples_tiny"), arch="qwen2", seed=5)


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


class RecordingIds(ScriptedGenerator):
    """Scripted token generator that records the prompt ids of every generate_ids call."""

    def __init__(self, completions: Any, tokenizer: Any) -> None:
        super().__init__(completions, tokenizer)
        self.id_prompts: list[list[int]] = []

    def generate_ids(self, prompts: Sequence[Sequence[int]], config: GenerationConfig) -> list[list[Completion]]:
        self.id_prompts += [list(p) for p in prompts]
        assert config.logprobs  # the token path asks for behaviour logprobs
        return super().generate_ids(prompts, config)


def _run(gen: Any, protocol: str = "searchr1", **kw: Any) -> list[Trajectory]:
    cfg = EngineConfig(token_ids=True, record_segments=True, k=1, **kw)
    return run_episodes(gen, LexicalRetriever(), get_protocol(protocol), [Q], cfg)


def test_scripted_episode_sample_decodes_to_the_episode_and_masks_policy_turns(tok: Any) -> None:
    gen = RecordingIds(["<search></search>", SEARCH, ANSWER], tok)
    assert isinstance(gen, TokenGenerator)
    [traj] = _run(gen)
    kinds = [seg.kind for seg in traj.tokens]
    assert kinds == ["prompt", "generated", "feedback", "generated", "inserted", "generated"]
    [s] = episode_samples(traj, {"outcome": 1.0})
    assert s.rewards == {"outcome": 1.0} and s.turn == 0 and s.old_logprobs is None  # a script has no logprobs
    assert tok.decode(list(s.input_ids)) == traj.prompt
    # The mask's runs of 1 are exactly the three policy turns, the runs of 0 the feedback and the observation.
    texts = [seg for _, seg in traj.extras["segments"]]
    runs: list[tuple[int, list[int]]] = []
    for m, t in zip(s.mask, s.completion_ids, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(t)
        else:
            runs.append((m, [t]))
    assert [m for m, _ in runs] == [1, 0, 1, 0, 1]
    assert [tok.decode(ids) for _, ids in runs] == texts[1:]
    assert s.policy_tokens == sum(len(tok.encode(t)) for t in ("<search></search>", SEARCH, ANSWER))
    assert s.full_mask == (0,) * len(s.prompt_ids) + s.mask
    # Each turn was generated from the concatenated ids, not from the re-encoded text.
    seg_ids = [list(seg.ids) for seg in traj.tokens]
    upto = [[t for seg in seg_ids[:n] for t in seg] for n in (1, 3, 5)]
    assert gen.id_prompts == upto
    assert sample_record(s)["mask"] == list(s.mask)


def test_rebuilt_prompt_protocol_gives_one_sample_per_turn(tok: Any) -> None:
    gen = RecordingIds(["<query> Lyon </query>", "<evidence> x </evidence>", ANSWER], tok)
    [traj] = _run(gen, "reasonrag")
    samples = episode_samples(traj)
    assert [s.turn for s in samples] == [0, 1, 2]
    assert [list(s.prompt_ids) for s in samples] == gen.id_prompts  # each turn's prompt as the policy saw it
    assert all(set(s.mask) == {1} for s in samples)  # the observation after turn 0 is in turn 1's prompt, untrained
    assert [tok.decode(list(s.completion_ids)) for s in samples] == [
        "<query> Lyon </query>",
        "<evidence> x </evidence>",
        ANSWER,
    ]


def test_token_path_refuses_generators_without_ids(tok: Any) -> None:
    with pytest.raises(BackendError, match="token_ids=True needs a generator"):
        _run(_TextOnly([ANSWER]))
    with pytest.raises(BackendError, match="needs a tokenizer"):
        _run(ScriptedGenerator([ANSWER]))
    [plain] = run_episodes(ScriptedGenerator([ANSWER]), None, get_protocol("searchr1"), [Q])
    with pytest.raises(DataError, match=r"no token ledger.*token_ids=True"):
        episode_samples(plain)
    with pytest.raises(ValueError, match="1 reward dicts for 2"):
        samples_from_episodes([plain, plain], [{}])


class _TextOnly:
    def __init__(self, texts: list[str]) -> None:
        self.inner = ScriptedGenerator(texts)
        self.name = "text-only"

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def generate(self, prompts: Sequence[str], config: GenerationConfig) -> list[list[Completion]]:
        return self.inner.generate(prompts, config)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_hf_behaviour_logprobs_are_reproduced_by_rescoring_the_ids(model_dir: Path, temperature: float) -> None:
    import torch

    hf = HFGenerator(model_dir, device="cpu").load()
    trajs = _run(hf, max_steps=3, max_new_tokens=10, max_inserted_tokens=40, n=2, temperature=temperature, seed=3)
    samples = samples_from_episodes(trajs)
    assert len(samples) == 2 and any(s.inserted_tokens for s in samples)  # random weights: feedback got inserted
    for traj, s in zip(trajs, samples, strict=True):
        assert s.old_logprobs is not None and len(s.old_logprobs) == len(s.completion_ids)
        policy = [seg.ids for seg in traj.tokens if seg.trained]
        assert s.policy_tokens == sum(len(p) for p in policy) == traj.generated_tokens
        with torch.no_grad():
            logits = hf.model(torch.tensor([s.input_ids])).logits[0].float()  # (len, vocab)
        lp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor([s.input_ids[1:]]).T).squeeze(1)
        rescored = lp[len(s.prompt_ids) - 1 :].tolist()  # position t scores token t + 1
        for j, m in enumerate(s.mask):
            if m:
                assert rescored[j] == pytest.approx(s.old_logprobs[j], abs=1e-4)
            else:
                assert s.old_logprobs[j] == 0.0
