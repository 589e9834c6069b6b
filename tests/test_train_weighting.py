"""Decision-token loss weights: which positions get the weight, the weighted loss by hand, and the SFT run with it."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from effirag.train.weighting import collate_weighted, decision_weights, weighted_token_loss


def test_decision_weights_mark_the_trained_token_after_each_marker() -> None:
    """ids 5 9 7 9 8 3 with labels (−100 −100 7 9 8 −100) and marker [9], weight 4: the tokens after a 9 sit at
    positions 2 (label 7, trained) and 4 (label 8, trained) → 4 there, 1 elsewhere. The two-token marker [7, 9]
    ends at position 3, so only position 4 gets it. A marker followed by an untrained position (the 9 → 7 pair
    with position 2's label −100) changes nothing; an empty marker is skipped."""
    ids, labels = [5, 9, 7, 9, 8, 3], [-100, -100, 7, 9, 8, -100]
    assert decision_weights(ids, labels, [[9]], 4.0) == [1, 1, 4, 1, 4, 1]
    assert decision_weights(ids, labels, [[7, 9]], 4.0) == [1, 1, 1, 1, 4, 1]
    assert decision_weights(ids, [-100, -100, -100, 9, 8, -100], [[9], []], 4.0) == [1, 1, 1, 1, 4, 1]


def test_weighted_token_loss_by_hand() -> None:
    """Zero logits over 2 tokens: every CE is ln 2. Labels (−100, 0, 1) train positions 1 and 2, weighted 1 and 3:
    (ln 2 + 3 ln 2) / 2 trained tokens = 2 ln 2 = 1.386294; divided by num_items 4 instead: ln 2 = 0.693147."""
    logits = torch.zeros(1, 3, 2)  # (B, T, V)
    labels = torch.tensor([[-100, 0, 1]])
    w = torch.tensor([[1.0, 1.0, 3.0]])
    assert weighted_token_loss(logits, labels, w).item() == pytest.approx(2 * math.log(2), abs=1e-6)
    assert weighted_token_loss(logits, labels, w, num_items=4).item() == pytest.approx(math.log(2), abs=1e-6)


def test_unit_weights_are_plain_sft_loss() -> None:
    """All weights 1: the mean next-token cross-entropy over trained positions, as a causal LM computes it."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 7, generator=g)
    labels = torch.tensor([[-100, 3, 4, -100, 6], [-100, -100, 1, 2, 0]])
    plain = F.cross_entropy(logits[:, :-1].reshape(-1, 7), labels[:, 1:].reshape(-1), ignore_index=-100)
    assert weighted_token_loss(logits, labels, torch.ones(2, 5)).item() == pytest.approx(plain.item(), abs=1e-6)


def test_collate_pads_each_column_with_its_own_filler() -> None:
    rows = [
        {"input_ids": [4, 5, 6], "labels": [-100, 5, 6], "loss_weights": [1.0, 1.0, 3.0]},
        {"input_ids": [7], "labels": [7], "loss_weights": [2.0]},
    ]
    b = collate_weighted(rows, pad_id=0)
    assert b["input_ids"].tolist() == [[4, 5, 6], [7, 0, 0]]
    assert b["labels"].tolist() == [[-100, 5, 6], [7, -100, -100]]
    assert b["loss_weights"].tolist() == [[1.0, 1.0, 3.0], [2.0, 0.0, 0.0]]
    assert b["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]


def test_default_markers_weigh_the_search_or_answer_token() -> None:
    """With the protocols' tags as special tokens, the default markers (`</summary>` and `</think>`, each with its
    newline) put the weight on `Final` / `<entities>` and `<search>` / `<answer>`, nothing else."""
    from effirag.train.sft import SFTConfig
    from effirag.train.tokenizer import TokenizerConfig, train_tokenizer

    tok = train_tokenizer(["Final answer: Paris is a city. Who is Ana?"] * 20, TokenizerConfig(vocab_size=300))
    markers = [tok.encode(m, add_special_tokens=False) for m in SFTConfig().decision_markers]
    for text, decision in (
        ("<summary> Ana is a city. </summary>\nFinal answer: Paris", "Final"),
        ("<summary> Ana </summary>\n<entities> Ana </entities>", "<entities>"),
        ("<think> Who is Ana? </think>\n<search> Ana </search>", "<search>"),
        ("<think> Paris. </think>\n<answer> Paris </answer>", "<answer>"),
    ):
        ids = tok.encode(text, add_special_tokens=False)
        w = decision_weights(ids, ids, markers, 2.0)
        assert [tok.decode([i]).strip() for i, x in zip(ids, w, strict=True) if x == 2.0] == [decision], text


@pytest.mark.slow
def test_sft_run_with_a_decision_weight_weighs_the_decision(tmp_path: Path) -> None:
    """The same tiny model, data and seed, one logged step each: with weight 4 on the token after
    ``</information>`` (the ``<answer>`` that ends each search) the first step's loss is higher than plain SFT's,
    since that token's positive cross-entropy now counts four times over the same number of trained tokens."""
    from effirag.train.sft import run_sft
    from effirag.train.tokenizer import TokenizerConfig, train_tokenizer
    from test_train_sft import FACTS, _config, _examples, _model

    tok = train_tokenizer(
        [f"{n} was born in {p}. Where was {n} born?" for n, p in FACTS] * 10, TokenizerConfig(vocab_size=350)
    )
    losses = {}
    for w in (1.0, 4.0):
        cfg = replace(
            _config(tmp_path / str(w), 1, logging_steps=1), decision_weight=w, decision_markers=("</information>",)
        )
        torch.manual_seed(0)
        run_sft(cfg, _model(tok), tok, _examples(tok), progress=False)
        losses[w] = json.loads((tmp_path / str(w) / "loss_curve.json").read_text())[0]["loss"]
    assert losses[4.0] > losses[1.0] * 1.05, losses  # measured: 6.77 against 5.85
