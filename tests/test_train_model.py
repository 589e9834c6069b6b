"""Tokenizer training and the model factory: tags are atomic, text round-trips, models save and reload as HF."""

from __future__ import annotations

from pathlib import Path

import pytest

from effirag.errors import ConfigError
from effirag.train.model import ModelConfig, build_model, count_parameters
from effirag.train.tokenizer import TokenizerConfig, load_tokenizer, protocol_tags, train_tokenizer

TEXTS = [
    "Alice Moreau was born in Veltran. Veltran is the capital of Oskaria.",
    "Who is the father of Bruno Keller? Bruno Keller's father is Otto Keller.",
    "The Grand Hotel was designed by Lena Varga, who studied in Port Ilse.",
] * 20


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    return train_tokenizer(TEXTS, TokenizerConfig(vocab_size=400))


def test_every_protocol_tag_is_one_token_and_survives_decoding(tok) -> None:  # type: ignore[no-untyped-def]
    for tag in protocol_tags():
        ids = tok.encode(tag, add_special_tokens=False)
        assert len(ids) == 1, tag
    text = "<search> Who is the father of Bruno?</search>\n<information>Doc 1</information><answer>Otto</answer>"
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=True) == text


def test_unseen_text_round_trips_without_unknown_tokens(tok) -> None:  # type: ignore[no-untyped-def]
    text = "Ünïcode — never seen: 42 ¥ zq!"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_control_tokens(tok) -> None:  # type: ignore[no-untyped-def]
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>"
    assert tok.eos_token_id != tok.pad_token_id


@pytest.mark.parametrize("arch", ["qwen2", "llama", "lfm2"])
def test_build_save_reload(tok, tmp_path: Path, arch: str) -> None:  # type: ignore[no-untyped-def]
    """Hand counts, embeddings V×32 (tied) + 2 blocks + final norm 32. Qwen2 block: q 32·32+32, k,v 32·16+16 each,
    o 32·32, mlp 3·32·64, two RMSNorms 2·32 → 1056+528+528+1024+6144+64 = 9344 (Llama: no q/k/v biases → 9280).
    LFM2 with block 0 a convolution: conv block = in_proj 32·96 + depthwise conv 32·3 + out_proj 32·32 + mlp 6144
    + norms 64 = 3072+96+1024+6144+64 = 10400; attention block = q 32·32, k,v 32·16 each, out 32·32, q/k norms
    2·16, mlp 6144, norms 64 = 3072+32+6144+64 = 9312 → 19712 for both."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = ModelConfig(
        architecture=arch, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=1,
        conv_layers=(0,) if arch == "lfm2" else (),
    )  # fmt: skip
    model = build_model(cfg, tok)
    assert model.config.model_type == arch
    assert model.config.vocab_size == len(tok)
    blocks = {"qwen2": 2 * 9344, "llama": 2 * 9280, "lfm2": 10400 + 9312}[arch]
    assert count_parameters(model) == len(tok) * 32 + blocks + 32
    if arch == "lfm2":
        assert model.config.layer_types == ["conv", "full_attention"]
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    again = AutoModelForCausalLM.from_pretrained(tmp_path)
    ids = torch.tensor([tok.encode("Who is the father", add_special_tokens=False)])
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, again(ids).logits)
    assert load_tokenizer(tmp_path).encode("<answer>") == tok.encode("<answer>")


def test_same_seed_same_weights(tok) -> None:  # type: ignore[no-untyped-def]
    import torch

    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1, seed=3)
    a, b = build_model(cfg, tok), build_model(cfg, tok)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


def test_model_config_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="num_heads"):
        ModelConfig(hidden_size=30, num_heads=4)
    with pytest.raises(ConfigError, match="architecture"):
        ModelConfig(architecture="gpt2")
    with pytest.raises(ConfigError, match="conv_layers"):
        ModelConfig(conv_layers=(0,))  # qwen2 has no convolution blocks
    with pytest.raises(ConfigError, match=r"conv_layers.*\[4\]"):
        ModelConfig(architecture="lfm2", num_layers=4, conv_layers=(0, 4))
    with pytest.raises(ConfigError, match="no attention"):
        ModelConfig(architecture="lfm2", num_layers=2, conv_layers=(0, 1))
    with pytest.raises(ConfigError, match="vocab_size"):
        TokenizerConfig(vocab_size=10)


def test_tag_list_covers_every_tag_the_protocols_write() -> None:
    """Every ``<tag>``/``</tag>`` and ``[mode]`` marker that appears in a protocol's prompt or rendered turns is in
    the tokenizer's tag list (a tag missing there would be split into several pieces the policy must learn to spell;
    TeaRAG's <entities>/<subquery>/<summary> once were)."""
    import re

    from effirag.agent.protocols import PROTOCOLS, get_protocol

    found: set[str] = set()
    for name in PROTOCOLS:
        text = get_protocol(name).build_prompt("Who is it?", "Doc 1")
        found |= set(re.findall(r"</?[A-Za-z][A-Za-z ]*>|\[(?:passage|graph)\]", text))
    memory = get_protocol("tearag").render_memory_step(["A"], "Who is A?", "B")  # type: ignore[attr-defined]
    found |= set(re.findall(r"</?[A-Za-z][A-Za-z ]*>", memory))
    assert {"<entities>", "<subquery>", "<summary>", "<Reference>", "<search>", "<memory>"} <= found
    assert found <= set(protocol_tags()), sorted(found - set(protocol_tags()))


