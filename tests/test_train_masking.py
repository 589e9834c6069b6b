"""Loss masking for SFT (TeaRAG eq. 4): span splitting, labels, and the masked loss itself."""

from __future__ import annotations

import math

import pytest
import torch

from effirag.train.masking import (
    IGNORE_INDEX,
    InsertedSpan,
    Segment,
    build_example,
    encode_segments,
    masked_fraction,
    masked_nll,
    split_inserted,
)

INFO = InsertedSpan("<information>", "</information>")
REF = InsertedSpan("<Reference>", "</Reference>")


class CharTokenizer:
    """One id per character (ord), so expected ids and labels can be written by hand."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]


def test_split_inserted_masks_whole_spans_with_delimiters() -> None:
    text = "<search>q</search><information>doc</information><answer>a</answer>"
    assert split_inserted(text, [INFO]) == [
        Segment("<search>q</search>", True),
        Segment("<information>doc</information>", False),
        Segment("<answer>a</answer>", True),
    ]


def test_split_inserted_several_kinds_and_unclosed_tail() -> None:
    text = "s1 <Reference>r1</Reference> m <information>i1</information><Reference>cut"
    assert split_inserted(text, [INFO, REF]) == [
        Segment("s1 ", True),
        Segment("<Reference>r1</Reference>", False),
        Segment(" m ", True),
        Segment("<information>i1</information><Reference>cut", False),  # adjacent masked spans merge
    ]


def test_split_inserted_without_spans_is_one_trained_segment() -> None:
    assert split_inserted("plain", [INFO]) == [Segment("plain", True)]
    assert split_inserted("", [INFO]) == []


def test_build_example_labels_by_hand() -> None:
    """prompt "P" (masked), completion "a<I>x</I>b" with span <I>…</I>, eos id 0.

    ids    = P a < I > x < / I > b eos
    labels = - a - - - - - - - - b eos     (- = −100): P and the 8 characters of "<I>x</I>" are masked
    → 9 masked positions out of 12 → masked fraction 0.75.
    """
    tok = CharTokenizer()
    ids, labels = build_example("P", "a<I>x</I>b", tok, [InsertedSpan("<I>", "</I>")], eos_id=0)
    assert ids == [ord(c) for c in "Pa<I>x</I>b"] + [0]
    m = IGNORE_INDEX
    assert labels == [m, ord("a"), m, m, m, m, m, m, m, m, ord("b"), 0]
    assert masked_fraction(labels) == pytest.approx(9 / 12)


def test_build_example_truncates_at_the_right() -> None:
    ids, labels = build_example("PP", "abc", CharTokenizer(), [], max_length=3)
    assert ids == [ord("P"), ord("P"), ord("a")]
    assert labels == [IGNORE_INDEX, IGNORE_INDEX, ord("a")]


def test_encode_segments_never_straddles_a_boundary() -> None:
    ids, labels = encode_segments([Segment("ab", False), Segment("cd", True)], CharTokenizer())
    assert ids == [97, 98, 99, 100]
    assert labels == [IGNORE_INDEX, IGNORE_INDEX, 99, 100]


def test_masked_nll_hand_worked() -> None:
    """Vocabulary of 2, T = 3, uniform logits at t=0 and logits (ln 3, 0) at t=1.

    Position 0 predicts token 1 (label 1, trained): −log(1/2) = ln 2.
    Position 1 predicts token 2 (label −100): m = 0, ignored.
    L = ln 2 / 1 = 0.6931…  Were position 2 trained with label 0: −log(3/4) = 0.2877, L = (ln 2 + 0.2877)/2.
    """
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0], [0.0, 0.0]]])
    labels = torch.tensor([[IGNORE_INDEX, 1, IGNORE_INDEX]])
    assert masked_nll(logits, labels).item() == pytest.approx(math.log(2))
    labels2 = torch.tensor([[IGNORE_INDEX, 1, 0]])
    assert masked_nll(logits, labels2).item() == pytest.approx((math.log(2) - math.log(0.75)) / 2)


def test_masked_nll_is_zero_when_nothing_is_trained() -> None:
    logits = torch.randn(1, 4, 5)
    assert masked_nll(logits, torch.full((1, 4), IGNORE_INDEX)).item() == 0.0


def _tiny_lm(vocab: int = 50) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
    )
    return Qwen2ForCausalLM(cfg).eval()


def test_model_loss_equals_eq4_and_ignores_masked_targets() -> None:
    """The HF model's loss with −100 labels is eq. 4, and changing the masked tokens' targets changes nothing."""
    model = _tiny_lm()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 7, 8, IGNORE_INDEX, IGNORE_INDEX, 11, 12]])
    with torch.no_grad():
        out = model(input_ids=ids, labels=labels)
        assert out.loss.item() == pytest.approx(masked_nll(out.logits, labels).item(), rel=1e-5)


def test_sft_loss_unchanged_when_masked_tokens_change() -> None:
    """Two sequences that differ only inside an inserted span at the end of the completion (a retrieved document
    the engine appended, cut by max_length) have exactly the same SFT loss: the span is masked as a target, and a
    causal model's earlier predictions cannot see it."""
    tok = CharTokenizer()
    model = _tiny_lm(vocab=128)
    a = build_example("Q?", "s<information>doc one", tok, [INFO])
    b = build_example("Q?", "s<information>XYZ ABC", tok, [INFO])
    assert a[0] != b[0] and a[1] == b[1]
    with torch.no_grad():
        la = model(input_ids=torch.tensor([a[0]]), labels=torch.tensor([a[1]])).loss
        lb = model(input_ids=torch.tensor([b[0]]), labels=torch.tensor([b[1]])).loss
    assert la.item() == lb.item()


def test_loss_changes_when_trained_tokens_change() -> None:
    """The control of the test above: changing a *trained* token does change the loss."""
    tok = CharTokenizer()
    model = _tiny_lm(vocab=128)
    a = build_example("Q?", "sa<information>doc</information>", tok, [INFO])
    b = build_example("Q?", "sb<information>doc</information>", tok, [INFO])
    with torch.no_grad():
        la = model(input_ids=torch.tensor([a[0]]), labels=torch.tensor([a[1]])).loss
        lb = model(input_ids=torch.tensor([b[0]]), labels=torch.tensor([b[1]])).loss
    assert la.item() != lb.item()
