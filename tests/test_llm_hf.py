"""HFGenerator on tiny random-init models built here from a config (Qwen2 and Llama), plus the stop-string helpers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from effirag.errors import BackendError
from effirag.llm.base import GenerationConfig, Generator
from effirag.llm.hf import HFGenerator
from effirag.llm.stops import first_stop, strip_stop, truncate_at_stop
from tiny_models import make_tiny_model

PROMPTS = [
    "Who directed the film?",
    "The river",
    "EffiRAG answers questions with the fewest tokens, steps and searches.",
    "<search> director </search>",
]


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> HFGenerator:
    path = make_tiny_model(tmp_path_factory.mktemp("qwen2"), arch="qwen2")
    return HFGenerator(path, device="cpu", max_batch_size=8).load()


# ---------------------------------------------------------------- pure stop-string helpers


def test_truncate_at_stop_keeps_the_first_ending_stop() -> None:
    """ "a</s>b</t>" with stops ("</t>", "</s>"): "</s>" ends at offset 4, "</t>" at 9 → cut after "</s>"."""
    assert truncate_at_stop("a</s>b</t>", ("</t>", "</s>")) == ("a</s>", "</s>")
    assert truncate_at_stop("no stop here", ("</s>",)) == ("no stop here", None)
    assert truncate_at_stop("x", ()) == ("x", None)


def test_first_stop_prefers_earliest_end_then_longer() -> None:
    """ "abcd": "bc" ends at 3, "abc" ends at 3 too but is longer (started earlier), "d" ends at 4 → "abc"."""
    assert first_stop("abcd", ("d", "bc", "abc")) == (3, "abc")
    assert first_stop("abcd", ("", "zz")) is None
    assert strip_stop("q </search>", "</search>") == "q "
    assert strip_stop("q", None) == "q"


# ---------------------------------------------------------------- the backend


def test_is_a_generator_with_cheap_init(tmp_path: Path) -> None:
    g = HFGenerator(tmp_path / "absent")  # nothing is read yet
    assert isinstance(g, Generator)
    assert g.name == f"hf:{tmp_path / 'absent'}"
    with pytest.raises(BackendError, match="absent"):
        g.load()
    with pytest.raises(BackendError, match="dtype"):
        HFGenerator(tmp_path, dtype="int3")


def test_count_tokens_uses_the_policy_tokenizer(gen: HFGenerator) -> None:
    text = "Who directed the film?"
    assert gen.count_tokens(text) == len(gen.tokenizer.encode(text, add_special_tokens=False)) > 0
    assert gen.count_tokens("") == 0


@pytest.mark.slow
def test_batched_equals_one_by_one_under_greedy(gen: HFGenerator) -> None:
    cfg = GenerationConfig(max_new_tokens=12)
    batched = gen.generate(PROMPTS, cfg)
    single = [gen.generate([p], cfg)[0] for p in PROMPTS]
    assert [[c.token_ids for c in cs] for cs in batched] == [[c.token_ids for c in cs] for cs in single]
    assert [[c.text for c in cs] for cs in batched] == [[c.text for c in cs] for cs in single]
    # Prompts of different lengths really were padded together.
    assert len({len(gen.tokenizer.encode(p)) for p in PROMPTS}) > 1
    for (c,) in batched:
        assert len(c.token_ids) == 12 and c.finish_reason == "length" and c.stop_string is None
        assert gen.tokenizer.decode(list(c.token_ids), skip_special_tokens=True) == c.text


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "lfm2"])
def test_other_architectures_and_small_chunks(tmp_path: Path, arch: str) -> None:
    """Left padding must not change a row's greedy output; for LFM2 this checks that the convolution blocks do not
    mix pad tokens into the first real tokens."""
    g = HFGenerator(make_tiny_model(tmp_path, arch=arch, seed=3), device="cpu", max_batch_size=2)
    cfg = GenerationConfig(max_new_tokens=6)
    batched = g.generate(PROMPTS, cfg)  # 4 prompts in chunks of 2
    single = [g.generate([p], cfg)[0] for p in PROMPTS]
    assert [cs[0].token_ids for cs in batched] == [cs[0].token_ids for cs in single]


def test_stop_string_taken_from_the_models_own_greedy_output(gen: HFGenerator) -> None:
    full = gen.generate([PROMPTS[0]], GenerationConfig(max_new_tokens=20))[0][0]
    stop = full.text[6:9]
    assert len(stop) == 3
    expected = full.text[: full.text.find(stop) + len(stop)]
    c = gen.generate([PROMPTS[0], PROMPTS[1]], GenerationConfig(max_new_tokens=20, stop=("@@never@@", stop)))[0][0]
    assert c.text == expected and c.text.endswith(stop)
    assert c.stop_string == stop and c.finish_reason == "stop"
    # token_ids are the sampled tokens up to the one completing the stop; one fewer would not contain it.
    assert c.token_ids == full.token_ids[: len(c.token_ids)]
    decoded = gen.tokenizer.decode(list(c.token_ids), skip_special_tokens=True)
    assert decoded.startswith(c.text)
    shorter = gen.tokenizer.decode(list(c.token_ids[:-1]), skip_special_tokens=True)
    assert stop not in shorter


def test_eos_ends_a_row_and_is_not_returned(gen: HFGenerator) -> None:
    full = gen.generate([PROMPTS[2]], GenerationConfig(max_new_tokens=10))[0][0]
    k = next(i for i, t in enumerate(full.token_ids) if i > 0 and t not in full.token_ids[:i])
    saved = gen._eos_ids
    gen._eos_ids = frozenset({full.token_ids[k]})  # pretend that token is EOS: generation must end before it
    try:
        c = gen.generate([PROMPTS[2]], GenerationConfig(max_new_tokens=10))[0][0]
    finally:
        gen._eos_ids = saved
    assert c.token_ids == full.token_ids[:k]
    assert c.finish_reason == "stop" and c.stop_string is None


def test_seeded_sampling_is_reproducible_and_n_samples(gen: HFGenerator) -> None:
    cfg = GenerationConfig(max_new_tokens=8, temperature=1.0, top_p=0.9, n=3, seed=11)
    a = gen.generate(PROMPTS[:2], cfg)
    b = gen.generate(PROMPTS[:2], cfg)
    assert a == b
    assert [len(cs) for cs in a] == [3, 3]
    other = gen.generate(PROMPTS[:2], GenerationConfig(max_new_tokens=8, temperature=1.0, n=3, seed=12))
    assert other != a
    assert len({c.token_ids for c in a[0]}) > 1  # the samples of one prompt differ
    # the global RNG is untouched by a seeded call
    torch.manual_seed(0)
    x = torch.rand(1)
    torch.manual_seed(0)
    gen.generate(PROMPTS[:1], cfg)
    assert torch.equal(torch.rand(1), x)


def test_greedy_n_copies(gen: HFGenerator) -> None:
    (cs,) = gen.generate([PROMPTS[1]], GenerationConfig(max_new_tokens=5, n=2))
    assert len(cs) == 2 and cs[0] == cs[1]


def test_logprobs_align_with_tokens_and_match_a_forward_pass(gen: HFGenerator) -> None:
    c = gen.generate([PROMPTS[0]], GenerationConfig(max_new_tokens=7, logprobs=True))[0][0]
    assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids) == 7
    assert all(lp <= 0.0 for lp in c.logprobs)
    prompt = gen.tokenizer.encode(PROMPTS[0])
    ids = torch.tensor([prompt + list(c.token_ids)])
    with torch.no_grad():
        logits = gen.model(ids).logits[0]  # (len, vocab)
    lp = torch.log_softmax(logits.float(), -1)
    ref = [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(c.token_ids)]
    assert c.logprobs == pytest.approx(ref, abs=1e-4)
    # greedy: every chosen token is the argmax of the model's distribution
    assert [int(lp[len(prompt) - 1 + i].argmax()) for i in range(7)] == list(c.token_ids)


def test_empty_and_bad_inputs(gen: HFGenerator) -> None:
    assert gen.generate([], GenerationConfig()) == []
    with pytest.raises(BackendError, match="sequence of prompts"):
        gen.generate("one string", GenerationConfig())  # type: ignore[arg-type]


def test_from_loaded_wraps_an_in_memory_model_and_restores_train_mode(gen: HFGenerator) -> None:
    cfg = GenerationConfig(max_new_tokens=6)
    expected = gen.generate(PROMPTS[:2], cfg)
    wrapped = HFGenerator.from_loaded(gen.model, gen.tokenizer, name="policy")
    assert wrapped.name == "hf:policy"
    gen.model.train()
    try:
        assert wrapped.generate(PROMPTS[:2], cfg) == expected  # generated in eval mode
        assert gen.model.training  # the caller's train mode is restored
    finally:
        gen.model.eval()


# ---------------------------------------------------------------- frequency / presence penalties


def test_output_penalties_by_hand() -> None:
    """Logits [2, 1, 0] with counts [3, 0, 1] (token 0 generated three times, token 2 once):
    frequency 0.5, presence 0.25 → [2 - 1.5 - 0.25, 1 - 0 - 0, 0 - 0.5 - 0.25] = [0.25, 1.0, -0.75].
    Frequency alone (0.5): [0.5, 1.0, -0.5]. Zero penalties give the very same tensor back."""
    from effirag.llm.penalties import output_penalties

    logits = torch.tensor([[2.0, 1.0, 0.0]])
    counts = torch.tensor([[3, 0, 1]])
    assert torch.allclose(output_penalties(logits, counts, 0.5, 0.25), torch.tensor([[0.25, 1.0, -0.75]]))
    assert torch.allclose(output_penalties(logits, counts, 0.5, 0.0), torch.tensor([[0.5, 1.0, -0.5]]))
    assert output_penalties(logits, counts, 0.0, 0.0) is logits


def test_generated_counts_skip_the_prompt_block() -> None:
    """Rows [[9, 9, 1, 1, 2], [0, 3, 3, 4, 1]] with a 2-column prompt block: row 0 generated 1, 1, 2 → counts[1] = 2,
    counts[2] = 1 and token 9 (prompt only) is 0; row 1 generated 3, 4, 1 → one each, token 3 once (its prompt copy
    is not counted)."""
    from effirag.llm.penalties import generated_counts

    ids = torch.tensor([[9, 9, 1, 1, 2], [0, 3, 3, 4, 1]])
    c = generated_counts(ids, prompt_len=2, vocab_size=10)
    assert c.shape == (2, 10)
    assert c[0].tolist() == [0, 2, 1, 0, 0, 0, 0, 0, 0, 0]
    assert c[1].tolist() == [0, 1, 0, 1, 1, 0, 0, 0, 0, 0]
    assert generated_counts(ids, prompt_len=5, vocab_size=10).sum() == 0


def test_presence_penalty_forbids_repeats_and_leaves_the_prompt_free(gen: HFGenerator) -> None:
    """A random tiny model's greedy continuation repeats tokens; with presence penalty 2 on top of frequency 2 a
    token that has been generated once is pushed down by 4 logits, past every other token of a random-init model
    (its logits spread by far less), so no token repeats. The backend's processor counts from the end of the padded
    prompt block: token 5, in the prompt only, keeps its score 3.0; token 7, generated twice, loses 2 × 2 + 2 = 6."""
    from effirag.llm.hf import _OutputPenalty

    plain = gen.generate([PROMPTS[1]], GenerationConfig(max_new_tokens=24))[0][0]
    assert len(set(plain.token_ids)) < len(plain.token_ids)  # the unpenalised model repeats itself
    cfg = GenerationConfig(max_new_tokens=24, frequency_penalty=2.0, presence_penalty=2.0)
    pen = gen.generate([PROMPTS[1]], cfg)[0][0]
    assert len(set(pen.token_ids)) == len(pen.token_ids)
    assert pen.token_ids[0] == plain.token_ids[0]  # nothing generated yet: the first token is unchanged

    ids = torch.tensor([[0, 5, 5, 7, 7]])  # a 3-column prompt block (pad, 5, 5), then 7 generated twice
    scores = torch.full((1, 10), 3.0)
    out = _OutputPenalty(2.0, 2.0, prompt_len=3)(ids, scores)
    assert out[0, 5] == 3.0 and out[0, 7] == -3.0 and out[0, 0] == 3.0


def test_penalties_are_validated() -> None:
    from effirag.errors import ConfigError

    with pytest.raises(ConfigError, match="frequency_penalty"):
        GenerationConfig(frequency_penalty=2.5)
    with pytest.raises(ConfigError, match="presence_penalty"):
        GenerationConfig(presence_penalty=-3.0)