@pytest.mark.parametrize("arch", ["qwen2", "llama", "lfm2"])
def test_data_is_encoded_as_the_saved_checkpoint_loads(tmp_path: Path, arch: str) -> None:
    """transformers 5 loads a checkpoint's tokenizer by config.json's model type (Qwen2Tokenizer splits digits one by
    one, unlike the freshly trained byte-level BPE): ``as_loaded`` must give the tokenizer the checkpoint will load,
    so SFT data ids equal inference ids. The first assertion shows the two really differ for qwen2."""
    from transformers import AutoTokenizer

    from effirag.train.model import ModelConfig, build_model
    from effirag.train.tokenizer import as_loaded

    tok = train_tokenizer([*TEXTS, "Bruno Keller was born in 1965."] * 5, TokenizerConfig(vocab_size=400))
    assert len(tok.encode("1965", add_special_tokens=False)) < 4  # the BPE merged digits
    shape = ModelConfig(architecture=arch, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                        num_kv_heads=1, conv_layers=(0,) if arch == "lfm2" else ())  # fmt: skip
    model = build_model(shape, tok)
    loaded = as_loaded(tok, model.config, tmp_path / "t")
    text = "Bruno Keller was born in 1965 (Title: Keller).\n<answer> 1965 </answer>"
    if arch == "qwen2":
        assert tok.encode("1965", add_special_tokens=False) != loaded.encode("1965", add_special_tokens=False)
    model.save_pretrained(tmp_path / "ckpt")
    loaded.save_pretrained(tmp_path / "ckpt")
    again = AutoTokenizer.from_pretrained(tmp_path / "ckpt")
    assert type(again) is type(loaded)
    assert again.encode(text, add_special_tokens=False) == loaded.encode(text, add_special_tokens=False)
    assert again.decode(again.encode(text, add_special_tokens=False)) == text


@pytest.mark.parametrize("arch", ["qwen2", "lfm2"])
def test_entity_names_are_whole_word_tokens_after_reload(tmp_path: Path, arch: str) -> None:
    """``words`` become one token each, matched only as whole words and longest first: ``Port Ilse Harbour`` is
    one token, ``Port Ilse`` another; ``Port Ilsetown`` is not an entity and stays BPE pieces. A preceding space is
    its own token, so ``Oskaria`` has the same id after ``in`` and after ``(``. All of it survives the reload a
    checkpoint goes through, and text still round-trips."""
    from effirag.train.tokenizer import as_loaded

    words = ["Oskaria", "Port Ilse", "Port Ilse Harbour", "Lena Varga"]
    tok = train_tokenizer(TEXTS, TokenizerConfig(vocab_size=400), words=words)
    shape = ModelConfig(architecture=arch, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                        num_kv_heads=1, conv_layers=(0,) if arch == "lfm2" else ())  # fmt: skip
    loaded = as_loaded(tok, build_model(shape, tok).config, tmp_path / "t")
    ids = {w: loaded.convert_tokens_to_ids(w) for w in words}
    assert len(set(ids.values())) == 4 and loaded.unk_token_id not in ids.values()
    text = "Lena Varga studied in Port Ilse Harbour, not Port Ilse (Oskaria) or Port Ilsetown in Oskaria."
    enc = loaded.encode(text, add_special_tokens=False)
    assert loaded.decode(enc) == text
    assert [enc.count(ids[w]) for w in words] == [2, 1, 1, 1]
    assert not set(loaded.encode("or Port Ilsetown", add_special_tokens=False)) & set(ids.values())


def test_entity_tokens_refuse_a_name_with_outer_space() -> None:
    with pytest.raises(ValueError, match="' Oskaria'"):
        train_tokenizer(TEXTS, TokenizerConfig(vocab_size=400), words=[" Oskaria"])


@pytest.mark.parametrize("arch", ["qwen2", "lfm2"])
def test_copy_init_starts_with_a_copying_first_attention_block(tok, arch: str) -> None:  # type: ignore[no-untyped-def]
    """With ``copy_init`` = c, block 0's attention writes c × (the attended tokens' normalised embeddings).

    Worked by hand: v_proj = c·I and out_proj = I, so the block's output at position i is
    Σ_j a_ij · c · n_j, where n_j = RMSNorm_0(E[x_j]) and a_i· sums to 1. Feed one token x repeated: every n_j is the
    same vector n, so the output is c · n at every position, whatever the attention weights are. A random value
    path (the default) gives no such equality.
    """
    import torch

    conv = (1,) if arch == "lfm2" else ()
    kw = dict(architecture=arch, hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=2)
    cfg = ModelConfig(**kw, conv_layers=conv, embedding_init_std=1.0, final_norm_init=0.1, copy_init=0.5)
    model = build_model(cfg, tok)
    attn = model.model.layers[0].self_attn
    out_proj = attn.o_proj if arch == "qwen2" else attn.out_proj
    assert torch.equal(attn.v_proj.weight, 0.5 * torch.eye(32)) and torch.equal(out_proj.weight, torch.eye(32))
    final = model.model.norm if arch == "qwen2" else model.model.embedding_norm
    assert torch.all(final.weight == 0.1)
    emb = model.get_input_embeddings().weight
    assert 0.9 < float(emb.detach().std()) < 1.1  # 32 × vocab draws of N(0, 1)

    x = torch.full((1, 5), 7)  # (1, 5): one ordinary token, five times
    seen = {}
    attn.register_forward_hook(lambda _m, _i, out: seen.__setitem__("out", out[0]))
    norm_in = model.model.layers[0].input_layernorm if arch == "qwen2" else model.model.layers[0].operator_norm
    with torch.no_grad():
        model(x)
        expected = 0.5 * norm_in(emb[x[0, 0]])  # (hidden,)
    torch.testing.assert_close(seen["out"][0], expected.expand(5, 32), rtol=1e-4, atol=1e-5)

    plain = build_model(ModelConfig(**kw, conv_layers=conv), tok)
    assert not torch.allclose(plain.model.layers[0].self_attn.v_proj.weight, 0.5 * torch.eye(32))


def test_untied_head_starts_equal_to_the_large_embedding(tok) -> None:  # type: ignore[no-untyped-def]
    """Untied weights with ``embedding_init_std``: the output head starts as a copy of the redrawn embedding.

    Why it matters: the copy circuit scores the copied token by the dot product of head row and embedding; a head
    left at the default N(0, 0.02) draw would score it like any other token. The two stay separate tensors, so
    training one does not move the other.
    """
    import torch

    kw = dict(architecture="qwen2", hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2, num_kv_heads=2)
    model = build_model(ModelConfig(**kw, embedding_init_std=1.0, copy_init=1.0, tie_word_embeddings=False), tok)
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    assert head is not emb and head.data_ptr() != emb.data_ptr()
    assert torch.equal(head, emb) and 0.9 < float(emb.detach().std()) < 1.1
    with torch.no_grad():
        head.add_(1.0)
    assert not torch.equal(head, emb)


def test_copy_init_validation_names_the_field() -> None:
    with pytest.raises(ConfigError, match="num_kv_heads"):
        ModelConfig(num_heads=4, num_kv_heads=2, copy_init=1.0)
    with pytest.raises(ConfigError, match=r"conv_layers.*\[0\]"):
        ModelConfig(architecture="lfm2", num_heads=4, num_kv_heads=4, conv_layers=(0,), copy_init=1.0)
    with pytest.raises(ConfigError, match="embedding_init_std"):
        ModelConfig(embedding_init_std=-1.0)


def test_induction_init_copies_a_repeated_string_before_any_training(tok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With ``induction_init`` the (convolution, attention) pair is an induction head from the start.

    Worked by hand: the convolution's gates are 1 and its kernel picks position t-1, so block 0 adds the first half
    of n_{t-1} (the normalised previous token) to the residual's second half at t, where the embeddings are zero.
    Block 1's query reads the first half (token t), its key the second half (token s-1), through one projection, so
    q_t·k_s peaks where token(s-1) == token(t); the value copies token s, i.e. the token that followed the earlier
    occurrence. In rows ``p + s + s`` of distinct random tokens every position of the second ``s`` (after its first
    token) has exactly one such earlier match, so the untrained model predicts the next token there. Measured: 97% on
    these rows (101 of 104), against 0% for the same shape with a random start (chance is 1/400).
    """
    import random

    import torch

    def shape(induction: float) -> ModelConfig:
        return ModelConfig(architecture="lfm2", hidden_size=64, intermediate_size=128, num_layers=2, num_heads=2,
                           num_kv_heads=2, conv_layers=(0,), embedding_init_std=1.0, final_norm_init=0.0625,
                           induction_init=induction, rope_theta=1e6, max_position_embeddings=64)  # fmt: skip

    rng = random.Random(0)
    rows = []
    for _ in range(8):
        toks = rng.sample(range(100, len(tok)), 20)
        p, s = toks[:6], toks[6:]
        rows.append(p + s + s)
    x = torch.tensor(rows)  # (8, 34)
    target = x[:, 21:]  # second copy, from its second token: (8, 13)

    def accuracy(model) -> float:  # type: ignore[no-untyped-def]
        with torch.no_grad():
            pred = model(x).logits[:, 20:-1].argmax(-1)  # (8, 13): the prediction for each next position
        return (pred == target).float().mean().item()

    model = build_model(shape(3.0), tok)
    assert model.config.conv_bias is True
    emb = model.get_input_embeddings().weight  # (vocab, 64)
    assert emb[:, 32:].abs().max().item() == 0.0 and emb[:, :32].abs().min().item() > 0.0
    assert accuracy(model) > 0.9
    assert accuracy(build_model(shape(0.0), tok)) < 0.2
    model.save_pretrained(tmp_path / "m")  # a plain LFM2 checkpoint (conv biases on): the HF backend loads it as is
    from transformers import AutoModelForCausalLM

    assert accuracy(AutoModelForCausalLM.from_pretrained(tmp_path / "m")) == accuracy(model)


def test_induction_init_is_validated() -> None:
    with pytest.raises(ValueError, match="induction_init"):
        ModelConfig(architecture="qwen2", induction_init=1.0)
    with pytest.raises(ValueError, match="conv_layers"):
        ModelConfig(architecture="lfm2", num_layers=2, conv_layers=(1,), num_kv_heads=4, induction_init=1.0)
    with pytest.raises(ValueError, match="num_kv_heads"):
        ModelConfig(architecture="lfm2", num_layers=2, conv_layers=(0,), num_kv_heads=2, induction_init=1.0)
    fast = ModelConfig(architecture="lfm2", hidden_size=32, intermediate_size=64, num_layers=2, num_heads=2,
                       num_kv_heads=2, conv_layers=(0,), induction_init=1.0, rope_theta=10.0,
                       max_position_embeddings=4096)  # fmt: skip
    with pytest.raises(ValueError, match="raise rope_theta"):  # every rotary pair turns too fast to match by content
        build_model(fast, train_tokenizer(TEXTS, TokenizerConfig(vocab_size=400)))


def test_add_tokens_like_adds_one_token_starting_as_a_copy(tok) -> None:  # type: ignore[no-untyped-def]
    """A tag the tokenizer lacks becomes one token whose embedding row equals its start token's, so both have the same
    logit under a tied head; a held token is not added twice; an unknown start token is refused by name."""
    import copy

    import torch

    from effirag.train.model import add_tokens_like

    t = copy.deepcopy(tok)
    t.add_tokens(["<old>"])
    model = build_model(ModelConfig(architecture="lfm2", hidden_size=32, intermediate_size=64, num_layers=2,
                                    num_heads=2, num_kv_heads=1), t)  # fmt: skip
    n = len(t)
    assert len(t.encode("<new>", add_special_tokens=False)) > 1
    assert add_tokens_like(model, t, {"<new>": "<old>"}) == ["<new>"]
    assert len(t) == n + 1 and len(t.encode("<new>", add_special_tokens=False)) == 1
    emb = model.get_input_embeddings().weight
    i, j = t.convert_tokens_to_ids("<new>"), t.convert_tokens_to_ids("<old>")
    assert emb.shape[0] >= n + 1 and torch.equal(emb[i], emb[j])
    logits = model(torch.tensor([t.encode("Who is it?", add_special_tokens=False)])).logits[0, -1]
    assert logits[i] == logits[j]
    assert add_tokens_like(model, t, {"<new>": "<old>"}) == []
    with pytest.raises(ValueError, match="'<absent>'"):
        add_tokens_like(model, t, {"<x>": "<absent>"})
